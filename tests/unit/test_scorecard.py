"""The reproduction scorecard on a tiny, fabricated results tree.

The metrics.json files here are written by hand (with the params digest the real jobs record), so
that every verdict and every not-run reason is known in advance: agreement, a difference in each
direction, an undetermined single split, an SD the paper reports, a failed job's log, a dataset that
could not be downloaded, a model the profile leaves out for want of a GPU, missing folds, a capped
budget, BiSHop's test-selected numbers and the counts.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import REPO, tiny_profile, write_params
from tabrepro.cli import main as tabrepro_main
from tabrepro.config import Job, Params
from tabrepro.data.availability import FetchStatus, write_fetch_status
from tabrepro.reference import lookup
from tabrepro.reporting.claims import judge_claims
from tabrepro.reporting.scorecard import Scorecard, ScoreCell, build_scorecard, summary
from tabrepro.reporting.scorecard_markdown import render_markdown, write_scorecard
from tabrepro.reporting.verdicts import DIFFERS, INCONCLUSIVE, NOT_RUN, REPRODUCED, SHIFTED

PROFILE = "cardtest"
HIGGS_ERROR = "HTTP 404 for https://archive.ics.uci.edu/higgs.zip (no mirror copy)"


def _result(
    params: Params, paper: str, dataset: str, model: str, fold: int, task: str, test: dict[str, float], **extra: Any
) -> None:
    """One job's metrics.json, shaped and digested like the ones `tabrepro train` writes."""
    path = Path(params.results_dir) / paper / dataset / model / f"fold{fold}" / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "paper": paper,
                "dataset": dataset,
                "model": model,
                "fold": fold,
                "task": task,
                "metrics": {"test": test, "val": {}},
                "wall_time_s": 1.0,
                "peak_memory_mb": 1.0,
                "profile": PROFILE,
                "params_digest": params.job_digest(Job(paper, dataset, model, fold)),
                **extra,
            }
        )
    )


def _binary(auroc: float, accuracy: float, nll: float) -> dict[str, float]:
    return {"auroc": auroc, "auc_pct": 100 * auroc, "accuracy_pct": accuracy, "nll": nll}


def _log(root: Path, relative: str, text: str) -> Path:
    path = root / "logs" / "train" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("scorecard")
    profile = tiny_profile(
        ["random_forest", "xgboost", "knn", "catboost", "mlp", "npt"],
        ["breast_cancer", "boston", "protein", "higgs"],
        bishop={"datasets": ["spambase"], "models": ["xgboost"]},
        description="scorecard test",
        max_configs=2,
        folds=[0, 1, 2],
        model_overrides={"knn": {"max_configs": 2, "reason": "kept small for the test"}},
        not_run={"tabnet": "needs a GPU"},
    )
    params_file = write_params(root, profile, name=PROFILE)
    params = Params.from_file(params_file)
    # breast cancer: Random Forest agrees, XGBoost is far off (worse on every metric), k-NN
    # lacks fold 2, CatBoost failed on fold 0 (nothing else), an NPT variant failed, MLP not run.
    for fold, (rf, xgb) in enumerate([(0.988, 0.90), (0.990, 0.91), (0.989, 0.92)]):
        _result(params, "npt", "breast_cancer", "random_forest", fold, "binary", _binary(rf, 94.2, 0.142))
        _result(params, "npt", "breast_cancer", "xgboost", fold, "binary", _binary(xgb, 80.0, 0.90 + fold / 100))
    for fold in (0, 1):
        _result(params, "npt", "breast_cancer", "knn", fold, "binary", _binary(0.98, 95.0, 0.47))
    _log(root, "npt/breast_cancer/catboost/fold0.log", "training...\nValueError: boom in catboost\n")
    _log(root, "npt/breast_cancer/npt/fold0/batch0.log", "step 10\nRuntimeError: NaN loss\n\n")
    # boston: the paper's Table 12 gives an SD; protein is one holdout split on both sides.
    for fold, mse in enumerate([15.0, 16.0, 17.0]):
        _result(
            params,
            "npt",
            "boston",
            "random_forest",
            fold,
            "regression",
            {"rmse": math.sqrt(mse), "mse": mse, "r2_pct": 80.0},
        )
    # XGBoost on boston: fold 2 failed, folds 0 and 1 are judged.
    for fold, (rmse, mse) in enumerate([(3.3, 11.0), (3.5, 13.0)]):
        _result(params, "npt", "boston", "xgboost", fold, "regression", {"rmse": rmse, "mse": mse, "r2_pct": 80.0})
    _log(root, "npt/boston/xgboost/fold2.log", "MemoryError\n")
    _result(params, "npt", "protein", "random_forest", 0, "regression", {"rmse": 3.60, "mse": 12.96, "r2_pct": 60.0})
    write_fetch_status(params.raw_dir(), FetchStatus("higgs", ok=False, error=HIGGS_ERROR))
    # BiSHop: one split, three seeds (the protocol's repeats).
    seeds = [_binary(a, 95.0, 0.1) for a in (0.984, 0.985, 0.986)]
    _result(params, "bishop", "spambase", "xgboost", 0, "binary", _binary(0.985, 95.0, 0.1), test_repeats=seeds)
    card = build_scorecard(params)
    return {"root": root, "params": params, "params_file": params_file, "card": card}


def cell(card: Scorecard, table: str, column: str, method: str, paper: str = "npt") -> ScoreCell:
    found = [c for c in card.cells if (c.paper, c.table, c.column, c.method) == (paper, table, column, method)]
    assert len(found) == 1, found
    return found[0]


def test_reproduced_within_the_margin_from_fold_spreads(workspace):
    c = cell(workspace["card"], "table10", "breast_cancer", "Random Forest")
    paper = lookup("npt", "10", "breast_cancer", "Random Forest", "auroc")
    se_ours = 0.001 / math.sqrt(3)  # sample SD of .988, .990, .989 is 0.001; no factor qualifies
    assert c.ours_mean == pytest.approx(0.989) and c.ours_se == pytest.approx(se_ours)
    assert c.n == 3 and c.n_expected == 3 and c.paper_se == pytest.approx(paper.spread)
    assert c.margin == 0.01 and c.margin_text == "±0.01" and c.delta == pytest.approx(0.989 - paper.value)
    assert c.ci_low < c.delta < c.ci_high
    # the profile caps every search (max_configs 2): another experiment, counted apart from own runs
    assert c.verdict_class == REPRODUCED and c.count_group == "capped" and c.paper_origin == "own run"
    assert c.budget.startswith("budget capped")
    assert "3 folds: SD/√n" in c.ours_se_basis


def test_differs_needs_significance_and_a_gap_beyond_the_margin(workspace):
    card = workspace["card"]
    auroc = cell(card, "table10", "breast_cancer", "XGBoost")
    assert auroc.verdict_class == DIFFERS
    assert auroc.verdict == "differs (ours lower; the 95 % CI lies wholly outside ±δ)"
    assert auroc.better_or_worse == "worse" and auroc.ci_high < -auroc.margin < 0 and auroc.p_adjusted < 0.05
    nll = cell(card, "table9", "breast_cancer", "XGBoost")  # lower is better: higher NLL is worse
    assert nll.verdict.startswith("differs (ours higher;") and nll.better_or_worse == "worse" and nll.ci_low > 0
    assert nll.margin == pytest.approx(0.10 * nll.paper_value)  # a relative margin


def test_one_split_without_class_counts_is_inconclusive_not_seed_judged(workspace):
    c = cell(workspace["card"], "table11", "protein", "Random Forest")
    assert c.n == 1 and c.verdict_class in (REPRODUCED, INCONCLUSIVE)
    assert "RMSE/√(2n)" in c.ours_se_basis or c.ours_se is None
    assert c.delta == pytest.approx(3.60 - 3.57)


def test_paper_standard_deviation_is_turned_into_a_standard_error(workspace):
    c = cell(workspace["card"], "table12", "boston", "Random Forest")
    assert c.paper_text == "24.0 ± 9.5 (SD)" or c.paper_text.endswith("± 9.5 (SD)")
    assert c.paper_se == pytest.approx(9.5 / math.sqrt(10))  # the paper's 10 folds
    assert c.ours_se == pytest.approx(1.0 / math.sqrt(3))  # our SD of 15, 16, 17 over 3 folds
    assert "the paper's ± (SD)/√10" in c.paper_se_basis


def test_not_run_data_not_obtainable_names_the_error(workspace):
    c = cell(workspace["card"], "table8", "higgs", "Random Forest")
    assert c.verdict_class == NOT_RUN and c.ours_mean is None
    assert c.reason == f"data not obtainable: {HIGGS_ERROR}"
    assert summary(workspace["card"])["unobtainable"] == {"npt": {"higgs": HIGGS_ERROR}}


def test_not_run_left_out_by_the_profile(workspace):
    card = workspace["card"]
    assert cell(card, "table10", "breast_cancer", "TabNet").reason == "left out by the profile: needs a GPU"
    lightgbm = cell(card, "table10", "breast_cancer", "LightGBM")
    assert lightgbm.reason == "left out by the profile (not among its models)"
    assert lightgbm.budget is None  # no budget to speak of for a model that does not run


def test_not_run_job_failed_names_the_log(workspace):
    root, card = workspace["root"], workspace["card"]
    catboost = cell(card, "table10", "breast_cancer", "CatBoost")
    log = root / "logs/train/npt/breast_cancer/catboost/fold0.log"
    assert catboost.verdict_class == NOT_RUN and catboost.reason.startswith("job failed: ")
    assert str(log) in catboost.reason and "ValueError: boom in catboost" in catboost.reason
    assert "1 of 3 folds failed" in catboost.reason and catboost.reason.endswith("; 2 not run yet")
    npt = cell(card, "table10", "breast_cancer", "NPT")  # per-configuration model: batch logs
    assert str(root / "logs/train/npt/breast_cancer/npt/fold0/batch0.log") in npt.reason
    assert "RuntimeError: NaN loss" in npt.reason
    assert cell(card, "table10", "breast_cancer", "MLP").reason == "not run yet"
    # protein was never fetched: nothing ran, and the scorecard says why.
    assert cell(card, "table11", "protein", "XGBoost").reason == "not run yet (data not fetched yet)"


def test_missing_folds_are_judged_and_said_and_budget_cap_shown(workspace):
    c = cell(workspace["card"], "table10", "breast_cancer", "k-NN")
    assert c.n == 2 and c.n_expected == 3 and c.verdict_class in (REPRODUCED, DIFFERS, INCONCLUSIVE)
    assert "folds missing: 2 of 3 have results (1 not run yet)" in c.notes
    assert c.budget == "budget capped: 2 of the paper's 480 configurations (kept small for the test)"
    assert "budget capped" in cell(workspace["card"], "table10", "breast_cancer", "XGBoost").budget
    boston = cell(workspace["card"], "table11", "boston", "XGBoost")
    assert boston.n == 2 and boston.verdict_class != NOT_RUN and boston.ours_mean == pytest.approx(3.4)
    log = workspace["root"] / "logs/train/npt/boston/xgboost/fold2.log"
    assert (
        f"folds missing: 2 of 3 have results (1 of 3 folds failed; fold 2: see {log} (last line: MemoryError))"
    ) in boston.notes


def test_rank_cells_need_every_paper_dataset(workspace):
    c = cell(workspace["card"], "table1", "binary", "NPT")
    assert c.verdict_class == NOT_RUN and c.metric == "rank_auroc"
    assert "every binary dataset of the paper (higgs, income, kick, breast_cancer)" in c.reason
    assert "missing: higgs (data not obtainable); income, kick (not selected by the profile)" in c.reason
    assert (
        "breast_cancer: no results for Gradient Boosting, CatBoost, LightGBM, MLP, TabNet, NPT "
        "(each cell of the dataset tables says why)"
    ) in c.reason


def test_bishop_one_split_spread_is_never_the_seeds_alone(workspace):
    card = workspace["card"]
    c = cell(card, "fig4_1", "spambase", "XGBoost", paper="bishop")
    # an unmarked Fig. 4.1 number: the thesis's own run, selected on test by the authors' sweep
    assert c.count_group == "capped" and c.paper_origin == "own run" and c.paper_selected_on == "test"
    assert "the paper selected this configuration on test rows" in c.notes
    quoted = cell(card, "fig4_1", "spambase", "SAINT", paper="bishop")
    assert quoted.count_group == "quoted" and "SAINT" in quoted.quoted_from
    # the result records no test class counts: no spread (the 3 seeds' SE is not used alone)
    assert c.ours_se is None and "a spread over seeds of one split is not used" in c.ours_se_basis
    assert c.verdict_class == INCONCLUSIVE
    assert all(x.paper_selected_on == "validation" for x in card.cells if x.paper == "npt" and x.paper_value)


def test_one_split_with_class_counts_gets_the_sampling_spread(workspace):
    params = workspace["params"]
    path = Path(params.results_dir) / "bishop" / "spambase" / "xgboost" / "fold0" / "metrics.json"
    original = path.read_text()
    result = json.loads(original)
    result["split"] = {"n_test": 461, "test_class_counts": {"0": 280, "1": 181}}
    path.write_text(json.dumps(result))
    try:
        c = cell(build_scorecard(params), "fig4_1", "spambase", "XGBoost", paper="bishop")
    finally:
        path.write_text(original)
    basis = "Hanley–McNeil at 181 positive / 280 negative test rows, at the pooled value"
    assert c.ours_se_basis.startswith(basis) and c.ours_se_basis.endswith("+ the spread of 3 seeds")
    assert c.paper_se is not None and "seed variance bound 0.13" in c.paper_se_basis
    # Δ is clearly below 0 but its CI reaches into ±δ: a shift, not a difference beyond the margin
    assert c.verdict_class == SHIFTED and c.ci_high < 0 and c.ci_high > -c.margin


def test_rows_the_paper_lacks_are_ours_only_and_not_counted(workspace):
    card = workspace["card"]
    only = [c for c in card.cells if c.verdict_class == "ours only"]
    tally = summary(card)["all"]
    assert tally["ours_only"] == len(only)
    assert all(c.count_group == "none" and c.paper_value is None for c in only)
    uncounted = [c for c in card.cells if c.count_group == "none"]
    assert set(only) <= set(uncounted) and all(c.paper_value is None for c in uncounted)
    counted = tally["own"]["cells"] + tally["quoted"]["cells"] + tally["capped"]["cells"]
    same_fits = [c for c in card.cells if c.counted_with is not None and c.count_group != "none"]
    assert same_fits and all(c.table == "table12" for c in same_fits)  # MSE: the RMSE fits again
    assert counted + len(same_fits) + len(uncounted) == len(card.cells)


def test_summary_counts_per_table_and_paper(workspace):
    counts = summary(workspace["card"])["papers"]["npt"]
    tables = [key for key in counts if key != "all"]
    verdicts = ("reproduced", "differs", "shifted", "cannot_be_decided", "inconclusive", "not_comparable")
    for group in ("own", "quoted", "capped"):
        for verdict in (*verdicts, "not_run", "cells"):
            assert counts["all"][group][verdict] == sum(counts[t][group][verdict] for t in tables)
    npt_cells = [c for c in workspace["card"].cells if c.paper == "npt" and c.counted_with is None]
    assert counts["all"]["capped"]["cells"] == sum(1 for c in npt_cells if c.count_group == "capped")
    assert counts["table12"]["capped"]["cells"] == 0  # counted with table 11
    differing = {(c.table, c.column, c.method) for c in npt_cells if c.verdict_class == DIFFERS}
    assert {(t, "breast_cancer", "XGBoost") for t in ("table9", "table10")} <= differing


def test_written_files_and_the_cli(workspace, capsys):
    params_file, root = str(workspace["params_file"]), workspace["root"]
    assert tabrepro_main(["--params", params_file, "scorecard"]) == 0  # exit 0 although cells differ
    out_dir = root / "results" / "scorecard"
    printed = capsys.readouterr().out
    assert str(out_dir / "summary.json") in printed and "npt (own runs): " in printed
    written = json.loads((out_dir / "summary.json").read_text())
    assert written == json.loads(json.dumps(summary(workspace["card"])))
    frame = pd.read_csv(out_dir / "scorecard.csv")
    assert len(frame) == len(workspace["card"].cells)
    columns = {"verdict", "margin", "ci_low", "p_adjusted", "paper_origin", "quoted_from", "budget", "reason"}
    assert columns <= set(frame.columns)
    markdown = (out_dir / "scorecard.md").read_text()
    claims = judge_claims(workspace["params"], workspace["card"])
    assert markdown == render_markdown(workspace["card"], claims)
    assert markdown.index("## The papers' claims") < markdown.index("## How cells are judged")
    assert "NPT achieves the highest average ranking on binary and multi-class" in markdown
    worse = "differs (ours lower; the 95 % CI lies wholly outside ±δ): worse"
    assert "## Counts" in markdown and HIGGS_ERROR in markdown and worse in markdown
    assert "| auroc | ±0.01 |" in markdown and "## Shifts" in markdown
    # One paper only: its own directory, so the full scorecard is not overwritten.
    assert tabrepro_main(["--params", params_file, "scorecard", "bishop"]) == 0
    only = json.loads((out_dir / "bishop" / "summary.json").read_text())
    assert list(only["papers"]) == ["bishop"]
    assert json.loads((out_dir / "summary.json").read_text()) == written


def test_cli_input_errors_exit_2_without_files(workspace, tmp_path, capsys):
    params_file = str(workspace["params_file"])
    assert tabrepro_main(["--params", params_file, "scorecard", "nopaper", "--output-dir", str(tmp_path / "a")]) == 2
    assert "nopaper" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert (
        tabrepro_main(
            ["--params", params_file, "--profile", "quick", "scorecard", "bishop", "--output-dir", str(tmp_path / "b")]
        )
        == 2
    )
    assert "selects no dataset of paper 'bishop'" in capsys.readouterr().err
    # A result written under other parameters is refused, naming the file.
    raw = yaml.safe_load(workspace["params_file"].read_text())
    raw["seed"] = 1
    edited = tmp_path / "params.yaml"
    edited.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert tabrepro_main(["--params", str(edited), "scorecard", "--output-dir", str(tmp_path / "c")]) == 2
    assert "written under other parameters" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_write_is_atomic_and_leaves_no_temporary_files(workspace, tmp_path):
    paths = write_scorecard(workspace["card"], tmp_path / "card")
    assert [p.name for p in paths] == ["scorecard.md", "scorecard.csv", "summary.json"]
    assert sorted(p.name for p in (tmp_path / "card").iterdir()) == sorted(p.name for p in paths)


def test_report_shows_the_scorecard_first(workspace, tmp_path):
    from tabrepro.reporting.html import INDEX

    params_file, root = str(workspace["params_file"]), workspace["root"]
    summary_file = root / "results" / "scorecard" / "summary.json"
    write_scorecard(workspace["card"], summary_file.parent)
    assert tabrepro_main(["--params", params_file, "report", "--output-dir", str(tmp_path / "r1")]) == 0
    page = (tmp_path / "r1" / INDEX).read_text(encoding="utf-8")
    body = page.split("<main>")[1]
    assert body.lstrip().startswith('<h2 id="scorecard">')
    section = body.split('id="scorecard"')[1].split("<h2")[0]
    assert "Also written to" in section and HIGGS_ERROR in section
    assert section.index('id="scorecard-claims"') < section.index("<figure>") < section.index('id="scorecard-judged"')
    judged = section.split('id="scorecard-judged"')[1].split("<details>")[0]
    assert "differs (ours lower; the 95 % CI lies wholly outside ±δ): worse" in judged and ">reproduced<" in judged
    idle = section.split("<details>")[1]
    assert "left out by the profile: needs a GPU" in idle and "cells: " in idle
    assert list((tmp_path / "r1").glob("forest-*.png"))
    summary_file.write_text("{}")  # a stale file is called out, the section still built
    assert tabrepro_main(["--params", params_file, "report", "--output-dir", str(tmp_path / "r2")]) == 0
    assert "is out of date: run `tabrepro scorecard`" in (tmp_path / "r2" / INDEX).read_text(encoding="utf-8")
    summary_file.unlink()
    assert tabrepro_main(["--params", params_file, "report", "--output-dir", str(tmp_path / "r3")]) == 0
    assert "has not been written: run `tabrepro scorecard`" in (tmp_path / "r3" / INDEX).read_text(encoding="utf-8")


def test_a_model_checked_against_the_authors_code_says_so_on_its_cells(tmp_path):
    from tabrepro.config import Params
    from tabrepro.reporting.scorecard.card import ScorecardError
    from tabrepro.reporting.scorecard.context import _implementation_summary

    metric = {"verdict": "reproduced", "ours": {"n": 3}}
    record = {
        "case": "npt_breast_cancer",
        "settings": {"seeds": 10},
        "summary": {
            "complete": False,
            "metrics": {"auroc": metric, "nll": {**metric, "verdict": "inconclusive: Δ has no spread"}},
        },
    }
    done = tmp_path / "done.json"
    done.write_text(json.dumps(record))
    assert _implementation_summary(done) == (
        "checked against the authors' implementation (done.json, case npt_breast_cancer): "
        "auroc reproduced, nll inconclusive (3 of 10 seeds, incomplete)"
    )
    idle = tmp_path / "idle.json"
    idle.write_text(json.dumps({"case": "bishop_qsar", "not_run": "not run: needs hours"}))
    assert _implementation_summary(idle).endswith("case bishop_qsar): not run: needs hours")
    assert _implementation_summary(tmp_path / "missing.json").endswith("missing.json, which is not here")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScorecardError, match="bad.json"):
        _implementation_summary(tmp_path / "bad.json")

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    params = Params(raw, source=str(tmp_path / "params.yaml"))
    checks = params.paper("npt")["implementation_checks"]
    assert checks == {"npt": str(tmp_path / raw["papers"]["npt"]["implementation_checks"]["npt"])}


def test_cells_of_a_protocol_that_departs_from_its_source_say_so(workspace):
    from types import SimpleNamespace

    from tabrepro.reporting.scorecard.judge import _departures

    ctx = SimpleNamespace(params=workspace["params"], paper="bishop")
    note = _departures(ctx, "openml_361286_compas-two-years")
    assert note.startswith("our protocol departs from its source in 4 ways (Split sizes; Resplits;")
    assert note.endswith("params.yaml protocols.openml_benchmark.not_followed)")
    assert _departures(ctx, "spambase") is None
    assert all("departs" not in c.notes for c in workspace["card"].cells if c.table == "fig4_1")


def test_a_one_split_nll_cell_gets_its_spread_from_the_saved_test_rows(workspace):
    """NLL has no closed-form SE: the job's kept test predictions give it one, so the cell has a
    verdict; without them it has none."""
    from tabrepro.evaluation.job_predictions import job_predictions, write_predictions

    params = workspace["params"]
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 57)
    proba1 = np.clip(np.where(y == 1, 0.9, 0.1) + rng.normal(0, 0.05, 57), 0.01, 0.99)
    predictions = job_predictions("binary", 0, np.arange(57), y, [np.column_stack([1 - proba1, proba1])])
    _result(params, "npt", "breast_cancer", "mlp", 0, "binary", predictions.metrics(), split={"n_test": 57})
    job = Job("npt", "breast_cancer", "mlp", 0)
    path = params.layout.job_test_predictions.path(job)
    try:
        without = cell(build_scorecard(params), "table9", "breast_cancer", "MLP")
        write_predictions(path, predictions)
        with_rows = cell(build_scorecard(params), "table9", "breast_cancer", "MLP")
    finally:
        shutil.rmtree(path.parent)
    assert without.ours_se is None and without.verdict.startswith("inconclusive (Δ has no spread")
    assert with_rows.ours_se > 0 and with_rows.ours_se_basis.startswith("stratified bootstrap")
    assert with_rows.p_difference is not None and with_rows.verdict_class != "not run"
