"""The HTML report end to end on a tiny results tree (real prepare/split/tables, an untrained tiny
NPT standing in for a trained fold), the `analyse`/`report` commands, and a headless-Chromium
screenshot of the page."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from conftest import copy_workflow, repo_raw_params, snakemake, tiny_profile, write_params
from tabrepro.cli import main as tabrepro_main
from tabrepro.config import Job
from tabrepro.figures import critical_difference, critical_difference_diagram
from tabrepro.reporting.html import INDEX, BrowserError, find_chromium, screenshot, se_units

PROFILE = "reporttest"
SMALL_ANALYSIS = {
    "folds": [0],
    "device": "cpu",
    "corruption": {"max_test_rows": 6},
    "deletion": {"max_test_rows": 3, "max_context_rows": 40, "max_proposals": 60},
    "attention": {"n_reference_rows": 1, "max_rows": 48},
    "lookup": {
        "n_train_rows": 256,
        "n_val_rows": 32,
        "n_test_rows": 32,
        "batch_rows": 16,
        "variants": ["original", "add_one"],
        "intervention_rows": 2,
        "model": {"embed_dim": 8, "n_layers": 2, "n_heads": 2, "steps": 30},
    },
}

torch.set_num_threads(1)


def _cli(*args: str) -> int:
    from tabrepro.cli import main

    return main(list(args))


def _write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))


def _fake_npt_fold(params, fold: int) -> None:
    """Weights of an untrained tiny NPT for the fold's attribute layout, and its metrics.json."""
    from tabrepro.data.table import load_table
    from tabrepro.features import categorical
    from tabrepro.models.npt import NPTConfig, NPTNetwork
    from tabrepro.models.npt.estimator import feature_attributes
    from tabrepro.preprocessing import Preprocessor
    from tabrepro.provenance import provenance
    from tabrepro.splits import fold_path, load_split

    table = load_table(params.processed_dir("breast_cancer"))
    split = load_split(fold_path(params.split_dir("npt", "breast_cancer"), fold))
    layout = Preprocessor().fit(table.frame, table.schema, split.train).feature_layout
    selected = {"embed_dim": 4, "n_layers": 2, "n_heads": 1, "max_steps": 10}
    torch.manual_seed(fold)
    model = NPTNetwork((*feature_attributes(layout), categorical(2, "target")), NPTConfig(**selected))
    job_dir = Path(params.results_dir) / "npt" / "breast_cancer" / "npt" / f"fold{fold}"
    job_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), job_dir / "weights.pt")
    _write_json(
        job_dir / "metrics.json",
        {
            "paper": "npt",
            "dataset": "breast_cancer",
            "model": "npt",
            "fold": fold,
            "task": "binary",
            "metrics": {"test": {"auroc": 0.99, "auc_pct": 99.0, "accuracy_pct": 95.0, "nll": 0.12}, "val": {}},
            "selected_config": selected,
            "wall_time_s": 120.0 + fold,
            "peak_memory_mb": 900.0,
            "peak_gpu_memory_mb": 300.0,
            "provenance": provenance(),
            "profile": PROFILE,
            "params_digest": params.job_digest(Job("npt", "breast_cancer", "npt", fold)),
        },
    )


def _fake_baseline(params, model: str, fold: int, auroc: float) -> None:
    from tabrepro.provenance import provenance

    path = Path(params.results_dir) / "npt" / "breast_cancer" / model / f"fold{fold}" / "metrics.json"
    _write_json(
        path,
        {
            "paper": "npt",
            "dataset": "breast_cancer",
            "model": model,
            "fold": fold,
            "task": "binary",
            "metrics": {
                "test": {"auroc": auroc, "auc_pct": 100 * auroc, "accuracy_pct": 100 * auroc - 3, "nll": 1.1 - auroc},
                "val": {},
            },
            "wall_time_s": 1.5 + fold,
            "peak_memory_mb": 400.0,
            "provenance": provenance(),
            "profile": PROFILE,
            "params_digest": params.job_digest(Job("npt", "breast_cancer", model, fold)),
        },
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """params.yaml with a small profile, breast cancer prepared and split, fake fold results,
    every analysis experiment run through `tabrepro analyse`, and the report built."""
    from tabrepro.config import Params
    from tabrepro.models.registry import MODEL_NAMES

    if "npt" not in MODEL_NAMES:
        pytest.skip("the NPT model is not registered yet")
    root = tmp_path_factory.mktemp("report")
    params_file = write_params(
        root,
        tiny_profile(["knn", "random_forest", "npt"], description="report test", max_configs=2, folds=[0, 1]),
        name=PROFILE,
        mutate=lambda raw: raw.update(analysis={PROFILE: SMALL_ANALYSIS}),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TABREPRO_DATA_DIR", raising=False)
        assert _cli("--params", str(params_file), "-q", "prepare", "breast_cancer") == 0
        assert _cli("--params", str(params_file), "-q", "split", "npt", "breast_cancer") == 0
        params = Params.from_file(params_file)
        for fold in (0, 1):
            _fake_npt_fold(params, fold)
            _fake_baseline(params, "knn", fold, 0.97 + 0.01 * fold)
            _fake_baseline(params, "random_forest", fold, 0.99 - 0.005 * fold)
        assert _cli("--params", str(params_file), "-q", "tables", "npt") == 0
        for experiment in ("corruption", "deletion", "attention"):
            assert (
                tabrepro_main(
                    ["--params", str(params_file), "analyse", "npt", "breast_cancer", experiment, "--fold", "0"]
                )
                == 0
            )
        assert tabrepro_main(["--params", str(params_file), "analyse", "npt", "synthetic", "lookup"]) == 0
        # A result of another profile, which the report must leave out.
        _write_json(
            root / "results/analysis/lookup/elsewhere/result.json",
            {"experiment": "lookup", "profile": "other", "source": "STALE-SOURCE", "variants": {}},
        )
        stale = root / "results/report/stale.png"
        stale.parent.mkdir(parents=True)
        stale.write_bytes(b"old")
        assert tabrepro_main(["--params", str(params_file), "report"]) == 0
        yield {"root": root, "params": params_file, "report": root / "results/report"}


def test_analysis_results_are_written(workspace):
    base = workspace["root"] / "results/analysis"
    corruption = json.loads((base / "corruption/breast_cancer/fold0/result.json").read_text())
    assert corruption["n_test_rows"] == 6 and corruption["profile"] == PROFILE
    assert corruption["table2"]["metric"] == "delta_accuracy_pct" and corruption["table2"]["paper"] == 0.0
    assert {"accuracy_pct", "nll", "auroc"} <= set(corruption["clean"])
    deletion = json.loads((base / "deletion/breast_cancer/fold0/result.json").read_text())
    assert deletion["n_test_rows"] == 3 and all(r["proposals"] <= 60 for r in deletion["runs"])
    assert (base / "deletion/breast_cancer/fold0/deletion_hist.png").stat().st_size > 1000
    attention = json.loads((base / "attention/breast_cancer/fold0/result.json").read_text())
    assert attention["n_abd_layers"] == 1 and len(attention["references"][0]["summary"]) == 1
    for name in attention["figures"]:
        assert (base / "attention/breast_cancer/fold0" / name).stat().st_size > 1000
    lookup = json.loads((base / "lookup/synthetic/result.json").read_text())
    assert set(lookup["variants"]) == {"original", "add_one"}
    assert lookup["variants"]["original"]["rmse"]["1-NN"] == 0.0  # exact duplicates
    assert lookup["variants"]["add_one"]["rmse"]["1-NN"] == pytest.approx(1.0)  # +1 everywhere
    assert "_attention" not in lookup["variants"]["add_one"]


def test_report_page_lists_everything_and_links_existing_figures(workspace):
    report = workspace["report"]
    page = (report / INDEX).read_text(encoding="utf-8")
    for text in (
        "table10: Test AUROC",
        "in SE units",
        "paper vs ours",
        "critical differences",
        "compute cost",
        "Corruption of the other datapoints",
        "Semi-synthetic lookup",
        "Data deletion",
        "Attention between datapoints",
        "Provenance",
        PROFILE,
        "NPT",
    ):
        assert text in page, text
    assert "STALE-SOURCE" not in page  # another profile's analysis result is left out
    assert not (report / "stale.png").exists()  # the directory was replaced as a whole
    images = re.findall(r'<img src="([^"]+)"', page)
    assert len(images) >= 12
    for name in images:
        data = (report / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 2000, name
    for name in (
        "npt_table10_bars.png",
        "npt_scatter.png",
        "npt_mean_rank.png",
        "npt_cd.png",
        "npt_cost.png",
        "corruption.png",
        "lookup_rmse.png",
        "lookup_interventions.png",
        "deletion_breast_cancer.png",
    ):
        assert name in images, name
    # The AUROC table has the paper's NPT value beside ours, and a difference in SE units.
    ranks = page.split('id="npt-ranks"')[1].split("<h2")[0]
    assert "Friedman test over 2 blocks and 3 methods" in ranks and "not independent" in ranks
    assert "Greyed, because" in ranks  # one dataset: folds are no independent blocks, no CD claim
    hardware = page.split('id="provenance-hardware"')[1]
    assert 'class="warning"' not in hardware  # every result here was written on this machine
    assert "npt/breast_cancer/knn (folds 0–1)" in hardware
    section = page.split('id="npt_table10"')[1].split("<h3")[0]
    row = re.search(r"<td[^>]*>breast_cancer</td><td[^>]*>NPT</td>(.*?)</tr>", section)
    assert row and "0.997" in row.group(1) and re.search(r"[+-]\d+\.\d\d</td>", row.group(1))


def test_report_cli_errors_name_the_bad_input(workspace, capsys):
    params = str(workspace["params"])
    assert tabrepro_main(["--params", params, "analyse", "npt", "no_such_data", "corruption", "--fold", "0"]) == 2
    assert "no_such_data" in capsys.readouterr().err
    assert (
        tabrepro_main(
            [
                "--params",
                params,
                "analyse",
                "npt",
                "breast_cancer",
                "corruption",
                "--fold",
                "0",
                "--weights",
                "/nonexistent/weights.pt",
            ]
        )
        == 2
    )
    assert "/nonexistent/weights.pt" in capsys.readouterr().err
    assert tabrepro_main(["--params", params, "analyse", "npt", "breast_cancer", "deletion"]) == 2
    assert "--fold" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tabrepro_main(["--params", params, "analyse", "npt", "breast_cancer", "nonsense"])


def test_tables_and_report_refuse_results_written_under_other_parameters(workspace, tmp_path, capsys):
    raw = yaml.safe_load(workspace["params"].read_text())
    raw["seed"] = 1  # every job's digest changes; the stored metrics.json are now stale
    edited = tmp_path / "params.yaml"
    edited.write_text(yaml.safe_dump(raw, sort_keys=False))
    table = workspace["root"] / "results/tables/npt/table10.md"
    before = table.read_bytes()
    assert tabrepro_main(["--params", str(edited), "-q", "tables", "npt"]) == 2
    err = capsys.readouterr().err
    assert "metrics.json: written under other parameters" in err and "fold0" in err
    assert table.read_bytes() == before
    assert tabrepro_main(["--params", str(edited), "report", "--output-dir", str(tmp_path / "report")]) == 2
    assert "written under other parameters" in capsys.readouterr().err


def test_the_analysis_sparsity_and_report_commands_are_in_the_main_cli():
    from tabrepro import cli

    commands = next(a for a in cli.build_parser()._actions if a.dest == "command").choices
    for name, func in (
        ("analyse", cli.cmd_analyse),
        ("sparsity", cli.cmd_sparsity),
        ("sparsity-plot", cli.cmd_sparsity_plot),
        ("report", cli.cmd_report),
    ):
        assert commands[name].get_default("func") is func


def test_se_units_and_critical_difference():
    assert se_units(95.0, 0.5, 94.0, None) == pytest.approx(2.0)
    assert se_units(95.0, 0.3, 94.0, 0.4) == pytest.approx(2.0)
    assert se_units(95.0, None, 94.0, None) is None
    assert se_units(None, 0.3, 94.0, 0.4) is None
    # Demšar (2006): k = 7 methods, N = 10 datasets, q_0.05 = 2.949.
    assert critical_difference(7, 10) == pytest.approx(2.949 * np.sqrt(7 * 8 / 60), rel=1e-6)
    assert critical_difference(12, 20) > critical_difference(11, 20)  # beyond the table: scipy


def test_the_cost_section_reads_the_papers_reported_cost_from_the_reference_csv():
    """NPT's Tables 6-7 (App. B.6) are reference-CSV rows; the page prints them as the paper does."""
    from tabrepro.reference import reported_costs
    from tabrepro.reporting.html.cost import _cost_text, _paper_note

    costs = reported_costs("npt")
    assert {key: _cost_text(cost) for key, cost in costs.items()} == {
        ("protein", "NPT"): "11 h 51 m, 6.17 GB (GPU)",
        ("higgs", "NPT"): "5 d 22 h, 19.18 GB (GPU)",
    }
    labels = repo_raw_params()["papers"]["npt"]["models"]
    note = "The paper's numbers (Tables 6-7) exist for NPT only and were measured on GPUs."
    assert _paper_note(costs, labels) == note
    assert reported_costs("bishop") == {} and _paper_note({}, labels) == "The paper reports no compute cost."


def test_friedman_test_on_complete_blocks_only():
    import pandas as pd

    from tabrepro.reporting.rank_tests import complete_rank_matrix, friedman_test

    # "c" misses block 2; it is dropped and the others are re-ranked among themselves.
    ranks = pd.DataFrame(
        {
            "block": [1, 1, 1, 2, 2, 3, 3, 3],
            "method": ["a", "b", "c", "a", "b", "a", "b", "c"],
            "rank": [1.0, 3.0, 2.0, 2.0, 1.0, 1.5, 1.5, 3.0],
        }
    )
    matrix = complete_rank_matrix(ranks)
    assert list(matrix.columns) == ["a", "b"] and matrix.to_numpy().tolist() == [[1, 2], [2, 1], [1.5, 1.5]]
    # Friedman's chi-square from mean ranks (Demšar 2006, eq. 1), no ties: 12N/(k(k+1)) (sum R² - k(k+1)²/4).
    blocks = np.array([[1, 2, 3], [1, 2, 3], [1, 3, 2], [1, 2, 3], [2, 1, 3]], float)
    result = friedman_test(blocks)
    mean = blocks.mean(axis=0)
    assert result.statistic == pytest.approx(12 * 5 / 12 * (np.sum(mean**2) - 3 * 16 / 4))
    assert result.test == "Friedman test" and result.significant() and result.p_value < 0.05
    assert not friedman_test(blocks[:2]).significant()  # two blocks cannot reach α = 0.05 here
    assert friedman_test(np.full((4, 3), 2.0)).p_value == 1.0  # all tie everywhere
    assert friedman_test(blocks[:1]).p_value is None and "2 blocks" in friedman_test(blocks[:1]).describe()
    # Two methods: the exact two-sided sign test, ties dropped (10 wins of 10: p = 2 / 2**10).
    pair = np.array([[1, 2]] * 10 + [[1.5, 1.5]] * 3, float)
    sign = friedman_test(pair)
    assert sign.test == "sign test" and sign.p_value == pytest.approx(2 / 2**10)


def test_cd_diagram_claims_only_after_a_significant_friedman_test_on_independent_blocks(tmp_path):
    from PIL import Image

    from tabrepro.reporting.html.ranks import cd_wording
    from tabrepro.reporting.rank_tests import OmnibusResult

    significant = OmnibusResult("Friedman test", 4, 12, statistic=20.0, p_value=0.001)
    flat = OmnibusResult("Friedman test", 4, 12, statistic=2.0, p_value=0.57)
    assert cd_wording(significant, independent=True)[0] is None
    assert "Drawn because the Friedman test rejected" in cd_wording(significant, True)[1]
    note, caption = cd_wording(flat, independent=True)
    assert "not significant (p = 0.57)" in note and caption.count("Greyed") == 1
    note, caption = cd_wording(significant, independent=False)
    assert "folds of one dataset, not independent" in note and "Greyed" in caption
    note, _ = cd_wording(OmnibusResult("Friedman test", 3, 1, reason="needs 2 blocks"), True)
    assert "no omnibus test" in note

    ranks = {"a": 1.2, "b": 2.1, "c": 3.0, "d": 3.7}

    def red_pixels(path):
        image = np.asarray(Image.open(path).convert("RGB")).astype(int)
        return int((np.abs(image - [0xD6, 0x27, 0x28]).sum(axis=2) < 40).sum())

    claimed = critical_difference_diagram(ranks, 12, tmp_path / "claimed.png", "t")
    greyed = critical_difference_diagram(
        ranks, 12, tmp_path / "greyed.png", "t", claims=False, note="Not a significance claim: test."
    )
    assert red_pixels(claimed) > 50 and red_pixels(greyed) == 0


def test_provenance_section_warns_when_results_ran_on_different_hardware(tmp_path):
    from tabrepro.provenance import parse_cpuinfo
    from tabrepro.reporting.html.page import Page
    from tabrepro.reporting.html.provenance import hardware_block

    def record(model, fold, cpu_text, gpu=None):
        return {
            "paper": "npt",
            "dataset": "wine",
            "model": model,
            "fold": fold,
            "provenance": {"cpu": parse_cpuinfo(cpu_text), "gpu": gpu, "threads": 2, "threads_source": "job"},
        }

    epyc = "model name\t: AMD EPYC 7B12\nflags\t: avx avx2\n"
    xeon = "model name\t: Intel Xeon 8480+\nflags\t: avx avx2 avx512f avx512_bf16 amx_tile\n"
    h100 = {"used": True, "name": "NVIDIA H100", "cuda": "12.8", "cudnn": 91002}
    same = Page(tmp_path)
    hardware_block(same, [record("knn", f, epyc) for f in range(4)])
    text = "".join(same.blocks)
    assert 'class="warning"' not in text and "AMD EPYC 7B12 · AVX2" in text and "(folds 0–3)" in text
    mixed = Page(tmp_path)
    hardware_block(
        mixed,
        [
            record("knn", 0, epyc),
            record("knn", 1, epyc),
            record("knn", 2, xeon),
            record("npt", 0, xeon, h100),
            {"model": "old", "fold": 5, "provenance": {}},
        ],
    )
    text = "".join(mixed.blocks)
    assert 'class="warning"' in text and "4 different hardware configurations (or unrecorded)" in text
    rows = re.findall(r"<tr>(.*?)</tr>", text.split("<tbody>")[1])
    cells = {re.sub("<[^>]+>", "|", row).strip("|").split("||")[0]: row for row in rows}
    assert "npt/wine/knn (folds 0–1)" in cells["AMD EPYC 7B12 · AVX2"]
    assert "npt/wine/knn (fold 2)" in cells["Intel Xeon 8480+ · AMX"]
    assert "npt/wine/npt (fold 0)" in cells["Intel Xeon 8480+ · AMX · GPU NVIDIA H100 (CUDA 12.8, cuDNN 91002)"]
    assert "not recorded" in cells


# --------------------------------------------------------------------------- browser
def _may_install() -> tuple[bool, str]:
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    debian = Path("/etc/debian_version").is_file() and shutil.which("apt-get") is not None
    asked = os.environ.get("CI") == "true" or os.environ.get("TABREPRO_BROWSER_TESTS") == "1"
    if is_root and debian and asked:
        return True, ""
    return False, (
        f"no Chromium found; it is installed automatically only as root on Debian with "
        f"CI=true or TABREPRO_BROWSER_TESTS=1 (root={is_root}, debian={debian}, "
        f"asked={asked}, {platform.system()})"
    )


def _ensure_chromium() -> str:
    browser = find_chromium()
    if browser:
        return browser
    allowed, reason = _may_install()
    if not allowed:
        pytest.skip(reason)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    try:
        if subprocess.run(install, env=env, capture_output=True, timeout=900).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=300, check=True)
            subprocess.run(install, env=env, capture_output=True, timeout=900, check=True)
    except (subprocess.SubprocessError, OSError) as error:
        pytest.fail(f"installing Chromium with apt-get failed: {error}")
    browser = find_chromium()
    assert browser, "apt-get installed chromium but it is not on PATH"
    return browser


def test_report_renders_in_headless_chromium(workspace, tmp_path):
    from PIL import Image

    browser = _ensure_chromium()
    png = tmp_path / "report.png"
    try:
        screenshot(workspace["report"] / INDEX, png, width=1280, height=3000, timeout=180, browser=browser)
    except BrowserError as error:
        pytest.fail(str(error))
    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert image.shape[:2] == (3000, 1280)
    non_white = (image < 245).any(axis=2).mean()
    assert non_white > 0.05, f"the page rendered almost blank ({non_white:.1%} non-white)"
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50  # text, tables and figure colours
    header = image[:60].reshape(-1, 3).mean(axis=0)
    assert header.max() < 120  # the dark header band rendered (CSS applied)


# --------------------------------------------------------------------------- workflow wiring
def test_workflow_dry_run_includes_analysis_and_report(tmp_path):
    run = snakemake(copy_workflow(tmp_path), "all", "-n", "--quiet", "rules", "--config", "profile=quick", timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    output = run.stdout + run.stderr
    assert "report_html" in output and "analyse_lookup" in output
    if "npt" in repo_raw_params()["papers"]["npt"]["models"]:
        assert "analyse_fold" in output
