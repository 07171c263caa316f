"""Reading the jobs' per-fold results (metrics.json), refusing any that cannot be used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tabrepro.errors import InputError
from tabrepro.layout import METRICS_FILE
from tabrepro.tasks import TASKS

REQUIRED_KEYS = ("paper", "dataset", "model", "fold", "task", "metrics")


class ResultsError(InputError, ValueError):
    """A per-fold result that cannot be used; the message names the file or fold."""


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
    problem = content_problem(result, paper) or _location_problem(result, path)
    if problem is not None:
        raise ResultsError(f"{path}: {problem}")
    return result


def content_problem(result: Any, paper: str) -> str | None:
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
