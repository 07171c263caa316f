"""A job's test rows as scored (`test_predictions.npz`, beside its metrics.json): enough to
recompute every test metric and to measure its sampling spread from the rows themselves.

One compressed npz, read with allow_pickle=False:

* `version`: 0-d int, FORMAT_VERSION;
* `task`: 0-d str, binary, multiclass or regression;
* `fold`: 0-d int, the job's fold;
* `row_id`: (n,) int64, the table rows of the fold's test split, in the order they were scored;
* `y_true`: (n,) int64 class indices, or float64 targets in the original units;
* `proba`: (R, n, k) float32 class probabilities (classification), or
  `prediction`: (R, n) float32 predictions in the target's original units (regression).

R is the number of runs of the chosen configuration on the split: 1, or the protocol's repeats.
Each run is kept, not the runs' mean: the job's test metric is the mean of the runs' metrics, and
the metric of averaged probabilities is another number (an ensemble's), so only the runs
themselves recompute what metrics.json reports; R is 3 at most in params.yaml, so the file stays
small. float32 keeps the file compact; metrics recomputed from it agree with metrics.json to
float32 rounding (an arg-max within 1e-7 of a tie may flip).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from tabrepro.errors import InputError, one_line
from tabrepro.evaluation.metrics import PROBA_SUM_TOLERANCE, compute_metrics
from tabrepro.io import atomic_write
from tabrepro.tasks import Task

__all__ = [
    "FORMAT_VERSION",
    "JobPredictions",
    "PredictionsFileError",
    "job_predictions",
    "read_predictions",
    "write_predictions",
]

FORMAT_VERSION = 1
TASKS = ("binary", "multiclass", "regression")
# float32 rows of k probabilities miss 1 by up to ~k float32 epsilons; more than this is no
# probability row (metrics.py allows 1e-5 for the same reason).
_SUM_TOLERANCE = max(PROBA_SUM_TOLERANCE, 1e-4)


class PredictionsFileError(InputError, ValueError):
    """A test-predictions file that cannot be read or holds what no job writes; names the file."""


@dataclass(frozen=True)
class JobPredictions:
    """One job's test rows: ids, labels and each run's outputs (see the module's docstring)."""

    task: Task
    fold: int
    row_id: np.ndarray
    y_true: np.ndarray
    outputs: np.ndarray  # (R, n, k) probabilities or (R, n) predictions in original units

    @property
    def n_rows(self) -> int:
        return int(self.row_id.shape[0])

    @property
    def n_runs(self) -> int:
        return int(self.outputs.shape[0])

    def run_metrics(self, optional: tuple[str, ...] = ()) -> list[dict[str, float]]:
        """Every metric of each run, computed as the job computed them (tabrepro.evaluation.metrics),
        plus the `optional` classification metrics named."""
        if self.task == "regression":
            return [compute_metrics(self.task, self.y_true, y_pred=run) for run in self.outputs]
        return [compute_metrics(self.task, self.y_true, proba=run, optional=optional) for run in self.outputs]

    def metrics(self) -> dict[str, float]:
        """The job's test metrics: the mean over its runs, as metrics.json's `test`."""
        runs = self.run_metrics()
        return {key: float(np.mean([run[key] for run in runs])) for key in runs[0]}

    def to_bytes(self) -> bytes:
        arrays = {
            "version": np.asarray(FORMAT_VERSION, dtype=np.int64),
            "task": np.asarray(self.task),
            "fold": np.asarray(self.fold, dtype=np.int64),
            "row_id": np.asarray(self.row_id, dtype=np.int64),
            "y_true": np.asarray(self.y_true, dtype=np.float64 if self.task == "regression" else np.int64),
            ("prediction" if self.task == "regression" else "proba"): np.asarray(self.outputs, dtype=np.float32),
        }
        buffer = io.BytesIO()
        np.savez_compressed(buffer, allow_pickle=False, **arrays)  # no object arrays, as read
        return buffer.getvalue()


def job_predictions(
    task: Task, fold: int, row_id: np.ndarray, y_true: np.ndarray, runs: list[np.ndarray]
) -> JobPredictions:
    """A job's predictions from its runs' outputs (probabilities, or predictions already in the
    target's original units) and the labels its metrics were computed with; checked as read."""
    outputs = np.stack([np.asarray(run, dtype=np.float32) for run in runs])
    dtype = np.float64 if task == "regression" else np.int64
    predictions = JobPredictions(task, int(fold), np.asarray(row_id, np.int64), np.asarray(y_true, dtype), outputs)
    problem = _problem(predictions)
    if problem is not None:
        raise ValueError(f"test predictions of fold {fold}: {problem}")
    return predictions


def write_predictions(path: Path, predictions: JobPredictions) -> None:
    """Atomic write: a killed job leaves the previous file or none, never half of one."""
    atomic_write(Path(path), predictions.to_bytes())


def read_predictions(path: Path) -> JobPredictions:
    """The file's predictions, or one PredictionsFileError naming the file and what is wrong."""
    path = Path(path)
    try:
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as error:
        raise PredictionsFileError(f"{path}: not a test-predictions file ({one_line(error, 200)})") from None
    problem = _stored_problem(arrays)
    if problem is None:
        predictions = JobPredictions(
            cast(Task, str(arrays["task"])),  # one of TASKS: _stored_problem checked it
            int(arrays["fold"]),
            arrays["row_id"],
            arrays["y_true"],
            arrays["prediction" if str(arrays["task"]) == "regression" else "proba"],
        )
        problem = _problem(predictions)
    if problem is not None:
        raise PredictionsFileError(f"{path}: {problem}")
    return predictions


def _stored_problem(arrays: dict[str, np.ndarray]) -> str | None:
    """What the file's arrays lack before they can be read as predictions, or None."""
    for name in ("version", "task", "fold", "row_id", "y_true"):
        if name not in arrays:
            return f"no `{name}` array"
    if arrays["version"].shape != () or not np.issubdtype(arrays["version"].dtype, np.integer):
        return "`version` is not one integer"
    if int(arrays["version"]) != FORMAT_VERSION:
        return f"format version {int(arrays['version'])}, this code reads {FORMAT_VERSION}"
    if arrays["task"].shape != () or arrays["task"].dtype.kind != "U" or str(arrays["task"]) not in TASKS:
        return f"`task` is not one of {', '.join(TASKS)}"
    if arrays["fold"].shape != () or not np.issubdtype(arrays["fold"].dtype, np.integer):
        return "`fold` is not one integer"
    outputs = "prediction" if str(arrays["task"]) == "regression" else "proba"
    if outputs not in arrays:
        return f"a {arrays['task']} job's file without `{outputs}`"
    return None


def _problem(p: JobPredictions) -> str | None:
    """What makes `p` something no job writes (shapes, types, non-finite values), or None."""
    n = p.row_id.shape[0] if p.row_id.ndim == 1 else -1
    if n < 1 or not np.issubdtype(p.row_id.dtype, np.integer) or (p.row_id < 0).any():
        return "`row_id` is not a non-empty list of table rows"
    if np.unique(p.row_id).size != n:
        return "`row_id` names a row twice"
    if p.y_true.shape != (n,):
        return f"`y_true` has shape {p.y_true.shape}, expected ({n},)"
    if p.outputs.dtype != np.float32:
        return f"outputs are {p.outputs.dtype}, expected float32"
    if not np.isfinite(p.outputs).all():
        return "outputs hold non-finite values"
    if p.task == "regression":
        if p.outputs.ndim != 2 or p.outputs.shape[1] != n or p.outputs.shape[0] < 1:
            return f"`prediction` has shape {p.outputs.shape}, expected (runs, {n})"
        if not np.issubdtype(p.y_true.dtype, np.floating) or not np.isfinite(p.y_true).all():
            return "`y_true` is not finite numbers"
        return None
    if p.outputs.ndim != 3 or p.outputs.shape[1] != n or p.outputs.shape[0] < 1 or p.outputs.shape[2] < 2:
        return f"`proba` has shape {p.outputs.shape}, expected (runs, {n}, classes)"
    k = p.outputs.shape[2]
    if p.task == "binary" and k != 2:
        return f"a binary job's `proba` has {k} columns"
    if not np.issubdtype(p.y_true.dtype, np.integer) or p.y_true.min() < 0 or p.y_true.max() >= k:
        return f"`y_true` is not class indices in [0, {k})"
    sums = p.outputs.astype(np.float64).sum(axis=2)
    if (p.outputs < 0).any() or np.abs(sums - 1.0).max() > _SUM_TOLERANCE:
        return "`proba` rows are not probabilities (negative, or not summing to 1)"
    return None
