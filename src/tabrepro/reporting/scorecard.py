"""The reproduction scorecard: for every cell of every paper table, do we reproduce the paper?

tables.py puts ours beside the paper's number; this module judges each pair with the rules of
tabrepro.reporting.verdicts (a declared margin δ per metric, two one-sided tests for `reproduced`,
Benjamini–Hochberg within the table for `differs`), from the spread that two independent runs of
each side's protocol would show (tabrepro.reporting.spreads). Numbers the paper quotes from other
papers keep a verdict but are counted apart; rows the paper does not have are `ours only` and not
counted. A cell that cannot be judged says why: `not comparable` (substitute data), `not run` with
the reason found on disk (the dataset's fetch error, the profile's `not_run` entry, a failed job's
log, nothing run yet), or `inconclusive` with how many runs of ours would decide it.
Rendering lives in scorecard_markdown.py.

Outputs carry no timestamps, so DVC sees summary.json change only when a verdict changes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from tabrepro.config import Job
from tabrepro.data.availability import FetchStatus, read_fetch_status, status_path
from tabrepro.data.registry import get_source
from tabrepro.errors import InputError
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.reporting.reference import PaperValue, reference_table_id
from tabrepro.reporting.spreads import sampling_se
from tabrepro.reporting.tables import Cell, TableView, build_view, collect_current_results, dataset_group, fold_frame
from tabrepro.reporting.verdicts import (
    DIFFERS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_RUN,
    OURS_ONLY,
    REPRODUCED,
    Side,
    Test,
    VerdictRules,
    compare,
    judge_table,
    runs_to_decide,
)

__all__ = [
    "COUNT_GROUPS",
    "COUNT_KEYS",
    "DIFFERS",
    "INCONCLUSIVE",
    "NOT_COMPARABLE",
    "NOT_RUN",
    "OURS_ONLY",
    "REPRODUCED",
    "VERDICTS",
    "ScoreCell",
    "Scorecard",
    "ScorecardError",
    "build_scorecard",
    "cells_frame",
    "counts",
    "higher_is_better",
    "summary",
]

VERDICTS = (REPRODUCED, DIFFERS, INCONCLUSIVE, NOT_COMPARABLE, NOT_RUN, OURS_ONLY)
COUNT_KEYS = {v: v.replace(" ", "_") for v in VERDICTS}
# Which tally a cell enters: the paper's own runs, numbers it quotes from other papers, or none
# (rows the paper does not have).
OWN, QUOTED, UNCOUNTED = "own", "quoted", "none"
COUNT_GROUPS = (OWN, QUOTED)
LOG_TAIL_BYTES = 4096
LOG_LINE_CHARS = 200


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
    paper_se: float | None
    paper_se_basis: str | None
    paper_origin: str | None
    quoted_from: str | None
    paper_selected_on: str | None
    margin: float | None
    margin_text: str | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_difference: float | None
    p_adjusted: float | None
    verdict_class: str
    verdict: str
    better_or_worse: str | None
    count_group: str
    budget: str | None
    reason: str | None
    notes: str


@dataclass
class Scorecard:
    """Every judged cell of the papers a profile selects, and the datasets it could not obtain."""

    profile: str
    papers: list[str]
    titles: dict[tuple[str, str], str]
    rules: VerdictRules
    cells: list[ScoreCell] = field(default_factory=list)
    unobtainable: dict[str, dict[str, str]] = field(default_factory=dict)


def higher_is_better(metric: str) -> bool | None:
    """The metric's direction; ranks are better when lower; None when unknown."""
    if metric in HIGHER_IS_BETTER:
        return HIGHER_IS_BETTER[metric]
    return False if metric.startswith("rank") else None


def rules_of(params: Any) -> VerdictRules:
    """The verdict rules params.yaml declares (`verdicts`)."""
    return VerdictRules.from_params(params.raw["verdicts"])


# --------------------------------------------------------------------------- spreads
def _calibration(params: Any, metric: str) -> tuple[float, str]:
    """The factor the split-seed experiment found between the k-fold SE and the spread of
    independent runs of the protocol (params.yaml `verdicts.spread_calibration`)."""
    section = params.raw["verdicts"].get("spread_calibration") or {}
    factors = section.get("kfold") or {}
    factor = factors.get(metric, factors.get("default"))
    if factor is None:
        return 1.0, "uncalibrated"
    return float(factor), f"× {float(factor):.2f} ({section.get('record', 'calibration')})"


def _paper_runs(params: Any, paper: str, dataset: str) -> int:
    """How many folds (k-fold) or runs (repeats of one split) the paper's ± is over."""
    protocol = params.protocol(paper, dataset)
    return int(protocol["n_folds"]) if protocol["kind"] == "kfold" else params.repeats(paper, dataset)


def _seed_values(folds: Mapping[int, Mapping[str, Any]], metric: str) -> list[float]:
    repeats = next(iter(folds.values())).get("test_repeats") or [] if len(folds) == 1 else []
    values = [run.get(metric) for run in repeats if isinstance(run, Mapping)]
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _test_rows(folds: Mapping[int, Mapping[str, Any]]) -> tuple[int | None, dict[str, int] | None]:
    """The test size and class counts of a single-split result (None where not recorded)."""
    if len(folds) != 1:
        return None, None
    split = next(iter(folds.values())).get("split") or {}
    counts = split.get("test_class_counts")
    return split.get("n_test"), (dict(sorted(counts.items())) if isinstance(counts, Mapping) else None)


def _holdout_se(
    metric: str, value: float, n_test: int | None, counts: Mapping[str, int] | None, seed_variance: float, runs: int
) -> tuple[float, str] | None:
    """Sampling SE at the test size plus the seeds' spread of their mean; None without the first."""
    sampled = sampling_se(metric, value, n_test, counts)
    if sampled is None:
        return None
    se, formula = sampled
    if seed_variance > 0 and runs > 1:
        return math.sqrt(se * se + seed_variance / runs), f"{formula} + the spread of {runs} seeds"
    return se, formula


def ours_side(params: Any, paper: str, dataset: str, cell: Cell, spread_kind: str, folds: Mapping) -> Side:
    """Our number and the spread two independent runs of our protocol would show."""
    assert cell.ours_mean is not None
    metric = cell.metric
    if cell.count is not None and cell.count > 1 and cell.ours_spread is not None:
        sd = cell.ours_spread if spread_kind == "sd" else cell.ours_spread * math.sqrt(cell.count)
        factor, how = _calibration(params, metric)
        return Side(
            cell.ours_mean, factor * sd / math.sqrt(cell.count), cell.count - 1, f"{cell.count} folds: SD/√n {how}"
        )
    n_test, counts = _test_rows(folds)
    seeds = _seed_values(folds, metric)
    seed_variance = float(pd.Series(seeds).var(ddof=1)) if len(seeds) > 1 else 0.0
    found = _holdout_se(metric, cell.ours_mean, n_test, counts, seed_variance, len(seeds))
    if found is None:
        what = (
            "the test size and class counts are not recorded"
            if n_test is None or metric.startswith("au")
            else (f"{metric} has no closed-form sampling SE and no saved test predictions")
        )
        return Side(cell.ours_mean, None, None, f"no spread ({what}; a spread over seeds of one split is not used)")
    return Side(cell.ours_mean, found[0], None, found[1])


def paper_side(
    params: Any,
    paper: str,
    dataset: str,
    table_cfg: Mapping[str, Any],
    value: PaperValue,
    ours: Side | None,
    folds: Mapping,
) -> Side:
    """The paper's number and its spread: its own ±, its stated bound, or what its protocol implies."""
    protocol = params.protocol(paper, dataset)
    kfold = protocol["kind"] == "kfold"
    runs = _paper_runs(params, paper, dataset)
    if value.spread is not None:
        if value.spread_kind not in ("se", "sd"):
            return Side(value.value, None, None, f"the paper's ± is of unknown kind ({value.spread_kind!r}): not used")
        se = value.spread if value.spread_kind == "se" else value.spread / math.sqrt(runs)
        basis = "the paper's ± (SE)" if value.spread_kind == "se" else f"the paper's ± (SD)/√{runs}"
        if kfold:
            factor, how = _calibration(params, table_cfg["metric"])
            return Side(value.value, factor * se, runs - 1, f"{basis} {how}")
        return Side(value.value, se, runs - 1, basis)
    if kfold:
        if ours is not None and ours.se is not None:
            return Side(value.value, ours.se, ours.df, "none given: ours taken for it (same protocol and data)")
        return Side(value.value, None, None, "none given, and ours has none to stand in for it")
    stated = table_cfg.get("stated_spread") or {}
    seed_variance = float(stated.get("variance_max", 0.0))
    n_test, counts = _test_rows(folds)
    found = _holdout_se(table_cfg["metric"], value.value, n_test, counts, seed_variance, int(stated.get("runs", runs)))
    if found is None:
        return Side(value.value, None, None, "none given, and none derivable at its test size")
    basis = f"{found[1]} (our split's size under the paper's protocol)"
    if stated:
        basis += f"; seed variance bound {seed_variance:g} from {stated['source']}"
    return Side(value.value, found[0], None, basis)


# --------------------------------------------------------------------------- per-paper context
@dataclass(frozen=True)
class _Runs:
    """Which of a dataset × model's expected folds have a result, and which failed (their logs)."""

    expected: tuple[int, ...]
    present: tuple[int, ...]
    failed: tuple[tuple[int, tuple[Path, ...]], ...]


class _PaperContext:
    """What one paper's cells are judged from: the profile, the results read, logs, fetch records."""

    def __init__(self, params: Any, paper: str, logs_dir: Path, rules: VerdictRules, frozen: bool = False):
        self.params = params
        self.rules = rules
        self.paper = paper
        self.cfg = params.paper(paper)
        self.logs_dir = Path(logs_dir)
        self.selected = params.selected_datasets(paper)
        self.models = params.selected_models(paper)
        self.results = collect_current_results(params, paper, frozen=frozen)
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

    def unverified_note(self, dataset: str) -> str | None:
        """A note when the dataset's bytes were fetched without a pinned or independent checksum."""
        status = self.fetch_status(dataset)
        if status is None or getattr(status, "verified", True):
            return None
        return "data fetched without a pinned or independent checksum (unverified)"

    def stale_note(self, dataset: str, model: str | None) -> str | None:
        """A note when a frozen record's results were run under other parameters than params.yaml's."""
        folds = self.by_job.get((dataset, model), {}) if model else {}
        if any("stale_digest" in r for r in folds.values()):
            return "run under earlier parameters than params.yaml's (its protocol or search space has changed since)"
        return None

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


# --------------------------------------------------------------------------- building cells
@dataclass
class _Draft:
    """A cell before its table's multiple-testing step: its fields and, where Δ has a spread, its test."""

    fields: dict[str, Any]
    test: Test | None = None
    ours: Side | None = None
    paper: Side | None = None
    comparable: bool = True


def _labels(paper_cfg: Mapping[str, Any], table_cfg: Mapping[str, Any]) -> dict[str, str]:
    """model -> the label this table prints for it (ablation tables have their own labels)."""
    return dict(table_cfg.get("models") or paper_cfg.get("models", {}))


def _model_of(method: str, labels: Mapping[str, str]) -> str | None:
    from tabrepro.models.registry import MODEL_NAMES

    by_label = {label: model for model, label in labels.items()}
    if method in by_label:
        return by_label[method]
    return method if method in MODEL_NAMES else None


def _paper_text(cell: Cell) -> str | None:
    if cell.paper is None:
        return None
    spread = cell.paper.spread_text
    kind = f" ({cell.paper.spread_kind.upper()})" if spread and cell.paper.spread_kind else ""
    return cell.paper.value_text if spread is None else f"{cell.paper.value_text} ± {spread}{kind}"


def _base(ctx: _PaperContext, key: str, column: str, method: str, model: str | None, cell: Cell) -> dict[str, Any]:
    """The fields every kind of cell shares."""
    value = cell.paper
    margin = ctx.rules.margin(cell.metric)
    return dict(
        paper=ctx.paper,
        table=key,
        reference_table=reference_table_id(key, ctx.cfg["tables"][key]),
        metric=cell.metric,
        column=column,
        method=method,
        model=model,
        ours_mean=cell.ours_mean,
        ours_se=None,
        ours_se_basis=None,
        n=cell.count,
        n_expected=None,
        paper_value=value.value if value else None,
        paper_text=_paper_text(cell),
        paper_se=None,
        paper_se_basis=None,
        paper_origin=value.origin if value else None,
        quoted_from=value.quoted_from if value else None,
        paper_selected_on=value.selected_on if value else None,
        margin=margin.width(value.value) if margin and value else None,
        margin_text=margin.describe(value.value) if margin and value else None,
        delta=None,
        ci_low=None,
        ci_high=None,
        p_difference=None,
        p_adjusted=None,
        verdict_class=NOT_RUN,
        verdict=NOT_RUN,
        better_or_worse=None,
        count_group=(QUOTED if value.quoted else OWN) if value else UNCOUNTED,
        budget=None,
        reason=None,
        notes="",
    )


def _compared(draft: _Draft, ours: Side, paper: Side, metric: str, rules: VerdictRules) -> _Draft:
    """Fill in both sides and, where a margin exists and Δ has a spread, the test."""
    draft.ours, draft.paper = ours, paper
    draft.fields.update(
        ours_se=ours.se, ours_se_basis=ours.basis, paper_se=paper.se, paper_se_basis=paper.basis,
        delta=ours.value - paper.value,
    )  # fmt: skip
    margin = rules.margin(metric)
    if margin is None:
        draft.fields["reason"] = f"no margin declared for {metric!r} (params.yaml verdicts.margins)"
        return draft
    draft.test = compare(ours, paper, margin.width(paper.value), rules.alpha)
    if draft.test is not None:
        draft.fields.update(ci_low=draft.test.ci95[0], ci_high=draft.test.ci95[1], p_difference=draft.test.p_difference)
    return draft


def _dataset_cells(ctx: _PaperContext, key: str, view: TableView) -> list[_Draft]:
    table_cfg = ctx.cfg["tables"][key]
    labels = _labels(ctx.cfg, table_cfg)
    drafts = []
    for dataset in view.columns:
        expected_labels = [label for model, label in labels.items() if ctx.expects(dataset, model)]
        for method in dict.fromkeys([*view.methods, *expected_labels]):
            cell = view.cells.get((method, dataset)) or Cell(metric=table_cfg["metric"])
            model = _model_of(method, labels)
            expected = model is not None and ctx.expects(dataset, model)
            if cell.paper is None and cell.ours_mean is None and not expected:
                continue
            drafts.append(_dataset_cell(ctx, key, table_cfg, dataset, method, model, cell))
    return drafts


def _dataset_cell(
    ctx: _PaperContext, key: str, table_cfg: Mapping[str, Any], dataset: str, method: str, model: str | None, cell: Cell
) -> _Draft:
    draft = _Draft(_base(ctx, key, dataset, method, model, cell))
    notes: list[str] = []
    if cell.paper is not None and cell.paper.quoted:
        notes.append(f"the paper quotes this number from {cell.paper.quoted_from}: another paper's protocol")
    substitute = ctx.params.substitute_note(ctx.paper, dataset)
    if substitute:
        notes.append(substitute)
        draft.comparable = False
    notes += [n for n in (ctx.unverified_note(dataset), ctx.stale_note(dataset, model)) if n]
    reason = ctx.not_run_reason(dataset, model)
    expected = model is not None and ctx.expects(dataset, model)
    if expected:
        draft.fields["budget"] = ctx.params.budget_note(ctx.paper, dataset, model)
        draft.fields["n_expected"] = len(ctx.params.folds(ctx.paper, dataset))
    if cell.ours_mean is None:
        draft.fields["reason"] = reason or f"no fold result has the metric {cell.metric!r}"
        draft.fields["notes"] = "; ".join(notes)
        return draft
    folds = ctx.by_job.get((dataset, model), {}) if model is not None else {}
    if expected and reason is None:
        runs = ctx.runs(dataset, model)
        partial = _partial_note(runs)
        notes += [partial] if partial else []
        if cell.count is not None and cell.count < len(runs.present):
            notes.append(f"the metric is missing in {len(runs.present) - cell.count} of the fold results")
    draft.fields["notes"] = "; ".join(notes)
    ours = ours_side(ctx.params, ctx.paper, dataset, cell, table_cfg.get("spread", "se"), folds)
    if cell.paper is None:
        draft.fields.update(ours_se=ours.se, ours_se_basis=ours.basis)
        return draft
    paper = paper_side(ctx.params, ctx.paper, dataset, table_cfg, cell.paper, ours, folds)
    return _compared(draft, ours, paper, cell.metric, ctx.rules)


def _task_of(ctx: _PaperContext, dataset: str) -> str:
    return get_source(ctx.params.source_of(ctx.paper, dataset)).task


def _rank_cells(ctx: _PaperContext, key: str, view: TableView) -> list[_Draft]:
    """Rank cells are judged only when every paper dataset of the task type has every method."""
    table_cfg = ctx.cfg["tables"][key]
    labels = _labels(ctx.cfg, table_cfg)
    group = table_cfg.get("group")
    drafts = []
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
            cell = replace(cell, metric=_paper_metric(table_cfg, task))
            draft = _Draft(_base(ctx, key, task, method, _model_of(method, labels), cell))
            draft.fields["n_expected"] = len(datasets)
            if gap is not None or cell.ours_mean is None or cell.paper is None:
                draft.fields["reason"] = gap or ("no results" if cell.ours_mean is None else None)
                drafts.append(draft)
                continue
            ours = Side(cell.ours_mean, cell.ours_spread, (cell.count or 1) - 1, f"{cell.count} datasets")
            paper_se = cell.paper.spread if cell.paper.spread_kind == "se" else None
            paper = Side(cell.paper.value, paper_se, None, "the paper's ± (SE)" if paper_se else "none given")
            drafts.append(_compared(draft, ours, paper, cell.metric, ctx.rules))
    return drafts


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


# --------------------------------------------------------------------------- verdicts per table
def _finalise(drafts: list[_Draft], rules: VerdictRules) -> list[ScoreCell]:
    """Benjamini–Hochberg over the table's tested cells, then each cell's verdict."""
    judged = judge_table([d.test for d in drafts], rules.fdr)
    return [ScoreCell(**_verdict(d, j, rules)) for d, j in zip(drafts, judged, strict=True)]


def _verdict(draft: _Draft, judged: tuple[str, float] | None, rules: VerdictRules) -> dict[str, Any]:
    out = dict(draft.fields)
    notes = [out["notes"]] if out["notes"] else []
    if out["ours_mean"] is None:
        return out
    if out["paper_value"] is None:
        return out | dict(verdict_class=OURS_ONLY, verdict="ours only (the paper reports no value)")
    if draft.ours is None:  # never compared: a rank cell whose datasets are not all there (the reason says)
        return out
    test = draft.test
    if test is None:
        missing = "" if out["reason"] else " (" + _no_spread(draft) + ")"
        text = f"{INCONCLUSIVE}{missing}"
        return out | dict(verdict_class=INCONCLUSIVE if draft.comparable else NOT_COMPARABLE, verdict=text)
    verdict_class, out["p_adjusted"] = judged
    higher = test.delta > 0
    direction = higher_is_better(out["metric"])
    if verdict_class == DIFFERS:
        out["better_or_worse"] = None if direction is None else ("better" if higher == direction else "worse")
        text = f"differs (ours {'higher' if higher else 'lower'})"
    elif verdict_class == INCONCLUSIVE:
        text = INCONCLUSIVE
        notes.append(runs_to_decide(test, draft.ours, draft.paper, rules.alpha))
    else:
        text = REPRODUCED
    if not draft.comparable:
        verdict_class, text = NOT_COMPARABLE, f"{NOT_COMPARABLE} (other data; would be: {text})"
    return out | dict(verdict_class=verdict_class, verdict=text, notes="; ".join(notes))


def _no_spread(draft: _Draft) -> str:
    parts = [f"{side}: {s.basis}" for side, s in (("ours", draft.ours), ("paper", draft.paper)) if s and s.se is None]
    return "Δ has no spread: " + "; ".join(parts) if parts else "Δ has no spread"


# --------------------------------------------------------------------------- the whole card
def build_scorecard(
    params: Any, paper: str | None = None, logs_dir: Path | None = None, *, frozen: bool = False
) -> Scorecard:
    """Judge every cell of the profile's papers (or of `paper` only); `frozen` for a committed run
    record, judged as recorded (see collect_current_results).

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
    rules = rules_of(params)
    card = Scorecard(profile=params.profile_name, papers=papers, titles={}, rules=rules)
    for name in papers:
        ctx = _PaperContext(params, name, Path(logs_dir), rules, frozen)
        for key, table_cfg in ctx.cfg.get("tables", {}).items():
            view = build_view(key, table_cfg, name, ctx.cfg, ctx.frame, set(ctx.selected))
            card.titles[(name, key)] = f"{view.title} ({view.source.removesuffix('.')})"
            is_rank = table_cfg.get("kind", "metric") == "rank"
            drafts = _rank_cells(ctx, key, view) if is_rank else _dataset_cells(ctx, key, view)
            card.cells += _finalise(drafts, rules)
        for dataset in ctx.selected:
            status = ctx.fetch_status(dataset)
            if status is not None and not status.ok:
                card.unobtainable.setdefault(name, {})[dataset] = status.error or "no error recorded"
    return card


def counts(cells: Iterable[ScoreCell]) -> dict[str, Any]:
    """Cells per verdict, the paper's own runs apart from the numbers it quotes; `ours only`
    cells (rows the paper lacks) are listed but enter neither tally."""
    cells = list(cells)

    def tally(group: Iterable[ScoreCell]) -> dict[str, int]:
        found = Counter(c.verdict_class for c in group)
        out = {COUNT_KEYS[v]: found.get(v, 0) for v in VERDICTS if v != OURS_ONLY}
        out["cells"] = sum(out.values())
        out["better"] = sum(1 for c in group if c.verdict_class == DIFFERS and c.better_or_worse == "better")
        out["worse"] = sum(1 for c in group if c.verdict_class == DIFFERS and c.better_or_worse == "worse")
        return out

    result: dict[str, Any] = {group: tally([c for c in cells if c.count_group == group]) for group in COUNT_GROUPS}
    result["ours_only"] = sum(1 for c in cells if c.verdict_class == OURS_ONLY)
    return result


def summary(card: Scorecard) -> dict[str, Any]:
    """The DVC metrics file: counts nested by paper and table, and the unobtainable datasets."""
    papers: dict[str, Any] = {}
    for paper in card.papers:
        mine = [c for c in card.cells if c.paper == paper]
        tables = dict.fromkeys(c.table for c in mine)
        papers[paper] = {"all": counts(mine), **{t: counts(c for c in mine if c.table == t) for t in tables}}
    return {
        "profile": card.profile,
        "margins": {
            m.metric: m.describe(1.0) if not m.relative else f"±{m.value:g} × |paper|"
            for m in card.rules.margins.values()
        },
        "all": counts(card.cells),
        "papers": papers,
        "unobtainable": card.unobtainable,
    }


def cells_frame(card: Scorecard) -> pd.DataFrame:
    """One row per cell with every field (the CSV)."""
    return pd.DataFrame([asdict(c) for c in card.cells], columns=[f.name for f in fields(ScoreCell)])
