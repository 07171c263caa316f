"""The reproduction scorecard: for every cell of every paper table, do we reproduce the paper?

tables.py puts ours beside the paper's number; this module judges each pair, so a researcher sees
per cell whether the difference is within noise: z = Δ / √(SE_ours² + SE_paper²), Δ = ours − paper,
from whichever standard errors exist. A cell that cannot be judged says why instead of showing a
fake z: `undetermined` when neither side has a spread, `not run` with the reason found on disk
(the dataset's fetch error, the profile's `not_run` entry, a failed job's log, nothing run yet).

Outputs carry no timestamps, so DVC sees summary.json change only when a verdict changes.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tabrepro.config import Job
from tabrepro.data.availability import FetchStatus, read_fetch_status, status_path
from tabrepro.data.registry import get_source
from tabrepro.errors import InputError
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.io import atomic_write
from tabrepro.layout import SCORECARD_CSV_FILE, SCORECARD_FILES, SCORECARD_MARKDOWN_FILE, SCORECARD_SUMMARY_FILE
from tabrepro.reporting.reference import reference_table_id
from tabrepro.reporting.tables import (
    DASH,
    Cell,
    TableView,
    build_view,
    collect_current_results,
    dataset_group,
    decimals_for,
    fold_frame,
    format_value,
)

__all__ = [
    "CONSISTENT",
    "DIFFERS",
    "UNDETERMINED",
    "NOT_RUN",
    "VERDICTS",
    "Z_LIMIT",
    "ScoreCell",
    "Scorecard",
    "ScorecardError",
    "build_scorecard",
    "judge",
    "render_markdown",
    "summary",
    "write_scorecard",
    "cells_frame",
    "counts",
    "higher_is_better",
]

Z_LIMIT = 2.0
CONSISTENT, DIFFERS, UNDETERMINED, NOT_RUN = "consistent", "differs", "undetermined", "not run"
VERDICTS = (CONSISTENT, DIFFERS, UNDETERMINED, NOT_RUN)
COUNT_KEYS = {CONSISTENT: "consistent", DIFFERS: "differs", UNDETERMINED: "undetermined", NOT_RUN: "not_run"}
LOG_TAIL_BYTES = 4096
LOG_LINE_CHARS = 200
# Papers whose reported numbers were chosen by test score: the BiSHop thesis' code selects its
# configuration on test (README "Selection"; docs/reproduction.md). Ours always selects on validation.
SELECTED_ON = {"bishop": "test"}
TEST_SELECTION_NOTE = (
    "the paper picked its configuration by test score, ours on validation: ours may sit below for that reason alone"
)


class ScorecardError(InputError, ValueError):
    """An input the scorecard cannot use (unknown paper, unreadable fetch record); names it."""


@dataclass(frozen=True)
class ScoreCell:
    """One judged cell: a paper's table × dataset (or task type, for ranks) × method."""

    paper: str
    table: str
    reference_table: str
    metric: str
    column: str
    method: str
    model: str | None
    ours_mean: float | None
    ours_se: float | None
    ours_se_basis: str | None
    n: int | None
    n_expected: int | None
    paper_value: float | None
    paper_text: str | None
    paper_spread: float | None
    paper_spread_kind: str | None
    paper_se: float | None
    delta: float | None
    z: float | None
    verdict_class: str
    verdict: str
    better_or_worse: str | None
    paper_selected_on: str | None
    budget: str | None
    reason: str | None
    notes: str


@dataclass
class Scorecard:
    """Every judged cell of the papers a profile selects, and the datasets it could not obtain."""

    profile: str
    papers: list[str]
    titles: dict[tuple[str, str], str]
    cells: list[ScoreCell] = field(default_factory=list)
    unobtainable: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    verdict_class: str
    verdict: str
    delta: float | None
    z: float | None
    better_or_worse: str | None


# --------------------------------------------------------------------------- the judgement
def higher_is_better(metric: str) -> bool | None:
    """The metric's direction; ranks are better when lower; None when unknown."""
    if metric in HIGHER_IS_BETTER:
        return HIGHER_IS_BETTER[metric]
    return False if metric.startswith("rank") else None


def judge(
    ours: float | None, ours_se: float | None, paper: float | None, paper_se: float | None, metric: str
) -> Judgement:
    """Verdict for one pair of numbers; never a z where neither side has a spread."""
    if ours is None:
        raise ValueError("judge needs our number; a cell without one is `not run`")
    if paper is None:
        return Judgement(UNDETERMINED, "undetermined (the paper reports no value)", None, None, None)
    delta = ours - paper
    spreads = [se for se in (ours_se, paper_se) if se is not None]
    if not spreads:
        return Judgement(UNDETERMINED, "undetermined (no spread on either side)", delta, None, None)
    combined = math.sqrt(sum(se * se for se in spreads))
    if combined == 0.0:
        if delta == 0.0:
            return Judgement(CONSISTENT, CONSISTENT, delta, 0.0, None)
        return Judgement(UNDETERMINED, "undetermined (zero spread, numbers differ)", delta, None, None)
    z = delta / combined
    if abs(z) <= Z_LIMIT:
        return Judgement(CONSISTENT, CONSISTENT, delta, z, None)
    higher = delta > 0
    direction = higher_is_better(metric)
    better = None if direction is None else ("better" if higher == direction else "worse")
    return Judgement(DIFFERS, f"differs (ours {'higher' if higher else 'lower'})", delta, z, better)


# --------------------------------------------------------------------------- per-paper context
@dataclass(frozen=True)
class _Runs:
    """Which of a dataset × model's expected folds have a result, and which failed (their logs)."""

    expected: tuple[int, ...]
    present: tuple[int, ...]
    failed: tuple[tuple[int, tuple[Path, ...]], ...]


class _PaperContext:
    """What one paper's cells are judged from: the profile, the results read, logs, fetch records."""

    def __init__(self, params: Any, paper: str, logs_dir: Path):
        self.params = params
        self.paper = paper
        self.cfg = params.paper(paper)
        self.logs_dir = Path(logs_dir)
        self.selected = params.selected_datasets(paper)
        self.models = params.selected_models(paper)
        self.results = collect_current_results(params, paper)
        self.frame = fold_frame(self.results, paper, self.cfg.get("models", {}), set(self.selected))
        self.by_job: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
        for result in self.results:
            self.by_job.setdefault((result["dataset"], result["model"]), {})[result["fold"]] = result
        self._fetch: dict[str, FetchStatus | None] = {}

    def fetch_status(self, dataset: str) -> FetchStatus | None:
        source = self.params.source_of(self.paper, dataset)
        if source not in self._fetch:
            try:
                self._fetch[source] = read_fetch_status(self.params.raw_dir(), source)
            except (OSError, ValueError, KeyError, TypeError) as error:
                path = status_path(self.params.raw_dir(), source)
                raise ScorecardError(f"{path}: cannot read the fetch record: {error}") from None
        return self._fetch[source]

    def expects(self, dataset: str, model: str) -> bool:
        """Whether the profile runs this model on this dataset."""
        return dataset in self.selected and model in self.models and self.params.runs_on(self.paper, model, dataset)

    def runs(self, dataset: str, model: str) -> _Runs:
        expected = tuple(self.params.folds(self.paper, dataset))
        done = self.by_job.get((dataset, model), {})
        present = tuple(k for k in expected if k in done)
        failed = tuple((k, logs) for k in expected if k not in done if (logs := self._job_logs(dataset, model, k)))
        return _Runs(expected, present, failed)

    def _job_logs(self, dataset: str, model: str, fold: int) -> tuple[Path, ...]:
        """The logs the workflow's rules write for this job (workflow/rules/train.smk)."""
        from tabrepro.models.registry import get_model_class

        layout = replace(self.params.layout, logs=self.logs_dir)
        job = Job(self.paper, dataset, model, fold)
        if not get_model_class(model).per_config_jobs:
            # one job per fold, or one train_folds job for all of them (params.yaml folds_in_one_job)
            candidates = [layout.train_log.path(job), layout.train_folds_log.path(job)]
        else:
            from tabrepro.resources import config_batches, policy

            try:
                n_batches = len(config_batches(self.params, policy(self.params), self.paper, dataset, model))
            except ValueError:
                n_batches = 0
            candidates = [
                layout.select_log.path(job),
                *(layout.config_batch_log.path(job, batch=b) for b in range(n_batches)),
            ]
        return tuple(path for path in candidates if path.is_file())

    def not_run_reason(self, dataset: str, model: str | None) -> str | None:
        """Why a dataset × model has no result at all, or None when some fold has one."""
        if model is None:
            return "no implementation here (the paper's number only)"
        left_out = self.params.not_run_reason(model)
        if left_out is not None:
            return f"left out by the profile: {left_out}"
        if dataset not in self.selected:
            return "dataset not selected by the profile"
        if model not in self.models:
            return "left out by the profile (not among its models)"
        if not self.params.runs_on(self.paper, model, dataset):
            return "not run on this dataset (its tables do not list this model for the dataset's group)"
        runs = self.runs(dataset, model)
        if runs.present:
            return None
        status = self.fetch_status(dataset)
        if status is not None and not status.ok:
            return f"data not obtainable: {status.error or 'no error recorded'}"
        if runs.failed:
            not_yet = len(runs.expected) - len(runs.failed)
            return "job failed: " + _failure_text(runs) + (f"; {not_yet} not run yet" if not_yet else "")
        if status is None:
            return "not run yet (data not fetched yet)"
        return "not run yet"


def _failure_text(runs: _Runs) -> str:
    fold, logs = runs.failed[0]
    shown = ", ".join(str(path) for path in logs[:3]) + (f" and {len(logs) - 3} more" if len(logs) > 3 else "")
    scope = (
        ""
        if len(runs.failed) == 1 and len(runs.expected) == 1
        else (f"{len(runs.failed)} of {len(runs.expected)} folds failed; fold {fold}: ")
    )
    return f"{scope}see {shown} (last line: {_last_line(logs[0])})"


def _last_line(path: Path) -> str:
    """The last non-empty line of a log (usually the error), shortened."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError as error:
        return f"unreadable: {error}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "empty log"
    last = lines[-1]
    return last if len(last) <= LOG_LINE_CHARS else last[: LOG_LINE_CHARS - 1] + "…"


def _partial_note(runs: _Runs) -> str | None:
    """Say which folds are missing when only some ran (those present are still judged)."""
    missing = len(runs.expected) - len(runs.present)
    if missing == 0:
        return None
    parts = []
    if runs.failed:
        parts.append(_failure_text(runs))
    not_yet = missing - len(runs.failed)
    if not_yet:
        parts.append(f"{not_yet} not run yet")
    return f"folds missing: {len(runs.present)} of {len(runs.expected)} have results ({'; '.join(parts)})"


# --------------------------------------------------------------------------- spreads
def _paper_runs(params: Any, paper: str, dataset: str) -> tuple[int, str]:
    """How many folds (k-fold) or runs (repeats of one split) the paper's ± is over."""
    protocol = params.protocol(paper, dataset)
    if protocol["kind"] == "kfold":
        return int(protocol["n_folds"]), "folds"
    return params.repeats(paper, dataset), "runs"


def _paper_se(value: Any, runs: tuple[int, str] | None) -> tuple[float | None, str | None]:
    """The paper's spread as a standard error, with a note where it had to be converted."""
    if value is None or value.spread is None:
        return None, None
    if value.spread_kind == "se":
        return value.spread, None
    if value.spread_kind == "sd" and runs is not None:
        count, unit = runs
        return (
            value.spread / math.sqrt(count),
            f"the paper's ± is a standard deviation: taken as SE = SD/√{count} with its {count} {unit}",
        )
    return None, f"the paper's ± is of unknown kind ({value.spread_kind!r}): not used"


def _ours_se(
    cell: Cell, spread_kind: str, folds: Mapping[int, Mapping[str, Any]]
) -> tuple[float | None, str | None, str | None]:
    """Our standard error, what it is over, and a note when it is over seeds of one split."""
    if cell.count is not None and cell.count > 1 and cell.ours_spread is not None:
        se = cell.ours_spread if spread_kind == "se" else cell.ours_spread / math.sqrt(cell.count)
        return se, "folds", None
    if cell.count == 1 and len(folds) == 1:
        repeats = next(iter(folds.values())).get("test_repeats") or []
        values = [run.get(cell.metric) for run in repeats if isinstance(run, Mapping)]
        values = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
        if len(values) > 1:
            se = float(np.std(values, ddof=1)) / math.sqrt(len(values))
            return (
                se,
                f"{len(values)} seeds",
                (f"our SE is over the {len(values)} seeds of one split (split-to-split variance not included)"),
            )
    return None, None, None


# --------------------------------------------------------------------------- building cells
def _labels(paper_cfg: Mapping[str, Any], table_cfg: Mapping[str, Any]) -> dict[str, str]:
    """model -> the label this table prints for it (ablation tables have their own labels)."""
    return dict(table_cfg.get("models") or paper_cfg.get("models", {}))


def _model_of(method: str, labels: Mapping[str, str]) -> str | None:
    from tabrepro.models.registry import MODEL_NAMES

    by_label = {label: model for model, label in labels.items()}
    if method in by_label:
        return by_label[method]
    return method if method in MODEL_NAMES else None


def _cell(
    ctx: _PaperContext, key: str, view: TableView, column: str, method: str, model: str | None, cell: Cell, **extra: Any
) -> ScoreCell:
    """A ScoreCell with the fields every kind of cell shares filled in."""
    table_cfg = ctx.cfg["tables"][key]
    selected_on = SELECTED_ON.get(ctx.paper)
    base = dict(
        paper=ctx.paper,
        table=key,
        reference_table=reference_table_id(key, table_cfg),
        metric=cell.metric,
        column=column,
        method=method,
        model=model,
        ours_mean=cell.ours_mean,
        ours_se=None,
        ours_se_basis=None,
        n=cell.count,
        n_expected=None,
        paper_value=cell.paper.value if cell.paper else None,
        paper_text=_paper_text(cell),
        paper_spread=cell.paper.spread if cell.paper else None,
        paper_spread_kind=cell.paper.spread_kind if cell.paper else None,
        paper_se=None,
        delta=None,
        z=None,
        verdict_class=NOT_RUN,
        verdict=NOT_RUN,
        better_or_worse=None,
        paper_selected_on=selected_on,
        budget=None,
        reason=None,
        notes="",
    )
    base.update(extra)
    return ScoreCell(**base)


def _paper_text(cell: Cell) -> str | None:
    if cell.paper is None:
        return None
    spread = cell.paper.spread_text
    kind = f" ({cell.paper.spread_kind.upper()})" if spread and cell.paper.spread_kind else ""
    return cell.paper.value_text if spread is None else f"{cell.paper.value_text} ± {spread}{kind}"


def _judged(
    ours_mean: float, ours_se: float | None, paper_se: float | None, cell: Cell, notes: list[str], metric: str
) -> dict[str, Any]:
    """The verdict fields, plus the note on which side's spread z rests on."""
    result = judge(ours_mean, ours_se, cell.paper.value if cell.paper else None, paper_se, metric)
    if cell.paper is not None and result.z is not None:
        if paper_se is None:
            notes.append("the paper gives no spread: z uses ours alone")
        elif ours_se is None:
            notes.append("ours has no spread (one result): z uses the paper's alone")
    return dict(
        delta=result.delta,
        z=result.z,
        verdict_class=result.verdict_class,
        verdict=result.verdict,
        better_or_worse=result.better_or_worse,
    )


def _dataset_cells(ctx: _PaperContext, key: str, view: TableView) -> list[ScoreCell]:
    table_cfg = ctx.cfg["tables"][key]
    labels = _labels(ctx.cfg, table_cfg)
    spread_kind = table_cfg.get("spread", "se")
    cells = []
    for dataset in view.columns:
        expected_labels = [label for model, label in labels.items() if ctx.expects(dataset, model)]
        for method in dict.fromkeys([*view.methods, *expected_labels]):
            cell = view.cells.get((method, dataset)) or Cell(metric=table_cfg["metric"])
            model = _model_of(method, labels)
            expected = model is not None and ctx.expects(dataset, model)
            if cell.paper is None and cell.ours_mean is None and not expected:
                continue
            cells.append(_dataset_cell(ctx, key, view, dataset, method, model, cell, spread_kind))
    return cells


def _dataset_cell(
    ctx: _PaperContext,
    key: str,
    view: TableView,
    dataset: str,
    method: str,
    model: str | None,
    cell: Cell,
    spread_kind: str,
) -> ScoreCell:
    notes: list[str] = []
    if SELECTED_ON.get(ctx.paper) == "test":
        notes.append(TEST_SELECTION_NOTE)
    substitute = ctx.params.substitute_note(ctx.paper, dataset)
    if substitute:
        notes.append(substitute)
    paper_se, paper_note = _paper_se(cell.paper, _paper_runs(ctx.params, ctx.paper, dataset))
    reason = ctx.not_run_reason(dataset, model)
    expected = model is not None and ctx.expects(dataset, model)
    budget = ctx.params.budget_note(ctx.paper, dataset, model) if expected else None
    runs = ctx.runs(dataset, model) if expected and reason is None else None
    n_expected = len(ctx.params.folds(ctx.paper, dataset)) if expected else None
    if cell.ours_mean is None:
        if reason is None:  # results exist, but none has this table's metric
            reason = f"no fold result has the metric {cell.metric!r}"
        return _cell(
            ctx,
            key,
            view,
            dataset,
            method,
            model,
            cell,
            n_expected=n_expected,
            paper_se=paper_se,
            budget=budget,
            reason=reason,
            notes="; ".join(notes),
        )
    folds = ctx.by_job.get((dataset, model), {}) if model is not None else {}
    ours_se, basis, ours_note = _ours_se(cell, spread_kind, folds)
    if runs is not None:
        partial = _partial_note(runs)
        notes += [partial] if partial else []
        if cell.count is not None and cell.count < len(runs.present):
            notes.append(f"the metric is missing in {len(runs.present) - cell.count} of the fold results")
    notes += [note for note in (paper_note, ours_note) if note]
    verdict = _judged(cell.ours_mean, ours_se, paper_se, cell, notes, cell.metric)
    return _cell(
        ctx,
        key,
        view,
        dataset,
        method,
        model,
        cell,
        ours_se=ours_se,
        ours_se_basis=basis,
        n_expected=n_expected,
        paper_se=paper_se,
        budget=budget,
        notes="; ".join(notes),
        **verdict,
    )


def _task_of(ctx: _PaperContext, dataset: str) -> str:
    return get_source(ctx.params.source_of(ctx.paper, dataset)).task


def _rank_cells(ctx: _PaperContext, key: str, view: TableView) -> list[ScoreCell]:
    """Rank cells are judged only when every paper dataset of the task type has every method."""
    table_cfg = ctx.cfg["tables"][key]
    labels = _labels(ctx.cfg, table_cfg)
    group = table_cfg.get("group")
    cells = []
    for task, metric in table_cfg["rank_metrics"].items():
        datasets = [
            d
            for d in ctx.cfg["datasets"]
            if _task_of(ctx, d) == task and (group is None or dataset_group(ctx.cfg, d) == str(group))
        ]
        ranked = [m for m in view.methods if view.cells[(m, task)].paper is not None]
        gap = _rank_gap(ctx, task, metric, datasets, ranked)
        for method in view.methods:
            cell = view.cells[(method, task)]
            if cell.paper is None and cell.ours_mean is None:
                continue
            notes = [TEST_SELECTION_NOTE] if SELECTED_ON.get(ctx.paper) == "test" else []
            paper_se, paper_note = _paper_se(cell.paper, None)
            notes += [paper_note] if paper_note else []
            common = dict(metric=_paper_metric(table_cfg, task), n_expected=len(datasets), paper_se=paper_se)
            if gap is not None or cell.ours_mean is None:
                reason = gap or "no results"
                cells.append(
                    _cell(
                        ctx,
                        key,
                        view,
                        task,
                        method,
                        _model_of(method, labels),
                        cell,
                        reason=reason,
                        notes="; ".join(notes),
                        **common,
                    )
                )
                continue
            verdict = _judged(cell.ours_mean, cell.ours_spread, paper_se, cell, notes, "rank")
            cells.append(
                _cell(
                    ctx,
                    key,
                    view,
                    task,
                    method,
                    _model_of(method, labels),
                    cell,
                    ours_se=cell.ours_spread,
                    ours_se_basis="datasets",
                    notes="; ".join(notes),
                    **common,
                    **verdict,
                )
            )
    return cells


def _paper_metric(table_cfg: Mapping[str, Any], task: str) -> str:
    return (table_cfg.get("paper_metrics") or {}).get(task, f"rank_{task}")


def _rank_gap(ctx: _PaperContext, task: str, metric: str, datasets: list[str], methods: list[str]) -> str | None:
    """Why this task type's ranks cannot be compared with the paper's, or None when they can."""
    if not datasets:
        return f"the paper has no {task} dataset"
    have = set(
        map(tuple, ctx.frame.loc[ctx.frame["metric"] == metric, ["dataset", "method"]].drop_duplicates().to_numpy())
    )
    missing: dict[str, list[str]] = {}
    for dataset in datasets:
        status = ctx.fetch_status(dataset) if dataset in ctx.selected else None
        if dataset not in ctx.selected:
            missing.setdefault("not selected by the profile", []).append(dataset)
        elif status is not None and not status.ok:
            missing.setdefault("data not obtainable", []).append(dataset)
        elif gone := [m for m in methods if (dataset, m) not in have]:
            missing.setdefault("each cell of the dataset tables says why", []).append(
                f"{dataset}: no results for {', '.join(gone)}"
            )
    if not missing:
        return None
    detail = "; ".join(f"{', '.join(items)} ({why})" for why, items in missing.items())
    return (
        f"ranks need results of all {len(methods)} ranked methods on every {task} dataset of "
        f"the paper ({', '.join(datasets)}); missing: {detail}"
    )


# --------------------------------------------------------------------------- the whole card
def build_scorecard(params: Any, paper: str | None = None, logs_dir: Path | None = None) -> Scorecard:
    """Judge every cell of the profile's papers (or of `paper` only).

    `logs_dir` is where the workflow's logs lie (default: `logs/` beside params.yaml, where
    Snakemake writes them). Raises ScorecardError for an unknown paper or one the profile does
    not select, and ResultsError (tables.py) for a stale or malformed metrics.json.
    """
    if logs_dir is None:
        logs_dir = params.logs_dir
    if paper is not None:
        if paper not in params.papers:
            raise ScorecardError(f"unknown paper {paper!r} (params.yaml has {', '.join(params.papers)})")
        if not params.selected_datasets(paper):
            raise ScorecardError(f"profile {params.profile_name!r} selects no dataset of paper {paper!r}")
        papers = [paper]
    else:
        papers = [p for p in params.papers if params.selected_datasets(p)]
    card = Scorecard(profile=params.profile_name, papers=papers, titles={})
    for name in papers:
        ctx = _PaperContext(params, name, Path(logs_dir))
        for key, table_cfg in ctx.cfg.get("tables", {}).items():
            view = build_view(key, table_cfg, name, ctx.cfg, ctx.frame, set(ctx.selected))
            card.titles[(name, key)] = f"{view.title} ({view.source.removesuffix('.')})"
            is_rank = table_cfg.get("kind", "metric") == "rank"
            card.cells += _rank_cells(ctx, key, view) if is_rank else _dataset_cells(ctx, key, view)
        for dataset in ctx.selected:
            status = ctx.fetch_status(dataset)
            if status is not None and not status.ok:
                card.unobtainable.setdefault(name, {})[dataset] = status.error or "no error recorded"
    return card


def counts(cells: Iterable[ScoreCell]) -> dict[str, int]:
    """Cells per verdict (plus how many differ for the better and for the worse)."""
    tally = Counter(cell.verdict_class for cell in cells)
    out = {COUNT_KEYS[v]: tally.get(v, 0) for v in VERDICTS}
    out["cells"] = sum(tally.values())
    return out


def summary(card: Scorecard) -> dict[str, Any]:
    """The DVC metrics file: counts nested by paper and table, and the unobtainable datasets."""
    papers: dict[str, Any] = {}
    for paper in card.papers:
        mine = [c for c in card.cells if c.paper == paper]
        tables = dict.fromkeys(c.table for c in mine)
        papers[paper] = {"all": counts(mine), **{t: counts(c for c in mine if c.table == t) for t in tables}}
    return {"profile": card.profile, "all": counts(card.cells), "papers": papers, "unobtainable": card.unobtainable}


def cells_frame(card: Scorecard) -> pd.DataFrame:
    """One row per cell with every field (the CSV)."""
    return pd.DataFrame([asdict(c) for c in card.cells], columns=[f.name for f in fields(ScoreCell)])


# --------------------------------------------------------------------------- Markdown
def _number(value: float | None, metric: str, places: int | None = None) -> str:
    return format_value(value, metric, places)


def ours_text(cell: ScoreCell) -> str:
    """Ours as `mean ± SE` with the mean's decimals, or a dash."""
    if cell.ours_mean is None:
        return DASH
    places = decimals_for(cell.ours_mean, cell.metric)
    mean = _number(cell.ours_mean, cell.metric, places)
    return mean if cell.ours_se is None else f"{mean} ± {_number(cell.ours_se, cell.metric, places)}"


def delta_text(cell: ScoreCell) -> str:
    if cell.delta is None:
        return DASH
    places = decimals_for(cell.ours_mean if cell.ours_mean is not None else 0.0, cell.metric)
    return f"{cell.delta:+.{places}f}"


def z_text(cell: ScoreCell) -> str:
    return DASH if cell.z is None else f"{cell.z:+.2f}"


def verdict_text(cell: ScoreCell) -> str:
    """The verdict with better/worse where it differs."""
    return cell.verdict if cell.better_or_worse is None else f"{cell.verdict}: {cell.better_or_worse}"


def notes_text(cell: ScoreCell) -> str:
    """Reason, budget and notes in one line; the test-selection note shortened (the paper's
    heading explains it once)."""
    notes = [n for n in cell.notes.split("; ") if n and n != TEST_SELECTION_NOTE]
    if cell.paper_selected_on:
        notes.insert(0, f"paper selected on {cell.paper_selected_on}")
    return "; ".join(p for p in (cell.reason, cell.budget, *notes) if p) or DASH


def n_text(cell: ScoreCell) -> str:
    if cell.n_expected is None:
        return DASH if cell.n is None else str(cell.n)
    return f"{cell.n or 0}/{cell.n_expected}"


def _md(text: str) -> str:
    return str(text).replace("|", r"\|").replace("\n", " ")


def _md_table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(_md(value) for value in row) + " |" for row in rows]
    return lines


VERDICT_RULE = (
    f"z = Δ / √(SE_ours² + SE_paper²) with Δ = ours − paper, from whichever SEs exist (an SD the "
    f"paper reports is turned into an SE with its number of folds or runs). Verdicts: "
    f"**consistent** |z| ≤ {Z_LIMIT:g}; **differs** (ours higher/lower, and whether that is better "
    f"or worse for the metric); **undetermined** where neither side has a spread or the paper "
    f"reports no value; **not run** with the reason. Ours: mean ± SE over n folds (n/expected)."
)


def render_markdown(card: Scorecard) -> str:
    """The scorecard to read: counts first, then every table's cells."""
    lines = [
        f"# Reproduction scorecard — profile `{card.profile}`",
        "",
        VERDICT_RULE,
        "",
        "Only the datasets the profile selects appear; `tabrepro scorecard` rebuilds this page.",
        "",
        "## Counts",
        "",
    ]
    rows = []
    for paper, stats in summary(card)["papers"].items():
        for table, tally in stats.items():
            rows.append([paper, table, *(tally[COUNT_KEYS[v]] for v in VERDICTS), tally["cells"]])
    lines += _md_table(["Paper", "Table", *VERDICTS, "cells"], rows) + ["", "## Datasets not obtainable", ""]
    gone = [
        f"- {paper}/{dataset}: {error}"
        for paper, items in card.unobtainable.items()
        for dataset, error in items.items()
    ]
    lines += (gone or ["None."]) + [""]
    header = ["Column", "Method", "Ours", "n", "Paper", "Δ", "z", "Verdict", "Reason / notes"]
    for paper in card.papers:
        lines += [f"## {paper}", ""]
        if SELECTED_ON.get(paper) == "test":
            lines += [f"Every {paper} cell: {TEST_SELECTION_NOTE}. The verdicts are still computed.", ""]
        for (owner, table), title in card.titles.items():
            if owner != paper:
                continue
            mine = [c for c in card.cells if c.paper == paper and c.table == table]
            lines += [f"### {table}: {title}", ""]
            if not mine:
                lines += ["_No cell: no selected dataset of this table's task types._", ""]
                continue
            lines += _md_table(
                header,
                (
                    [
                        c.column,
                        c.method,
                        ours_text(c),
                        n_text(c),
                        c.paper_text or DASH,
                        delta_text(c),
                        z_text(c),
                        verdict_text(c),
                        notes_text(c),
                    ]
                    for c in mine
                ),
            ) + [""]
    return "\n".join(lines)


def write_scorecard(card: Scorecard, out_dir: Path) -> list[Path]:
    """Write scorecard.md, scorecard.csv and summary.json atomically; returns their paths."""
    out_dir = Path(out_dir)
    payloads = {
        SCORECARD_MARKDOWN_FILE: render_markdown(card).encode("utf-8"),
        SCORECARD_CSV_FILE: cells_frame(card).to_csv(index=False, lineterminator="\n").encode("utf-8"),
        SCORECARD_SUMMARY_FILE: (json.dumps(summary(card), indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
    }
    written = []
    for name in SCORECARD_FILES:
        atomic_write(out_dir / name, payloads[name])
        written.append(out_dir / name)
    return written
