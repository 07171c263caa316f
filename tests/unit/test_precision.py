"""bf16 against fp32 (benchmarks.precision): the split, the paired fits and their summary, bad input,
and the generated page. Tiny models here: a CPU without native bfloat16 emulates it slowly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.precision import compare, record

TINY_NPT = {"embed_dim": 8, "n_layers": 2, "n_heads": 2, "lr": 1e-3, "batch_size": None, "eval_every_epochs": 1}
TINY_BISHOP = {
    "d_model": 16,
    "n_heads": 2,
    "ffn_dim": 32,
    "embed_dim": 8,
    "patch_size": 4,
    "n_pooling": 3,
    "n_levels": 1,
    "merge_factor": 2,
    "n_decoded": 4,
    "head_hidden": (1.0,),
    "batch_size": 128,
    "onednn_linear": False,
}


def test_the_split_is_fixed_stratified_and_standardised_on_training_rows():
    first, again = compare.load_split("breast_cancer"), compare.load_split("breast_cancer")
    sizes = {role: len(y) for role, y in first.y.items()}
    assert sum(sizes.values()) == 569 and sizes["test"] == 114 and sizes["val"] == 91
    for role in first.x:
        assert np.array_equal(first.x[role], again.x[role]) and np.array_equal(first.y[role], again.y[role])
    assert np.allclose(first.x["train"].mean(0), 0, atol=1e-5) and np.allclose(first.x["train"].std(0), 1, atol=1e-4)
    rates = [first.y[role].mean() for role in ("train", "val", "test")]
    assert max(rates) - min(rates) < 0.02  # stratified
    digits = compare.load_split("digits")
    assert digits.n_classes == 10 and np.isfinite(digits.x["train"]).all()  # constant pixels kept finite


def test_both_precisions_fit_each_model_and_pair_up(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(compare, "NPT_SETTINGS", TINY_NPT)
    monkeypatch.setattr(compare, "BISHOP_SETTINGS", TINY_BISHOP)
    target = tmp_path / "precision.json"
    argv = ["--datasets", "breast_cancer", "--npt-steps", "2", "--bishop-epochs", "1", "--threads", "1"]
    assert compare.main([*argv, "--json", str(target)]) == 0
    payload = json.loads(target.read_text())
    assert [(f["model"], f["precision"]) for f in payload["fits"]] == [
        ("npt", "fp32"),
        ("npt", "bf16"),
        ("bishop", "fp32"),
        ("bishop", "bf16"),
    ]
    for fit in payload["fits"]:
        assert fit["best_val_loss"] > 0 and 0 <= fit["test_accuracy"] <= 1 and fit["fit_s"] > 0
    npt_fp32, npt_bf16 = payload["fits"][:2]
    assert npt_fp32["best_val_loss"] != npt_bf16["best_val_loss"]  # bf16 did change the arithmetic
    rows = payload["summary"]
    assert [row["model"] for row in rows] == ["npt", "bishop"]
    assert rows[0]["val_loss_delta"] == pytest.approx(npt_bf16["best_val_loss"] - npt_fp32["best_val_loss"])
    assert payload["machine"]["device"] == "cpu" and payload["machine"]["git_commit"]
    out = capsys.readouterr().out
    assert "best val loss fp32 / bf16" in out and out.count("seed 0") == 4

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{record.BEGIN}\nold\n{record.END}\n")
    assert record.main([str(target), "--page", str(readme)]) == 0
    text = readme.read_text()
    assert "| npt | breast_cancer | 0 |" in text and "| bishop | breast_cancer | 0 |" in text and "old" not in text
    assert record.main([str(target), "--page", str(readme), "--check"]) == 0


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--datasets", "iris"], "--datasets: unknown 'iris'"),
        (["--models", "tabnet"], "--models: unknown 'tabnet'"),
        (["--npt-steps", "0"], "--npt-steps must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert compare.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_device_cuda_without_a_gpu_is_refused(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert compare.main(["--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_the_precision_page_is_generated_from_the_committed_runs():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    runs = sorted((root / "records" / "precision").glob("*.json"))
    assert runs, "no committed bf16-against-fp32 run under records/precision"
    assert record.update_page(root / record.BLOCK.page, runs, check=True), (
        f"{record.BLOCK.page}'s precision block is stale: python -m benchmarks.precision.record"
    )
