"""Aggregation and rendering of paper tables from per-fold results.

The per-fold dicts here are fabricated on purpose: the point is to check the arithmetic (mean,
SE, SD, average ranks) against numbers worked out by hand, not to produce results.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tabrepro.reporting import (
    ResultsError,
    build_tables,
    collect_results,
    lookup,
    reference_table_id,
)
from tabrepro.reporting.tables import TIDY_COLUMNS, format_value, latex_escape

PAPER_CFG: dict[str, Any] = {
    "title": "NPT test paper",
    "models": {"xgboost": "XGBoost", "catboost": "CatBoost", "knn": "k-NN"},
    "datasets": {
        "higgs": {"source": "higgs"},
        "income": {"source": "census_income_kdd"},
        "breast_cancer": {"source": "breast_cancer"},
        "boston": {"source": "boston"},
    },
    "tables": {
        "table8": {"title": "Test accuracy (%)", "metric": "accuracy_pct",
                   "tasks": ["binary", "multiclass"]},
        "table10": {"title": "Test AUROC", "metric": "auroc", "tasks": ["binary"]},
        "table11": {"title": "Test RMSE", "metric": "rmse", "tasks": ["regression"]},
        "table12": {"title": "Test MSE (± SD)", "metric": "mse", "tasks": ["regression"],
                    "spread": "sd"},
        "table1": {
            "title": "Average rank",
            "kind": "rank",
            "rank_metrics": {"binary": "auroc", "regression": "rmse"},
            "paper_metrics": {"binary": "rank_auroc", "regression": "rank_rmse"},
        },
    },
}  # fmt: skip


def fold(dataset: str, model: str, k: int, task: str, **test: float) -> dict[str, Any]:
    """One per-fold result in the shape jobs write to metrics.json."""
    return {
        "paper": "npt", "dataset": dataset, "model": model, "fold": k, "task": task,
        "metrics": {"test": test, "val": {}}, "selected_config": {}, "seed": 0,
        "split": {"protocol": "npt_cv10"}, "wall_time_s": 1.0, "peak_memory_mb": 1.0,
    }  # fmt: skip


def folds(dataset: str, model: str, task: str, metric: str, values: list[float]) -> list[dict]:
    return [fold(dataset, model, k, task, **{metric: v}) for k, v in enumerate(values)]


def read_tidy(out_dir: Path, table: str) -> pd.DataFrame:
    return pd.read_csv(out_dir / f"{table}.csv")


def tidy_row(frame: pd.DataFrame, dataset: str, method: str, metric: str) -> pd.Series:
    rows = frame[(frame.dataset == dataset) & (frame.method == method) & (frame.metric == metric)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_mean_and_standard_error_over_folds(tmp_path: Path) -> None:
    results = folds("boston", "xgboost", "regression", "rmse", [1.0, 2.0, 3.0, 4.0])
    build_tables(results, "npt", PAPER_CFG, tmp_path)
    row = tidy_row(read_tidy(tmp_path, "table11"), "boston", "XGBoost", "rmse")
    sd = math.sqrt(sum((v - 2.5) ** 2 for v in [1, 2, 3, 4]) / 3)  # sample SD, ddof=1
    assert row.ours_mean == pytest.approx(2.5)
    assert row.ours_spread == pytest.approx(sd / 2)  # SE = SD / sqrt(4)
    assert row.spread_kind == "se" and row.n_folds == 4
    assert "| XGBoost | 2.50 ± 0.65 |" in (tmp_path / "table11.md").read_text()


def test_table12_uses_standard_deviation(tmp_path: Path) -> None:
    results = folds("boston", "xgboost", "regression", "mse", [10.0, 12.0, 14.0])
    build_tables(results, "npt", PAPER_CFG, tmp_path)
    row = tidy_row(read_tidy(tmp_path, "table12"), "boston", "XGBoost", "mse")
    assert row.ours_mean == pytest.approx(12.0)
    assert row.ours_spread == pytest.approx(2.0)  # sd of 10, 12, 14 with ddof=1
    assert row.spread_kind == "sd"
    assert "standard deviation" in (tmp_path / "table12.md").read_text()


def test_single_fold_has_no_spread(tmp_path: Path) -> None:
    results = folds("higgs", "xgboost", "binary", "accuracy_pct", [77.123])
    build_tables(results, "npt", PAPER_CFG, tmp_path)
    row = tidy_row(read_tidy(tmp_path, "table8"), "higgs", "XGBoost", "accuracy_pct")
    assert row.n_folds == 1 and math.isnan(row.ours_spread)
    markdown = (tmp_path / "table8.md").read_text()
    paper = lookup("npt", "8", "higgs", "XGBoost", "accuracy_pct")
    assert paper is not None
    assert f"| XGBoost | 77.12 | {paper.value_text} | 1 |" in markdown


def test_paper_values_beside_ours_and_paper_only_methods(tmp_path: Path) -> None:
    results = folds("breast_cancer", "xgboost", "binary", "auroc", [0.99, 0.98])
    build_tables(results, "npt", PAPER_CFG, tmp_path)
    paper = lookup("npt", "10", "breast_cancer", "XGBoost", "auroc")
    tabnet = lookup("npt", "10", "breast_cancer", "TabNet", "auroc")
    assert paper is not None and paper.spread is not None and tabnet is not None
    tidy = read_tidy(tmp_path, "table10")
    row = tidy_row(tidy, "breast_cancer", "XGBoost", "auroc")
    assert row.paper_value == pytest.approx(paper.value)
    assert row.paper_spread == pytest.approx(paper.spread)
    assert row.paper_spread_kind == paper.spread_kind
    markdown = (tmp_path / "table10.md").read_text()
    assert f"| 0.985 ± 0.005 | {paper.value_text} ± {paper.spread_text} | 2 |" in markdown
    tabnet_text = f"{tabnet.value_text} ± {tabnet.spread_text}"
    assert f"| TabNet | — | {tabnet_text} | — |" in markdown
    assert math.isnan(tidy_row(tidy, "breast_cancer", "TabNet", "auroc").ours_mean)
    # rows follow the params order of models, paper-only methods after them
    lines = [line.split(" | ")[0] for line in markdown.splitlines() if line.startswith("| ")]
    assert lines.index("| XGBoost") < lines.index("| k-NN") < lines.index("| TabNet")


def test_rank_table_with_ties_and_metric_direction(tmp_path: Path) -> None:
    results = [
        # breast_cancer: XGBoost and CatBoost tie for first -> 1.5, 1.5, 3
        *folds("breast_cancer", "xgboost", "binary", "auroc", [0.90, 0.90]),
        *folds("breast_cancer", "catboost", "binary", "auroc", [0.90, 0.90]),
        *folds("breast_cancer", "knn", "binary", "auroc", [0.80, 0.80]),
        # income: k-NN best, CatBoost worst -> 2, 3, 1
        *folds("income", "xgboost", "binary", "auroc", [0.95]),
        *folds("income", "catboost", "binary", "auroc", [0.90]),
        *folds("income", "knn", "binary", "auroc", [0.99]),
        # boston: RMSE, lower is better
        *folds("boston", "xgboost", "regression", "rmse", [3.0, 3.2]),
        *folds("boston", "knn", "regression", "rmse", [4.0, 4.4]),
    ]
    build_tables(results, "npt", PAPER_CFG, tmp_path)
    tidy = read_tidy(tmp_path, "table1")
    expected = {"XGBoost": (1.75, 0.25), "CatBoost": (2.25, 0.75), "k-NN": (2.0, 1.0)}
    for method, (mean, se) in expected.items():
        row = tidy_row(tidy, "all", method, "rank_auroc")
        assert (row.ours_mean, row.ours_spread) == pytest.approx((mean, se))
        assert row.n_datasets == 2
    assert tidy_row(tidy, "breast_cancer", "CatBoost", "rank_auroc").ours_mean == 1.5
    assert tidy_row(tidy, "boston", "XGBoost", "rank_rmse").ours_mean == 1.0
    assert tidy_row(tidy, "all", "k-NN", "rank_rmse").ours_mean == 2.0
    npt = lookup("npt", "1", "all", "NPT", "rank_auroc")
    assert npt is not None
    assert tidy_row(tidy, "all", "NPT", "rank_auroc").paper_value == pytest.approx(npt.value)
    markdown = (tmp_path / "table1.md").read_text()
    assert "| XGBoost | 1.75 ± 0.25 |" in markdown and "binary datasets" in markdown


def test_markdown_latex_and_csv_are_written(tmp_path: Path) -> None:
    results = folds("breast_cancer", "xgboost", "binary", "accuracy_pct", [95.0, 96.0])
    paths = build_tables(results, "npt", PAPER_CFG, tmp_path / "tables")
    assert len(paths) == 3 * len(PAPER_CFG["tables"])
    assert all(path.is_file() for path in paths)
    assert not list((tmp_path / "tables").glob(".*tmp"))  # no temp files left behind
    markdown = (tmp_path / "tables" / "table8.md").read_text()
    assert markdown.startswith("# Test accuracy (%)")
    assert "standard error" in markdown and "quoted from the paper" in markdown
    latex = (tmp_path / "tables" / "table8.tex").read_text()
    assert "\\toprule" in latex and "\\midrule" in latex and "\\bottomrule" in latex
    assert "breast\\_cancer" in latex and "Test accuracy (\\%)" in latex
    assert "95.50 $\\pm$ 0.50" in latex
    assert list(read_tidy(tmp_path / "tables", "table8").columns) == TIDY_COLUMNS


def test_empty_input_still_writes_every_table(tmp_path: Path) -> None:
    paths = build_tables([], "npt", PAPER_CFG, tmp_path)
    assert {path.name for path in paths} >= {"table11.md", "table11.tex", "table11.csv"}
    assert "nothing to show" in (tmp_path / "table11.md").read_text()
    assert read_tidy(tmp_path, "table11").empty


def test_datasets_filter_adds_paper_columns_for_datasets_not_run(tmp_path: Path) -> None:
    results = folds("breast_cancer", "xgboost", "binary", "accuracy_pct", [95.0])
    results += folds("boston", "xgboost", "regression", "rmse", [3.0])  # outside the filter
    build_tables(results, "npt", PAPER_CFG, tmp_path, datasets_filter=["breast_cancer", "higgs"])
    table8 = read_tidy(tmp_path, "table8")
    assert set(table8.dataset) == {"breast_cancer", "higgs"}
    assert table8[table8.dataset == "higgs"].ours_mean.isna().all()
    assert read_tidy(tmp_path, "table11").empty  # boston was filtered out; higgs is binary


def write_result(root: Path, result: dict[str, Any]) -> Path:
    path = root / "npt" / result["dataset"] / result["model"] / f"fold{result['fold']}"
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(result))
    return path / "metrics.json"


def test_collect_results_reads_every_fold(tmp_path: Path) -> None:
    for result in folds("boston", "knn", "regression", "rmse", [4.0, 5.0]):
        write_result(tmp_path, result)
    collected = collect_results(tmp_path, "npt")
    assert [result["fold"] for result in collected] == [0, 1]
    assert collect_results(tmp_path, "bishop") == []


def test_malformed_json_error_names_the_file(tmp_path: Path) -> None:
    path = write_result(tmp_path, fold("boston", "knn", 0, "regression", rmse=4.0))
    path.write_text('{"paper": "npt", ')
    with pytest.raises(ResultsError, match=r"boston/knn/fold0/metrics\.json"):
        collect_results(tmp_path, "npt")


def test_missing_field_or_wrong_directory_names_the_file(tmp_path: Path) -> None:
    path = write_result(tmp_path, fold("boston", "knn", 0, "regression", rmse=4.0))
    broken = json.loads(path.read_text())
    del broken["task"]
    path.write_text(json.dumps(broken))
    with pytest.raises(ResultsError, match=r"fold0/metrics\.json: missing field"):
        collect_results(tmp_path, "npt")
    path.write_text(json.dumps(fold("yacht", "knn", 0, "regression", rmse=4.0)))
    with pytest.raises(ResultsError, match="content says yacht/knn/fold0"):
        collect_results(tmp_path, "npt")


def test_duplicate_folds_are_refused(tmp_path: Path) -> None:
    results = folds("boston", "knn", "regression", "rmse", [4.0]) * 2
    with pytest.raises(ResultsError, match="duplicate result for boston/knn/fold0"):
        build_tables(results, "npt", PAPER_CFG, tmp_path)


def test_reference_table_ids() -> None:
    assert reference_table_id("table8") == "8"
    assert reference_table_id("table1") == "1"
    assert reference_table_id("fig4_1") == "fig4.1"
    assert reference_table_id("table4_1_r2") == "4.1"
    assert reference_table_id("anything", {"reference_table": "A.3"}) == "A.3"


def test_number_formatting() -> None:
    assert format_value(95.614, "accuracy_pct") == "95.61"
    assert format_value(0.98765, "auroc") == "0.988"
    assert format_value(0.012345, "nll") == "0.0123"
    assert format_value(29.53, "mse") == "29.5"
    assert format_value(1234.6, "mse") == "1235"
    assert format_value(None, "rmse") == "—"
    assert latex_escape("a_b & 5% ± —") == r"a\_b \& 5\% $\pm$ --"
