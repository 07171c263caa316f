"""The sampling spread of a job's test metric, measured from its test rows (test_predictions.npz).

A formula's SE needs a model of the metric (binomial for accuracy, Hanley–McNeil for AUROC) and
none exists for NLL, RMSE or R²; a bootstrap over the test rows needs none. Resamples are
stratified: each draws, within each class, as many rows as the class has (regression: all rows
at once), so every resample keeps the test set's class balance and every class a metric needs
(AUROC) is present. A resample is a vector of counts, one per row, so each metric is a weighted
sum over rows and a block of resamples is a few matrix products: 2,000 resamples of 10,000 rows
take well under a second.

Each metric is computed as tabrepro.evaluation.metrics computes it (normalised probabilities,
arg-max predictions, NLL clipped at NLL_CLIP, macro one-vs-rest AUROC, R² in %); the weighted
forms are checked against `compute_metrics` on the rows as they are before any resample is drawn.
With several runs of one split (repeats), each resample scores every run on the same rows and
takes their mean, as the job's metric is that mean: the spread is the test rows' part only, the
seeds' spread is another term.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from tabrepro.evaluation.job_predictions import JobPredictions, read_predictions
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER, NLL_CLIP, OPTIONAL_METRICS

__all__ = ["RESAMPLES", "test_metric_se"]

RESAMPLES = 2000
_BLOCK_CELLS = 2_000_000  # resamples x rows per block: bounds memory at ~16 MB per array
_PERCENT = {"accuracy_pct", "balanced_accuracy_pct", "auc_pct", "r2_pct"}


def test_metric_se(path: Path, metric: str, *, seed: int = 0, resamples: int = RESAMPLES) -> tuple[float, str] | None:
    """The bootstrap SE of `metric` over the test rows of the job whose predictions are at `path`,
    in the metric's own units (percent metrics in %), and a short text saying what it rests on.

    None when the file does not exist (a job run before predictions were kept), when the metric
    is not one of the job's task, or when it is undefined on these rows (AUROC with a class absent
    from them). A file that cannot be read or holds non-finite values is a PredictionsFileError
    naming it. The same file, metric, seed and resamples give the same SE.
    """
    if metric not in HIGHER_IS_BETTER:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(sorted(HIGHER_IS_BETTER))}")
    if resamples < 2:
        raise ValueError(f"resamples must be at least 2, got {resamples}")
    path = Path(path)
    if not path.is_file():
        return None
    predictions = read_predictions(path)
    optional = (metric,) if metric in OPTIONAL_METRICS and predictions.task != "regression" else ()
    run_metrics = predictions.run_metrics(optional=optional)
    if any(metric not in run for run in run_metrics):
        return None
    reference = [run[metric] for run in run_metrics]
    predictions, strata = _by_stratum(predictions)
    runs = [_RowTerms(predictions, r) for r in range(predictions.n_runs)]
    ones = np.ones((predictions.n_rows, 1))
    for terms, expected in zip(runs, reference, strict=True):
        plain = float(terms.metric(metric, ones)[0])
        if not np.isclose(plain, expected, rtol=1e-9, atol=1e-9):
            raise RuntimeError(f"{path}: weighted {metric} {plain!r} differs from compute_metrics' {expected!r}")

    rng = np.random.default_rng(seed)
    block = max(1, min(resamples, _BLOCK_CELLS // predictions.n_rows))
    values = []
    for start in range(0, resamples, block):
        counts = _resample_counts(rng, strata, predictions.n_rows, min(block, resamples - start))
        values.append(np.mean([terms.metric(metric, counts) for terms in runs], axis=0))
    se = float(np.std(np.concatenate(values), ddof=1))
    kind = "bootstrap" if predictions.task == "regression" else "stratified bootstrap"
    basis = f"{kind}, {resamples} resamples of {predictions.n_rows} test rows"
    if predictions.n_runs > 1:
        basis += f", mean of {predictions.n_runs} runs each"
    return se, basis


# A library function, not a test, wherever a test module imports it (mypy knows no function attributes).
test_metric_se.__test__ = False  # type: ignore[attr-defined]


def _by_stratum(predictions: JobPredictions) -> tuple[JobPredictions, list[slice]]:
    """The rows grouped by the strata resamples draw within (one per class; regression: all rows)
    and those groups; every metric is a sum over rows, so their order is the caller's to choose."""
    if predictions.task == "regression":
        return predictions, [slice(0, predictions.n_rows)]
    order = np.argsort(predictions.y_true, kind="stable")
    grouped = replace(
        predictions,
        row_id=predictions.row_id[order],
        y_true=predictions.y_true[order],
        outputs=predictions.outputs[:, order],
    )
    edges = np.flatnonzero(np.r_[True, grouped.y_true[1:] != grouped.y_true[:-1], True])
    return grouped, [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _resample_counts(rng: np.random.Generator, strata: list[slice], n_rows: int, n: int) -> np.ndarray:
    """`n` resamples as counts (n_rows, n), one column each: within each stratum, as many draws
    as it has rows. Rows are the first axis, so that reordering them moves whole rows."""
    counts = np.empty((n_rows, n))
    for rows in strata:
        size = rows.stop - rows.start
        draws = rng.integers(0, size, size=(n, size)) * n + np.arange(n)[:, None]
        counts[rows] = np.bincount(draws.ravel(), minlength=size * n).reshape(size, n)
    return counts


class _RowTerms:
    """One run's per-row quantities, from which each metric is a weighted sum over rows."""

    def __init__(self, predictions: JobPredictions, run: int) -> None:
        self.task = predictions.task
        self.y = predictions.y_true
        outputs = predictions.outputs[run].astype(np.float64)
        if self.task == "regression":
            self.error2 = (outputs - self.y) ** 2
            self.centred = self.y - self.y.mean()
            return
        self.proba = outputs / outputs.sum(axis=1, keepdims=True)  # as compute_metrics does
        self.correct = (np.argmax(self.proba, axis=1) == self.y).astype(np.float64)
        truth = self.proba[np.arange(self.y.size), self.y]
        self.loss = -np.log(np.clip(truth, NLL_CLIP, 1.0))

    def metric(self, name: str, counts: np.ndarray) -> np.ndarray:
        """The metric on each resample (a column of `counts`, how often each row was drawn)."""
        total = counts.sum(axis=0)
        if name == "accuracy_pct":
            return 100.0 * (self.correct @ counts) / total
        if name == "balanced_accuracy_pct":
            recalls = [
                (self.correct[rows] @ counts[rows]) / counts[rows].sum(axis=0)
                for rows in (np.flatnonzero(self.y == c) for c in np.unique(self.y))
            ]
            return 100.0 * np.mean(recalls, axis=0)
        if name == "nll":
            return (self.loss @ counts) / total
        if name in ("auroc", "auc_pct"):
            if self.task == "binary":
                auroc = _weighted_auroc(counts, self.proba[:, 1], self.y == 1)
            else:  # macro one-vs-rest
                columns = range(self.proba.shape[1])
                auroc = np.mean([_weighted_auroc(counts, self.proba[:, k], self.y == k) for k in columns], axis=0)
            return 100.0 * auroc if name == "auc_pct" else auroc
        mse = (self.error2 @ counts) / total
        if name == "mse":
            return mse
        if name == "rmse":
            return np.sqrt(mse)
        if name == "r2_pct":
            total_ss = self.centred**2 @ counts - (self.centred @ counts) ** 2 / total
            residual_ss = mse * total
            # scikit-learn's r2_score on targets that do not vary: 1 for a perfect fit, else 0
            safe = np.where(total_ss > 0, total_ss, 1.0)
            return 100.0 * np.where(total_ss > 0, 1.0 - residual_ss / safe, np.where(residual_ss == 0, 1.0, 0.0))
        raise ValueError(f"{name!r} is not a {self.task} metric")


def _weighted_auroc(counts: np.ndarray, scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """AUROC with each row counted as often as drawn (a column of `counts` per resample): the
    chance that a positive outscores a negative, ties counting one half (the area under the ROC
    curve scikit-learn computes). Per positive, the drawn negatives below its score (and half
    those level with it) are read off a running sum over the negatives in score order."""
    negatives = np.flatnonzero(~positive)
    negatives = negatives[np.argsort(scores[negatives], kind="stable")]
    positives = np.flatnonzero(positive)
    ranked = scores[negatives]
    running = np.zeros((negatives.size + 1, counts.shape[1]))
    np.cumsum(counts[negatives], axis=0, out=running[1:])
    below = running[np.searchsorted(ranked, scores[positives], side="left")]
    below += running[np.searchsorted(ranked, scores[positives], side="right")]
    drawn = counts[positives]
    return 0.5 * (drawn * below).sum(axis=0) / (drawn.sum(axis=0) * running[-1])
