"""The fidelity driver (benchmarks.versus fidelity) on a tiny configuration: both sides trained to the
end on our folds, scored with our metric code, judged by the scorecard engine, recorded and
resumed. The authors' code is replaced by a local stand-in (a logistic regression behind the
driver's interface) except in the last, optional test."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from benchmarks.steps import common as nn_bench
from benchmarks.versus import authors, cli, fidelity
from tabrepro.config import Params

NPT_MIRROR = Path("/work/.mirror/OATML+non-parametric-transformers/repo")
BISHOP_MIRROR = Path("/work/.mirror/MAGICS-LAB+BiSHop/repo")
PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


@pytest.fixture
def in_process(monkeypatch):
    """Our side in this process (no spawned interpreter); the thread count restored after."""
    threads = torch.get_num_threads()
    monkeypatch.setattr(nn_bench, "run_in_subprocess", lambda function, *args, **kwargs: function(*args, **kwargs))
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def their_repo(tmp_path) -> Path:
    """A one-commit git repository standing in for the authors' (obtain clones it)."""
    path = tmp_path / "theirs"
    path.mkdir()
    run = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*run, "init", "--quiet"], cwd=path, check=True)
    (path / "README").write_text("stand-in\n")
    subprocess.run([*run, "add", "README"], cwd=path, check=True)
    subprocess.run([*run, "commit", "--quiet", "-m", "stand-in"], cwd=path, check=True)
    return path


class StandIn:
    """The authors' driver replaced: a logistic regression on the spec's training rows, with the
    driver's answer (test probabilities in the order of spec["test"], best epoch, steps)."""

    def __init__(self, fail_on_call: int | None = None):
        self.specs: list[dict] = []
        self.fail_on_call = fail_on_call

    def __call__(self, spec: dict, workdir: Path, timeout_s: float, module: str = "") -> dict:
        self.specs.append(spec)
        if self.fail_on_call is not None and len(self.specs) == self.fail_on_call:
            raise KeyboardInterrupt  # the run stopped in its second authors' training
        x, y = np.asarray(spec["x"]), np.asarray(spec["y"])
        model = LogisticRegression(max_iter=200).fit(x[spec["train"]], y[spec["train"]])
        proba = model.predict_proba(x[spec["test"]])
        steps = spec["settings"]["max_steps" if spec["model"] == "npt" else "epochs"]
        return {"proba_test": proba.tolist(), "best_epoch": steps, "steps": steps, "seconds": 0.1, "parameters": 31}


def _argv(repo: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "fidelity",
        "--npt-repo",
        str(repo),
        "--cases",
        "npt_tiny",
        "--params",
        str(PARAMS),
        "--record-dir",
        str(tmp_path / "records"),
        "--scratch",
        str(tmp_path / "scratch"),
        *extra,
    ]


def test_both_sides_train_on_our_folds_and_are_judged(in_process, their_repo, tmp_path, monkeypatch, capsys):
    stand_in = StandIn()
    monkeypatch.setattr(authors, "run_driver", stand_in)
    assert cli.main(_argv(their_repo, tmp_path)) == 0
    record = json.loads((tmp_path / "records" / "npt_tiny.json").read_text())
    assert record["settings"]["steps"] == 3 and record["settings"]["seeds"] == 2
    assert record["settings"]["ours_config"]["embed_dim"] == 8
    assert record["settings"]["authors_settings"] == {
        "embed_dim": 8, "n_layers": 2, "n_heads": 2, "lr": 0.0005, "flat_fraction": 0.5,
        "max_steps": 3, "p_feature": 0.15, "p_target": 1.0,
    }  # fmt: skip
    assert len(record["authors_commit"]) == 40
    # their side got our folds: disjoint test rows, seeded by fold, the rest split train/validation
    tests = [set(spec["test"]) for spec in stand_in.specs]
    assert [spec["seed"] for spec in stand_in.specs] == [0, 1] and not tests[0] & tests[1]
    problem = fidelity.npt_problem(Params.from_file(PARAMS))
    for spec, fold in zip(stand_in.specs, problem.folds, strict=False):
        assert spec["test"] == fold.test.tolist() and spec["train"] == fold.train.tolist()
        assert abs(np.asarray(spec["x"])[fold.train].mean(axis=0)).max() < 1e-9  # standardised on train rows
    # both sides scored on the same test rows by our metric code
    for seed, spec in enumerate(stand_in.specs):
        theirs, ours = record["runs"]["authors"][str(seed)], record["runs"]["ours"][str(seed)]
        y_test = np.asarray(spec["y"])[spec["test"]]
        assert theirs["metrics"]["auroc"] == pytest.approx(roc_auc_score(y_test, theirs["p_positive_test"]), abs=1e-6)
        assert theirs["test_rows"] == ours["test_rows"] == len(spec["test"])
        assert ours["steps"] == 3 and 0 < ours["best_step"] <= 3 and theirs["best_step"] == 3
    summary = record["summary"]
    assert summary["complete"] and summary["seeds_compared"] == [0, 1]
    auroc = summary["metrics"]["auroc"]
    assert auroc["authors"]["n"] == auroc["ours"]["n"] == 2
    assert auroc["delta"] == pytest.approx(auroc["ours"]["mean"] - auroc["authors"]["mean"])
    assert auroc["ci95"][0] < auroc["delta"] < auroc["ci95"][1] and auroc["margin"] == "±0.01"
    assert auroc["verdict"] in ("reproduced", "differs", "shifted", "cannot be decided", "inconclusive")
    assert auroc["paired"]["mean"] == pytest.approx(auroc["delta"])
    assert summary["best_validation_step"]["authors"]["per_seed"] == [3, 3]
    assert "npt_tiny (2/2 seeds): auroc authors" in capsys.readouterr().out
    report = (tmp_path / "records" / "README.md").read_text()
    assert "## `npt_tiny`" in report and f"| auroc | {auroc['authors']['mean']:.4g} ± " in report
    assert record["authors_commit"] in report and "Incomplete" not in report
    check = ["fidelity", "--report-only", "--check", "--record-dir", str(tmp_path / "records")]
    assert cli.main(check) == 0
    (tmp_path / "records" / "README.md").write_text("edited by hand\n")
    assert cli.main(check) == 1 and cli.main(check[:2] + check[3:]) == 0 and cli.main(check) == 0


def test_an_interrupted_run_resumes_where_it_stopped(in_process, their_repo, tmp_path, monkeypatch):
    monkeypatch.setattr(authors, "run_driver", StandIn(fail_on_call=2))
    with pytest.raises(KeyboardInterrupt):
        cli.main(_argv(their_repo, tmp_path))
    path = tmp_path / "records" / "npt_tiny.json"
    partial = json.loads(path.read_text())
    assert list(partial["runs"]["authors"]) == ["0"] and list(partial["runs"]["ours"]) == ["0"]
    assert partial["summary"]["complete"] is False
    resumed = StandIn()
    monkeypatch.setattr(authors, "run_driver", resumed)
    assert cli.main(_argv(their_repo, tmp_path)) == 0
    assert [spec["seed"] for spec in resumed.specs] == [1]  # seed 0 was not trained again
    record = json.loads(path.read_text())
    assert record["runs"]["authors"]["0"] == partial["runs"]["authors"]["0"]
    assert record["summary"]["complete"] and len(record["machines"]) == 2
    assert "Incomplete: 1 of 2 seeds" not in (tmp_path / "records" / "README.md").read_text()


def test_the_committed_fidelity_report_is_generated_from_the_committed_records():
    directory = Path(__file__).resolve().parents[2] / "records" / "fidelity"
    if not any(directory.glob("*.json")):
        pytest.skip("no fidelity record committed")
    assert fidelity.write_report(directory, check=True), (
        "records/fidelity/README.md is stale: python -m benchmarks.versus fidelity --report-only"
    )


def test_a_record_of_other_settings_or_a_corrupt_one_is_one_line_and_exit_2(
    in_process, their_repo, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(authors, "run_driver", StandIn())
    assert cli.main(_argv(their_repo, tmp_path, "--seeds", "1")) == 0
    path = tmp_path / "records" / "npt_tiny.json"
    before = path.read_text()
    capsys.readouterr()
    assert cli.main(_argv(their_repo, tmp_path, "--seeds", "1", "--steps", "4")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other settings" in err[0] and str(path) in err[0]
    assert path.read_text() == before
    path.write_text('{"runs": ')
    assert cli.main(_argv(their_repo, tmp_path, "--seeds", "1")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a fidelity record" in err[0]


def test_bad_numbers_and_unknown_cases_are_one_line_and_exit_2(their_repo, tmp_path, capsys):
    assert cli.main(_argv(their_repo, tmp_path, "--steps", "0")) == 2
    assert "--steps must be at least 1" in capsys.readouterr().err
    assert cli.main(["fidelity", "--cases", "no_such_case"]) == 2
    assert "unknown case 'no_such_case'" in capsys.readouterr().err


def test_a_case_not_run_is_recorded_with_its_reason(tmp_path, monkeypatch):
    blocked = fidelity.FidelityCase("blocked", "bishop", "a case that cannot run here", not_run="not run: a reason")
    monkeypatch.setitem(fidelity.CASES, "blocked", blocked)
    argv = ["fidelity", "--cases", "blocked", "--params", str(PARAMS), "--record-dir", str(tmp_path)]
    assert cli.main(argv) == 0
    record = json.loads((tmp_path / "blocked.json").read_text())
    assert record["not_run"] == "not run: a reason" and record["runs"] == {"authors": {}, "ours": {}}


def _bishop_argv(repo: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "fidelity", "--bishop-repo", str(repo), "--cases", "bishop_tiny", "--params", str(PARAMS),
        "--record-dir", str(tmp_path / "records"), "--scratch", str(tmp_path / "scratch"), *extra,
    ]  # fmt: skip


def test_bishop_sides_train_the_same_rows_and_settings_for_every_seed(in_process, their_repo, tmp_path, monkeypatch):
    stand_in = StandIn()
    monkeypatch.setattr(authors, "run_driver", stand_in)
    monkeypatch.setitem(authors.STEP_DEPENDENCIES, "bishop", {})  # the stand-in needs no einops
    assert cli.main(_bishop_argv(their_repo, tmp_path)) == 0
    record = json.loads((tmp_path / "records" / "bishop_tiny.json").read_text())
    assert record["settings"]["authors_settings"] == {
        "batch_size": 32, "out_len": 8, "patch_dim": 4, "emb_dim": 8, "n_agg": 4, "factor": 2, "d_model": 16,
        "d_ff": 32, "n_heads": 2, "e_layers": 1, "d_layers": 1, "dropout": 0.2, "learning_rate": 5e-05, "epochs": 2,
    }  # fmt: skip
    ours = record["settings"]["ours_config"]
    assert ours["decoder_input_level"] and ours["optimizer"] == "adamw" and ours["max_epochs"] == 2
    # one split for every seed: the same rows on both sides and across seeds
    assert [spec["seed"] for spec in stand_in.specs] == [0, 1]
    assert stand_in.specs[0]["test"] == stand_in.specs[1]["test"] and stand_in.specs[0]["model"] == "bishop"
    for seed in ("0", "1"):
        theirs, mine = record["runs"]["authors"][seed], record["runs"]["ours"][seed]
        assert theirs["test_rows"] == mine["test_rows"] == len(stand_in.specs[0]["test"])
        assert mine["steps"] == 2 and 1 <= mine["best_step"] <= 2
    assert record["summary"]["complete"] and "auroc" in record["summary"]["metrics"]


def test_their_table_holds_the_fold_rows_in_their_encoding():
    from benchmarks.versus.fidelity_driver import npt_tables

    x = np.arange(12, dtype=float).reshape(6, 2)
    spec = {"x": x.tolist(), "y": [0, 1, 1, 0, 1, 0], "n_classes": 2, "train": [4, 0, 2], "val": [5], "test": [1, 3]}
    data_dict, metadata, sigmas, order = npt_tables(spec)
    assert order == [4, 0, 2, 5, 1, 3]
    target = data_dict["data_arrs"][0]
    assert target.shape == (6, 3) and target[:, :2].int().argmax(dim=1).tolist() == [1, 0, 1, 0, 1, 0]
    assert not target[:, 2].any()  # the mask-token column
    assert data_dict["data_arrs"][1][:, 0].tolist() == x[order, 0].tolist()
    assert data_dict["new_train_val_test_indices"] == [[0, 1, 2], [3], [4, 5]]
    assert data_dict["test_mask_matrix"][:, 0].tolist() == [False] * 4 + [True] * 2
    assert metadata["input_feature_dims"] == [3, 2, 2] and metadata["auroc_setting"] is False
    assert sigmas == [-1.0, 1.0, 1.0]


@pytest.mark.skipif(not NPT_MIRROR.is_dir(), reason="no copy of the NPT authors' repository here")
def test_their_npt_trains_to_the_end_in_its_own_process(tmp_path):
    argv = _argv(NPT_MIRROR, tmp_path, "--steps", "2")
    assert cli.main(argv) == 0
    record = json.loads((tmp_path / "records" / "npt_tiny.json").read_text())
    for seed in ("0", "1"):
        theirs = record["runs"]["authors"][seed]
        assert theirs["steps"] == 2 and theirs["best_step"] in (1, 2) and 0.0 <= theirs["metrics"]["auroc"] <= 1.0
    assert record["summary"]["complete"]


@pytest.mark.skipif(not BISHOP_MIRROR.is_dir(), reason="no copy of the BiSHop authors' repository here")
def test_their_bishop_trains_to_the_end_in_its_own_process(tmp_path):
    if importlib.util.find_spec("einops") is None:
        pytest.skip("einops, which their model imports, is not installed here")
    assert cli.main(_bishop_argv(BISHOP_MIRROR, tmp_path, "--seeds", "1")) == 0
    theirs = json.loads((tmp_path / "records" / "bishop_tiny.json").read_text())["runs"]["authors"]["0"]
    assert theirs["steps"] == 2 and theirs["best_step"] in (1, 2) and 0.0 <= theirs["metrics"]["auroc"] <= 1.0
