"""A table's content independent of its output format: which datasets (or task types) and
methods it shows, and ours beside the paper's number in every cell."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tabrepro.reference import (
    PaperValue,
    lookup,
    reference_datasets,
    reference_methods,
    reference_table_id,
)
from tabrepro.reporting.tables.folds import mean_and_se, rank_methods, summarize_folds
from tabrepro.reporting.tables.formatting import DASH
from tabrepro.tasks import TASKS

TIDY_COLUMNS = [
    "table", "dataset", "method", "metric", "ours_mean", "ours_spread", "spread_kind",
    "n_folds", "paper_value", "paper_spread", "paper_spread_kind", "n_datasets",
]  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """Ours and the paper's number for one method in one column."""

    metric: str
    ours_mean: float | None = None
    ours_spread: float | None = None
    count: int | None = None
    paper: PaperValue | None = None


@dataclass
class TableView:
    """A table independent of output format: rows are methods, columns datasets or task types."""

    key: str
    title: str
    source: str
    note: str
    columns: list[str]
    methods: list[str]
    cells: dict[tuple[str, str], Cell]
    count_label: str
    tidy: pd.DataFrame
    empty_reason: str | None = None


def _method_order(models: Mapping[str, str], ours: Iterable[str], paper_only: Iterable[str]) -> list[str]:
    """Paper labels in params order, then unlisted methods we ran, then paper-only methods."""
    ours_set, paper_set = set(ours), set(paper_only)
    ordered = list(dict.fromkeys([*models.values(), *sorted(ours_set), *paper_only]))
    return [method for method in ordered if method in ours_set or method in paper_set]


def dataset_group(paper_cfg: Mapping[str, Any], dataset: str) -> str | None:
    """The dataset's `group` in params (e.g. BiSHop's Datasets I/II), as text; None without one."""
    spec = paper_cfg.get("datasets", {}).get(dataset) or {}
    group = spec.get("group")
    return None if group is None else str(group)


def _dataset_candidates(paper_cfg: Mapping[str, Any], with_results: Iterable[str]) -> list[str]:
    listed = list(paper_cfg.get("datasets", {}))
    return list(dict.fromkeys([*listed, *sorted(set(with_results))]))


def _select_datasets(
    table_cfg: Mapping[str, Any],
    paper: str,
    paper_cfg: Mapping[str, Any],
    reference_id: str,
    dataset_tasks: Mapping[str, str],
    datasets_filter: Collection[str] | None,
) -> list[str]:
    """Datasets of the table's task types and group: those with our results, plus profile
    datasets not run yet (whose task comes from params or, failing that, the paper's table)."""
    tasks = set(table_cfg.get("tasks", TASKS))
    group = table_cfg.get("group")
    metric = table_cfg["metric"]
    in_paper_table = set(reference_datasets(paper, reference_id, metric, source=paper_cfg.get("reference")))
    selected = []
    for dataset in _dataset_candidates(paper_cfg, dataset_tasks):
        if group is not None and dataset_group(paper_cfg, dataset) != str(group):
            continue
        if dataset in dataset_tasks:
            keep = dataset_tasks[dataset] in tasks
        elif datasets_filter is not None and dataset in datasets_filter:
            declared = (paper_cfg.get("datasets", {}).get(dataset) or {}).get("task")
            keep = declared in tasks if declared else dataset in in_paper_table
        else:
            keep = False
        if keep:
            selected.append(dataset)
    return selected


def _dataset_tasks(frame: pd.DataFrame) -> dict[str, str]:
    return frame.groupby("dataset")["task"].first().to_dict()


def _tidy_row(
    table: str,
    dataset: str,
    method: str,
    metric: str,
    cell: Cell,
    spread_kind: str | None,
    *,
    n_folds: int | None = None,
    n_datasets: int | None = None,
) -> dict[str, Any]:
    """One long-format CSV row; counts are passed explicitly as they mean folds or datasets."""
    paper = cell.paper
    return {
        "table": table, "dataset": dataset, "method": method, "metric": metric,
        "ours_mean": cell.ours_mean, "ours_spread": cell.ours_spread,
        "spread_kind": spread_kind if cell.ours_mean is not None else None,
        "n_folds": n_folds, "n_datasets": n_datasets,
        "paper_value": paper.value if paper else None,
        "paper_spread": paper.spread if paper else None,
        "paper_spread_kind": paper.spread_kind if paper else None,
    }  # fmt: skip


def _tidy_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=TIDY_COLUMNS)
    for column in ("ours_mean", "ours_spread", "paper_value", "paper_spread"):
        frame[column] = frame[column].astype(float)
    for column in ("n_folds", "n_datasets"):
        frame[column] = frame[column].astype("Int64")
    return frame


def _source_line(paper: str, paper_cfg: Mapping[str, Any], reference_id: str) -> str:
    kind, number = ("Figure", reference_id[3:]) if reference_id.startswith("fig") else (
        "Table", reference_id)  # fmt: skip
    return f"Paper: {paper_cfg.get('title', paper)}, {kind} {number}."


def _note(spread_kind: str) -> str:
    ours = (
        "mean ± sample standard deviation over folds"
        if spread_kind == "sd"
        else "mean ± standard error over folds (SE = sample SD/√n)"
    )
    return (
        f"Ours: {ours}; n = folds behind ours (no ± when n = 1). Paper numbers are quoted from "
        f"the paper, ± as reported there; {DASH} = not available."
    )


RANK_NOTE = (
    "Ours: mean rank ± standard error across datasets (per dataset, methods with results are "
    "ranked by their mean over folds, 1 = best, ties share the mean rank); datasets = number "
    "of datasets ranked. Ours ranks only the methods we ran, so it is comparable to the paper's "
    f"ranks only when the same methods are present. Paper numbers are quoted from the paper; "
    f"{DASH} = not available."
)


def _metric_view(
    key: str,
    table_cfg: Mapping[str, Any],
    paper: str,
    paper_cfg: Mapping[str, Any],
    frame: pd.DataFrame,
    datasets_filter: Collection[str] | None,
) -> TableView:
    """A per-dataset table (NPT Tables 8–12, BiSHop Fig. 4.1 / Table 4.1)."""
    metric = table_cfg["metric"]
    spread_kind = table_cfg.get("spread", "se")
    reference_id = reference_table_id(key, table_cfg)
    datasets = _select_datasets(table_cfg, paper, paper_cfg, reference_id, _dataset_tasks(frame), datasets_filter)
    chosen = frame[(frame["metric"] == metric) & frame["dataset"].isin(datasets)]
    labels = paper_cfg.get("models", {})
    if table_cfg.get("models"):  # an ablation table: only its models, under its own labels
        labels = table_cfg["models"]
        chosen = chosen[chosen["model"].isin(list(labels))]
        chosen = chosen.assign(method=chosen["model"].map(labels))
    else:  # a main table: the paper's methods (ablation-only models stay out)
        chosen = chosen[chosen["model"].isin(list(labels)) | ~chosen["model"].isin(_ablation_models(paper_cfg))]
    summary = summarize_folds(chosen, spread_kind).set_index(["dataset", "method"])
    source = paper_cfg.get("reference")
    paper_methods = reference_methods(paper, reference_id, metric, datasets, source=source)
    methods = _method_order(labels, summary.index.get_level_values("method"), paper_methods)
    cells: dict[tuple[str, str], Cell] = {}
    rows: list[dict[str, Any]] = []
    for dataset in datasets:
        for method in methods:
            cell = _metric_cell(summary, paper, reference_id, dataset, method, metric, source)
            cells[(method, dataset)] = cell
            if cell.ours_mean is not None or cell.paper is not None:
                rows.append(_tidy_row(key, dataset, method, metric, cell, spread_kind, n_folds=cell.count))
    return TableView(
        key=key, title=table_cfg.get("title", key),
        source=_source_line(paper, paper_cfg, reference_id), note=_note(spread_kind),
        columns=datasets, methods=methods, cells=cells, count_label="n",
        tidy=_tidy_frame(rows), empty_reason=_empty_reason(datasets, rows, table_cfg),
    )  # fmt: skip


def _ablation_models(paper_cfg: Mapping[str, Any]) -> set[str]:
    main = set(paper_cfg.get("models", {}))
    return {m for t in paper_cfg.get("tables", {}).values() for m in t.get("models", {}) if m not in main}


def _metric_cell(
    summary: pd.DataFrame, paper: str, reference_id: str, dataset: str, method: str, metric: str, source: str | None
) -> Cell:
    paper_value = lookup(paper, reference_id, dataset, method, metric, source=source)
    if (dataset, method) not in summary.index:
        return Cell(metric=metric, paper=paper_value)
    stats = summary.loc[(dataset, method)]
    spread = float(stats["spread"])
    return Cell(
        metric=metric,
        ours_mean=float(stats["mean"]),
        ours_spread=None if math.isnan(spread) else spread,
        count=int(stats["n"]),
        paper=paper_value,
    )


def _empty_reason(columns: Sequence[str], rows: Sequence[Any], table_cfg: Mapping[str, Any]) -> str | None:
    if not columns:
        tasks = ", ".join(table_cfg.get("tasks", TASKS))
        group = f" in group {table_cfg['group']}" if table_cfg.get("group") is not None else ""
        return f"No selected dataset of task type(s) {tasks}{group}: nothing to show yet."
    if not rows:
        return "No results and no paper values for the selected datasets yet."
    return None


def _rank_view(
    key: str,
    table_cfg: Mapping[str, Any],
    paper: str,
    paper_cfg: Mapping[str, Any],
    frame: pd.DataFrame,
) -> TableView:
    """Average rank per task type (NPT Table 1): one column per task type, not per dataset."""
    reference_id = reference_table_id(key, table_cfg)
    source = paper_cfg.get("reference")
    rank_metrics: Mapping[str, str] = table_cfg["rank_metrics"]
    paper_metrics: Mapping[str, str] = table_cfg.get("paper_metrics", {})
    group = table_cfg.get("group")
    if group is not None:
        keep = [d for d in frame["dataset"].unique() if dataset_group(paper_cfg, d) == str(group)]
        frame = frame[frame["dataset"].isin(keep)]
    tasks = _dataset_tasks(frame)
    summary = summarize_folds(frame, "se")
    ranks = {
        task: rank_methods(summary[summary["dataset"].isin([d for d, t in tasks.items() if t == task])], metric)
        for task, metric in rank_metrics.items()
    }
    paper_only = [
        method
        for task in rank_metrics
        for method in reference_methods(paper, reference_id, rank_paper_metric(task, paper_metrics), source=source)
    ]
    ours = [method for table in ranks.values() for method in table["method"]]
    methods = _method_order(paper_cfg.get("models", {}), ours, paper_only)
    cells: dict[tuple[str, str], Cell] = {}
    rows: list[dict[str, Any]] = []
    for task in rank_metrics:
        paper_metric = rank_paper_metric(task, paper_metrics)
        rows.extend(_per_dataset_rank_rows(key, ranks[task], paper_metric))
        for method in methods:
            cell = _rank_cell(ranks[task], paper, reference_id, method, paper_metric, source)
            cells[(method, task)] = cell
            if cell.ours_mean is not None or cell.paper is not None:
                rows.append(_tidy_row(key, "all", method, paper_metric, cell, "se",
                                      n_datasets=cell.count))  # fmt: skip
    return TableView(
        key=key, title=table_cfg.get("title", key),
        source=_source_line(paper, paper_cfg, reference_id), note=RANK_NOTE,
        columns=list(rank_metrics), methods=methods, cells=cells, count_label="datasets",
        tidy=_tidy_frame(rows),
        empty_reason=None if rows else "No results and no paper values yet.",
    )  # fmt: skip


def rank_paper_metric(task: str, paper_metrics: Mapping[str, str]) -> str:
    """The reference CSV's metric for a task type's rank (a rank table's `paper_metrics`)."""
    return paper_metrics.get(task, f"rank_{task}")


def _rank_cell(
    ranks: pd.DataFrame, paper: str, reference_id: str, method: str, paper_metric: str, source: str | None
) -> Cell:
    paper_value = lookup(paper, reference_id, "all", method, paper_metric, source=source)
    mine = ranks.loc[ranks["method"] == method, "rank"]
    if mine.empty:
        return Cell(metric="rank", paper=paper_value)
    mean, se, n = mean_and_se(mine.astype(float))
    return Cell(metric="rank", ours_mean=mean, ours_spread=se, count=n, paper=paper_value)


def _per_dataset_rank_rows(key: str, ranks: pd.DataFrame, paper_metric: str) -> list[dict]:
    """The per-dataset ranks behind each mean, so ties and gaps can be audited from the CSV."""
    return [
        _tidy_row(key, row.dataset, row.method, paper_metric,
                  Cell(metric="rank", ours_mean=float(row.rank)), None, n_folds=int(row.n))
        for row in ranks.itertuples(index=False)
    ]  # fmt: skip


def build_view(
    key: str,
    table_cfg: Mapping[str, Any],
    paper: str,
    paper_cfg: Mapping[str, Any],
    frame: pd.DataFrame,
    datasets_filter: Collection[str] | None = None,
) -> TableView:
    """The format-independent content of one table from the per-fold frame."""
    if table_cfg.get("kind", "metric") == "rank":
        return _rank_view(key, table_cfg, paper, paper_cfg, frame)
    return _metric_view(key, table_cfg, paper, paper_cfg, frame, datasets_filter)
