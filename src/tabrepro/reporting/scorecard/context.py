"""What one paper's cells are judged from: the profile, the results read, the jobs' logs and the
fetch records; and why a cell has no result (the reason found on disk)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tabrepro.config import Job
from tabrepro.data.availability import FetchStatus, read_fetch_status, status_path
from tabrepro.evaluation.prediction_spread import test_metric_se
from tabrepro.models.registry import get_model_class
from tabrepro.reporting.scorecard.card import ScorecardError
from tabrepro.reporting.tables import collect_current_results, fold_frame
from tabrepro.reporting.verdicts import VerdictRules
from tabrepro.resource_policy import config_batches, policy

LOG_TAIL_BYTES = 4096
LOG_LINE_CHARS = 200


@dataclass(frozen=True)
class Runs:
    """Which of a dataset × model's expected folds have a result, and which failed (their logs)."""

    expected: tuple[int, ...]
    present: tuple[int, ...]
    failed: tuple[tuple[int, tuple[Path, ...]], ...]


class PaperContext:
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
        self._checks: dict[str, str] = {}
        self._bias: dict[str, dict[str, Any] | None] = {}

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

    def selection_bias_note(self, dataset: str, model: str | None, metric: str) -> str:
        """What picking a configuration on test rows is measured to gain (params.yaml
        `verdicts.selection_bias`): for this dataset × model where the record has it, else the
        range over the record's cases, at its largest budget."""
        head = "the paper selected this configuration on test rows"
        section = self.params.raw["verdicts"].get("selection_bias")
        if not section:
            return head
        path = Path(self.params.source).parent / section["record"]
        if str(path) not in self._bias:
            try:
                self._bias[str(path)] = json.loads(path.read_text(encoding="utf-8")).get("cases") or {}
            except FileNotFoundError:  # a params.yaml copied without the records beside it
                self._bias[str(path)] = None
            except (OSError, ValueError) as error:
                raise ScorecardError(f"{path}: cannot read the selection-bias record: {error}") from None
        cases = self._bias[str(path)]
        if cases is None:
            return f"{head} ({section['record']}, which measures what that gains, is not here)"
        return head + selection_gain_text(cases, dataset, model, metric, section["record"])

    def prediction_se(self, dataset: str, model: str | None, folds: dict[int, Any]) -> Any:
        """A function metric -> bootstrap SE over the one split's saved test predictions, or None
        when the job kept none (k-fold cells take their spread from the folds)."""
        if model is None or len(folds) != 1:
            return None
        entry = getattr(self.params.layout, "job_test_predictions", None)
        if entry is None:
            return None
        path = entry.path(Job(self.paper, dataset, model, next(iter(folds))))
        if not path.is_file():
            return None

        seed = int(self.params.raw["seed"])
        return lambda metric: test_metric_se(path, metric, seed=seed)

    def implementation_note(self, model: str | None) -> str | None:
        """What the model's check against the authors' implementation found (params.yaml
        `implementation_checks`), so that a reader of a cell sees whether the model is theirs."""
        path = (self.cfg.get("implementation_checks") or {}).get(model) if model else None
        if path is None:
            return None
        if path not in self._checks:
            self._checks[path] = _implementation_summary(Path(path))
        return self._checks[path]

    def stale_note(self, dataset: str, model: str | None) -> str | None:
        """A note when a frozen record's results were run under other parameters than params.yaml's."""
        folds = self.by_job.get((dataset, model), {}) if model else {}
        if any("stale_digest" in r for r in folds.values()):
            return "run under earlier parameters than params.yaml's (its protocol or search space has changed since)"
        return None

    def expects(self, dataset: str, model: str) -> bool:
        """Whether the profile runs this model on this dataset."""
        return dataset in self.selected and model in self.models and self.params.runs_on(self.paper, model, dataset)

    def runs(self, dataset: str, model: str) -> Runs:
        expected = tuple(self.params.folds(self.paper, dataset))
        done = self.by_job.get((dataset, model), {})
        present = tuple(k for k in expected if k in done)
        failed = tuple((k, logs) for k in expected if k not in done if (logs := self._job_logs(dataset, model, k)))
        return Runs(expected, present, failed)

    def _job_logs(self, dataset: str, model: str, fold: int) -> tuple[Path, ...]:
        """The logs the workflow's rules write for this job (workflow/rules/train.smk)."""

        layout = replace(self.params.layout, logs=self.logs_dir)
        job = Job(self.paper, dataset, model, fold)
        if not get_model_class(model).per_config_jobs:
            # one job per fold, or one train_folds job for all of them (params.yaml folds_in_one_job)
            candidates = [layout.train_log.path(job), layout.train_folds_log.path(job)]
        else:
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


# record metric -> the scale factor to a table metric of the same quantity
_SCALES = {("auroc", "auc_pct"): 100.0, ("auroc", "auroc"): 1.0, ("accuracy", "accuracy_pct"): 100.0}


def selection_gain_text(cases: dict[str, Any], dataset: str, model: str | None, metric: str, source: str) -> str:
    """`; <source> measured ...` for one cell, from a selection-bias record's cases (each: the test
    score picked on test minus the one picked on validation, per search budget)."""

    def largest(case: dict[str, Any]) -> tuple[int, float] | None:
        budgets = case.get("by_budget") or {}
        if not budgets:
            return None
        top = max(budgets, key=int)
        return int(top), float(budgets[top]["gain"])

    usable = {
        name: (found, _SCALES[(case.get("metric"), metric)])
        for name, case in cases.items()
        if (case.get("metric"), metric) in _SCALES and (found := largest(case)) is not None
    }
    if not usable:
        return f" ({source} has no case measured on {metric})"
    own = usable.get(f"{dataset}:{model}")
    if own is not None:
        (budget, gain), scale = own
        return (
            f"; {source} measured that this gains {scale * gain:.3g} on {dataset} × {model} at {budget} configurations"
        )
    gains = sorted(scale * gain for (_, gain), scale in usable.values())
    return (
        f"; {source} measured gains of {gains[0]:.3g} to {gains[-1]:.3g} (median {gains[len(gains) // 2]:.3g}) "
        f"over {len(gains)} other dataset × model cases at their largest budget"
    )


def _failure_text(runs: Runs) -> str:
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


def partial_note(runs: Runs) -> str | None:
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


def _implementation_summary(path: Path) -> str:
    """One line of a fidelity record: each metric's verdict, and on how many seeds it rests."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:  # a params.yaml copied without the records beside it
        return f"checked against the authors' implementation in {path}, which is not here"
    except (OSError, ValueError) as error:
        raise ScorecardError(f"{path}: cannot read the implementation check: {error}") from None
    head = f"checked against the authors' implementation ({path.name}, case {record.get('case')})"
    if record.get("not_run"):
        return f"{head}: {record['not_run']}"
    metrics = (record.get("summary") or {}).get("metrics") or {}
    if not metrics:
        return f"{head}: no seed finished on both sides yet"
    verdicts = ", ".join(f"{name} {str(m.get('verdict', '?')).split(':')[0]}" for name, m in sorted(metrics.items()))
    seeds = min(int(m["ours"]["n"]) for m in metrics.values())
    planned = (record.get("settings") or {}).get("seeds")
    over = f"{seeds} of {planned} seeds" if planned else f"{seeds} seeds"
    return f"{head}: {verdicts} ({over}{'' if record['summary'].get('complete') else ', incomplete'})"
