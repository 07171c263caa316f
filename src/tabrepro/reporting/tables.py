"""Paper tables: our per-fold results aggregated and printed beside the papers' own numbers.

Every job writes one `metrics.json` per fold; this module is the only place where folds are
reduced to the mean ± spread a paper prints, so the arithmetic (sample SD, SE = SD/sqrt(n),
average ranks for ties) lives here once. Each table is written three ways: Markdown to read,
LaTeX to paste into a report, and a tidy long CSV for any further analysis.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from tabrepro.errors import InputError
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.io import atomic_write
from tabrepro.layout import METRICS_FILE
from tabrepro.reporting.reference import (
    PaperValue,
    lookup,
    reference_datasets,
    reference_methods,
    reference_table_id,
)
from tabrepro.tasks import TASKS

SPREAD_KINDS = ("se", "sd")
DASH = "—"
REQUIRED_KEYS = ("paper", "dataset", "model", "fold", "task", "metrics")
FOLD_COLUMNS = ["dataset", "model", "method", "fold", "task", "metric", "value"]
TIDY_COLUMNS = [
    "table", "dataset", "method", "metric", "ours_mean", "ours_spread", "spread_kind",
    "n_folds", "paper_value", "paper_spread", "paper_spread_kind", "n_datasets",
]  # fmt: skip
RANK_TIE_DECIMALS = 12  # means of equal fold scores may differ in the last bit (summation order)


class ResultsError(InputError, ValueError):
    """A per-fold result that cannot be used; the message names the file or fold."""


# --------------------------------------------------------------------------- reading results


def collect_results(results_dir: Path, paper: str) -> list[dict[str, Any]]:
    """Read every `<paper>/<dataset>/<model>/fold<k>/metrics.json` under `results_dir`.

    Files are read in sorted order so tables do not depend on directory listing order; a file
    that is not valid JSON, lacks a field, or lies in the wrong directory raises ResultsError.
    """
    root = Path(results_dir) / paper
    return [_read_result(path, paper) for path in sorted(root.glob(f"*/*/fold*/{METRICS_FILE}"))]


def collect_current_results(params: Any, paper: str, *, frozen: bool = False) -> list[dict[str, Any]]:
    """The metrics.json of the active profile's jobs for `paper` (tabrepro.config.Params).

    Files of jobs outside the profile are left out. A job's file written under other parameters
    (its params_digest differs from params.yaml's, e.g. restored by `dvc pull` without a rerun)
    raises ResultsError naming it: a table must never mix settings silently. A committed run
    record is `frozen`: its results are judged as they were recorded, each one written under other
    parameters marked `stale_digest` so that its cells say so.
    """
    root = Path(params.results_dir)
    results = []
    for job in params.jobs([paper]):
        path = root / job.paper / job.dataset / job.model / f"fold{job.fold}" / METRICS_FILE
        if not path.is_file():
            continue
        result = _read_result(path, paper)
        expected = params.job_digest(job)
        if result.get("params_digest") != expected and frozen:
            result["stale_digest"] = expected
        elif result.get("params_digest") != expected:
            raise ResultsError(
                f"{path}: written under other parameters (params_digest "
                f"{result.get('params_digest')!r}, params.yaml gives {expected!r}); "
                f"rerun that job (snakemake reruns it)"
            )
        results.append(result)
    return results


def _read_result(path: Path, paper: str) -> dict[str, Any]:
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{path}: cannot read result JSON: {error}") from error
    problem = _content_problem(result, paper) or _location_problem(result, path)
    if problem is not None:
        raise ResultsError(f"{path}: {problem}")
    return result


def _content_problem(result: Any, paper: str) -> str | None:
    """Why a result dict cannot be aggregated, or None if it can."""
    if not isinstance(result, dict):
        return "the top level is not a JSON object"
    missing = [key for key in REQUIRED_KEYS if key not in result]
    if missing:
        return f"missing field(s) {missing}"
    if result["paper"] != paper:
        return f"paper is {result['paper']!r}, expected {paper!r}"
    if result["task"] not in TASKS:
        return f"task {result['task']!r} is not one of {list(TASKS)}"
    if isinstance(result["fold"], bool) or not isinstance(result["fold"], int):
        return f"fold {result['fold']!r} is not an integer"
    metrics = result["metrics"]
    test = metrics.get("test") if isinstance(metrics, dict) else None
    if not isinstance(test, dict):
        return "metrics.test is missing or not an object"
    bad = [name for name, value in test.items() if value is not None and not _is_number(value)]
    if bad:
        return f"non-numeric test metric(s) {bad}"
    return None


def _location_problem(result: dict[str, Any], path: Path) -> str | None:
    """A file whose content disagrees with its directory would be silently mislabelled."""
    expected = (str(result["dataset"]), str(result["model"]), f"fold{result['fold']}")
    found = path.parts[-4:-1]
    if tuple(found) != expected:
        return f"content says {'/'.join(expected)} but the file lies under {'/'.join(found)}"
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --------------------------------------------------------------------------- aggregation


def fold_frame(
    results: Iterable[Mapping[str, Any]],
    paper: str,
    models: Mapping[str, str],
    datasets_filter: Collection[str] | None = None,
) -> pd.DataFrame:
    """One row per (dataset, model, fold, test metric), with the paper's label as `method`.

    Results of other papers are skipped (callers may pass a mixed list); results of datasets
    outside `datasets_filter` are dropped so stale runs of another profile do not leak in.
    """
    rows: list[dict[str, Any]] = []
    for result in results:
        if result.get("paper") != paper:
            continue
        problem = _content_problem(result, paper)
        if problem is not None:
            name = f"{result.get('dataset')}/{result.get('model')}/fold{result.get('fold')}"
            raise ResultsError(f"result {name}: {problem}")
        if datasets_filter is not None and result["dataset"] not in datasets_filter:
            continue
        rows.extend(_metric_rows(result, models))
    frame = pd.DataFrame(rows, columns=FOLD_COLUMNS)
    frame["value"] = frame["value"].astype(float)
    frame = frame[np.isfinite(frame["value"])]
    _check_consistent(frame)
    return frame.reset_index(drop=True)


def _metric_rows(result: Mapping[str, Any], models: Mapping[str, str]) -> list[dict[str, Any]]:
    base = {
        "dataset": result["dataset"],
        "model": result["model"],
        "method": models.get(result["model"], result["model"]),
        "fold": result["fold"],
        "task": result["task"],
    }
    test = result["metrics"]["test"]
    return [{**base, "metric": metric, "value": value} for metric, value in test.items() if value is not None]


def _check_consistent(frame: pd.DataFrame) -> None:
    """Refuse duplicated folds and datasets with two task types: both would skew the means."""
    duplicated = frame.duplicated(subset=["dataset", "model", "fold", "metric"])
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise ResultsError(f"duplicate result for {first['dataset']}/{first['model']}/fold{first['fold']}")
    tasks = frame.groupby("dataset")["task"].unique()
    mixed = {dataset: sorted(values) for dataset, values in tasks.items() if len(values) > 1}
    if mixed:
        raise ResultsError(f"datasets with more than one task type: {mixed}")


def summarize_folds(frame: pd.DataFrame, spread_kind: str = "se") -> pd.DataFrame:
    """Mean, spread and fold count per (dataset, method, metric).

    The spread is the sample SD (ddof=1) or the SE = SD/sqrt(n); with one fold it is NaN, as a
    single holdout split says nothing about variability.
    """
    if spread_kind not in SPREAD_KINDS:
        raise ValueError(f"spread must be one of {SPREAD_KINDS}, got {spread_kind!r}")
    keys = ["dataset", "method", "metric"]
    if frame.empty:
        return pd.DataFrame(columns=[*keys, "mean", "spread", "n"])
    stats = frame.groupby(keys, sort=False)["value"].agg(["mean", "std", "count"]).reset_index()
    sd = stats["std"].where(stats["count"] > 1)
    spread = sd if spread_kind == "sd" else sd / np.sqrt(stats["count"])
    return pd.DataFrame(
        {**{key: stats[key] for key in keys}, "mean": stats["mean"], "spread": spread,
         "n": stats["count"].astype(int)}
    )  # fmt: skip


def rank_methods(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rank methods per dataset by mean metric: 1 = best, ties share the mean rank."""
    if metric not in HIGHER_IS_BETTER:
        raise KeyError(f"no direction known for metric {metric!r}; add it to HIGHER_IS_BETTER")
    scores = summary[summary["metric"] == metric].copy()
    if scores.empty:
        return scores.assign(rank=pd.Series(dtype=float))
    sign = -1.0 if HIGHER_IS_BETTER[metric] else 1.0
    scores["key"] = np.round(sign * scores["mean"].astype(float), RANK_TIE_DECIMALS)
    scores["rank"] = scores.groupby("dataset")["key"].transform(
        lambda keys: rankdata(keys.to_numpy(), method="average")
    )
    return scores.drop(columns="key").reset_index(drop=True)


def _mean_and_se(values: pd.Series) -> tuple[float, float | None, int]:
    n = int(values.count())
    mean = float(values.mean())
    se = float(values.std(ddof=1)) / math.sqrt(n) if n > 1 else None
    return mean, se, n


# --------------------------------------------------------------------------- table model


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
    in_paper_table = set(reference_datasets(paper, reference_id, metric))
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
    paper_methods = reference_methods(paper, reference_id, metric, datasets)
    methods = _method_order(labels, summary.index.get_level_values("method"), paper_methods)
    cells: dict[tuple[str, str], Cell] = {}
    rows: list[dict[str, Any]] = []
    for dataset in datasets:
        for method in methods:
            cell = _metric_cell(summary, paper, reference_id, dataset, method, metric)
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


def _metric_cell(summary: pd.DataFrame, paper: str, reference_id: str, dataset: str, method: str, metric: str) -> Cell:
    paper_value = lookup(paper, reference_id, dataset, method, metric)
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
        for method in reference_methods(paper, reference_id, _paper_metric(task, paper_metrics))
    ]
    ours = [method for table in ranks.values() for method in table["method"]]
    methods = _method_order(paper_cfg.get("models", {}), ours, paper_only)
    cells: dict[tuple[str, str], Cell] = {}
    rows: list[dict[str, Any]] = []
    for task in rank_metrics:
        paper_metric = _paper_metric(task, paper_metrics)
        rows.extend(_per_dataset_rank_rows(key, ranks[task], paper_metric))
        for method in methods:
            cell = _rank_cell(ranks[task], paper, reference_id, method, paper_metric)
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


def _paper_metric(task: str, paper_metrics: Mapping[str, str]) -> str:
    return paper_metrics.get(task, f"rank_{task}")


def _rank_cell(ranks: pd.DataFrame, paper: str, reference_id: str, method: str, paper_metric: str) -> Cell:
    paper_value = lookup(paper, reference_id, "all", method, paper_metric)
    mine = ranks.loc[ranks["method"] == method, "rank"]
    if mine.empty:
        return Cell(metric="rank", paper=paper_value)
    mean, se, n = _mean_and_se(mine.astype(float))
    return Cell(metric="rank", ours_mean=mean, ours_spread=se, count=n, paper=paper_value)


def _per_dataset_rank_rows(key: str, ranks: pd.DataFrame, paper_metric: str) -> list[dict]:
    """The per-dataset ranks behind each mean, so ties and gaps can be audited from the CSV."""
    return [
        _tidy_row(key, row.dataset, row.method, paper_metric,
                  Cell(metric="rank", ours_mean=float(row.rank)), None, n_folds=int(row.n))
        for row in ranks.itertuples(index=False)
    ]  # fmt: skip


# --------------------------------------------------------------------------- formatting


def decimals_for(value: float, metric: str) -> int:
    """Percentages and ranks get 2 decimals (as the papers print them); others 3 significant."""
    if metric.endswith("_pct") or metric.startswith("rank"):
        return 2
    if value == 0 or not math.isfinite(value):
        return 3
    return max(0, 2 - math.floor(math.log10(abs(value))))


def format_value(value: float | None, metric: str, decimals: int | None = None) -> str:
    """One number as printed in a table; None or NaN prints as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    places = decimals_for(value, metric) if decimals is None else decimals
    return f"{value:.{places}f}"


def _ours_parts(cell: Cell) -> tuple[str, str | None]:
    """Mean and spread strings; the spread uses the mean's decimals so the columns line up."""
    if cell.ours_mean is None:
        return DASH, None
    places = decimals_for(cell.ours_mean, cell.metric)
    mean = format_value(cell.ours_mean, cell.metric, places)
    if cell.ours_spread is None:
        return mean, None
    return mean, format_value(cell.ours_spread, cell.metric, places)


def _paper_parts(cell: Cell) -> tuple[str, str | None]:
    """The paper's number exactly as printed there (no reformatting of its precision)."""
    if cell.paper is None:
        return DASH, None
    return cell.paper.value_text, cell.paper.spread_text


def _count_text(cell: Cell) -> str:
    return DASH if cell.count is None else str(cell.count)


# --------------------------------------------------------------------------- Markdown


def _md_escape(text: str) -> str:
    return text.replace("|", r"\|")


def _md_pair(parts: tuple[str, str | None]) -> str:
    value, spread = parts
    return value if spread is None else f"{value} ± {spread}"


def render_markdown(view: TableView) -> str:
    """A GitHub-flavoured Markdown table with the title, source and a note on what ± means."""
    lines = [f"# {view.title}", "", f"{view.source} {view.note}", ""]
    if view.empty_reason is not None:
        return "\n".join([*lines, f"_{view.empty_reason}_", ""])
    header = ["Method"]
    for column in view.columns:
        header += [f"{column} ours", f"{column} paper", f"{column} {view.count_label}"]
    lines.append("| " + " | ".join(_md_escape(text) for text in header) + " |")
    lines.append("|" + "|".join([":---", *["---:"] * (len(header) - 1)]) + "|")
    for method in view.methods:
        row = [method]
        for column in view.columns:
            cell = view.cells[(method, column)]
            row += [_md_pair(_ours_parts(cell)), _md_pair(_paper_parts(cell)), _count_text(cell)]
        lines.append("| " + " | ".join(_md_escape(text) for text in row) + " |")
    return "\n".join([*lines, ""])


# --------------------------------------------------------------------------- LaTeX

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "±": r"$\pm$", "—": "--", "–": "--", "²": r"\textsuperscript{2}", "√": r"$\surd$",
}  # fmt: skip


def latex_escape(text: str) -> str:
    """Escape LaTeX specials (and the few non-ASCII symbols our titles use)."""
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)


def _tex_pair(parts: tuple[str, str | None]) -> str:
    value, spread = parts
    value = latex_escape(value)
    return value if spread is None else f"{value} $\\pm$ {latex_escape(spread)}"


def _tex_label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9:-]+", "-", text)


def render_latex(view: TableView, paper: str) -> str:
    """A booktabs table: one three-column group (ours, paper, count) per dataset or task."""
    caption = latex_escape(f"{view.title}. {view.source} {view.note}")
    lines = [
        "% Generated by tabrepro.reporting.tables; needs \\usepackage{booktabs}.",
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{{caption}}}",
        f"\\label{{tab:{_tex_label(paper)}-{_tex_label(view.key)}}}",
    ]
    if view.empty_reason is not None:
        body = [
            "\\begin{tabular}{l}", "\\toprule", latex_escape(view.empty_reason) + " \\\\",
            "\\bottomrule", "\\end{tabular}",
        ]  # fmt: skip
        return "\n".join([*lines, *body, "\\end{table}", ""])
    lines += _latex_tabular(view)
    return "\n".join([*lines, "\\end{table}", ""])


def _latex_tabular(view: TableView) -> list[str]:
    count = "$n$" if view.count_label == "n" else latex_escape(view.count_label)
    groups = " & ".join(f"\\multicolumn{{3}}{{c}}{{{latex_escape(column)}}}" for column in view.columns)
    rules = " ".join(f"\\cmidrule(lr){{{2 + 3 * i}-{4 + 3 * i}}}" for i in range(len(view.columns)))
    subheader = " & ".join(["Method", *["Ours & Paper & " + count] * len(view.columns)])
    lines = [
        "\\begin{tabular}{l" + "rrr" * len(view.columns) + "}",
        "\\toprule",
        f" & {groups} \\\\",
        rules,
        f"{subheader} \\\\",
        "\\midrule",
    ]
    for method in view.methods:
        row = [latex_escape(method)]
        for column in view.columns:
            cell = view.cells[(method, column)]
            row += [_tex_pair(_ours_parts(cell)), _tex_pair(_paper_parts(cell)),
                    latex_escape(_count_text(cell))]  # fmt: skip
        lines.append(" & ".join(row) + " \\\\")
    return [*lines, "\\bottomrule", "\\end{tabular}"]


# --------------------------------------------------------------------------- writing


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


def build_tables(
    results: Iterable[Mapping[str, Any]],
    paper: str,
    paper_cfg: Mapping[str, Any],
    out_dir: Path,
    datasets_filter: Collection[str] | None = None,
) -> list[Path]:
    """Write `<table>.md`, `<table>.tex` and `<table>.csv` for every table of `paper_cfg`.

    `paper_cfg` is `params["papers"][paper]`. `datasets_filter` (the profile's datasets) limits
    which results count and adds columns for listed datasets that have no results yet, so the
    paper's numbers appear before ours exist. Returns the paths written, in params order.
    """
    out_dir = Path(out_dir)
    filter_set = None if datasets_filter is None else set(datasets_filter)
    frame = fold_frame(results, paper, paper_cfg.get("models", {}), filter_set)
    written: list[Path] = []
    for key, table_cfg in paper_cfg.get("tables", {}).items():
        view = build_view(key, table_cfg, paper, paper_cfg, frame, filter_set)
        written += _write_view(view, paper, out_dir)
    return written


def _write_view(view: TableView, paper: str, out_dir: Path) -> list[Path]:
    outputs = {
        out_dir / f"{view.key}.md": render_markdown(view),
        out_dir / f"{view.key}.tex": render_latex(view, paper),
        out_dir / f"{view.key}.csv": view.tidy.to_csv(index=False, lineterminator="\n"),
    }
    for path, text in outputs.items():
        atomic_write(path, text)  # a reader (or a killed job) never sees half a table
    return list(outputs)
