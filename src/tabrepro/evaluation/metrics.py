"""Metric names used everywhere (results JSON, params.yaml tables, reference numbers).

Direction matters for selection and ranking: True means higher is better.

`compute_metrics` turns one model's test predictions into the papers' numbers. Regression inputs
must already be in the original target units (the papers report RMSE/MSE there), classification
inputs are class indices and an (n, n_classes) probability matrix.

scikit-learn is imported when a metric is computed: every CLI call and the Snakefile import the
names above, and most of them never score anything.
"""

from __future__ import annotations

import numpy as np

from tabrepro.tasks import Task

__all__ = [
    "HIGHER_IS_BETTER",
    "NLL_CLIP",
    "OPTIONAL_METRICS",
    "PROBA_SUM_TOLERANCE",
    "compute_metrics",
    "is_better",
]

HIGHER_IS_BETTER: dict[str, bool] = {
    "auroc": True,
    "auc_pct": True,
    "accuracy_pct": True,
    "balanced_accuracy_pct": True,
    "r2_pct": True,
    "nll": False,
    "rmse": False,
    "mse": False,
}

# Probabilities are clipped to [NLL_CLIP, 1] before the log, so a confident mistake costs ~34.5
# nats instead of infinity.
NLL_CLIP = 1e-15
# Probability rows may miss 1 by float32 rounding (XGBoost, float32 MLPs), not by more.
PROBA_SUM_TOLERANCE = 1e-5
# Classification metrics computed only when asked for (`compute_metrics(..., optional=...)`), so
# that the result files of the papers that do not report them stay as they are.
# balanced_accuracy_pct: the mean of the per-class recalls, in % (macro-averaged accuracy: what
# BiSHop's utils/metrics.py reports as accuracy, torcheval's multiclass_accuracy average="macro").
OPTIONAL_METRICS = ("balanced_accuracy_pct",)


def is_better(metric: str, candidate: float, incumbent: float) -> bool:
    """Whether `candidate` strictly beats `incumbent` under the metric's direction."""
    if metric not in HIGHER_IS_BETTER:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(sorted(HIGHER_IS_BETTER))}")
    return candidate > incumbent if HIGHER_IS_BETTER[metric] else candidate < incumbent


def compute_metrics(
    task: Task,
    y_true: np.ndarray,
    *,
    proba: np.ndarray | None = None,
    y_pred: np.ndarray | None = None,
    optional: tuple[str, ...] = (),
) -> dict[str, float]:
    """All metrics the papers report for `task`, as plain floats.

    binary: auroc, auc_pct, accuracy_pct, nll (auroc/auc_pct are left out when y_true holds a
    single class, where AUROC is undefined). multiclass: accuracy_pct, nll, and auroc (macro
    one-vs-rest) only when every class occurs in y_true. regression: rmse, mse, r2_pct.
    Classification needs `proba`; `y_pred` defaults to its arg-max. Regression needs `y_pred`.
    `optional` names OPTIONAL_METRICS to add (classification only).
    """
    unknown = sorted(set(optional) - set(OPTIONAL_METRICS))
    if unknown:
        raise ValueError(f"unknown optional metric(s) {unknown}; known: {', '.join(OPTIONAL_METRICS)}")
    if task in ("binary", "multiclass"):
        return _classification_metrics(task, y_true, proba, y_pred, optional)
    if task == "regression":
        if optional:
            raise ValueError(f"optional metrics {list(optional)} are classification metrics")
        return _regression_metrics(y_true, y_pred)
    raise ValueError(f"unknown task {task!r}; expected binary, multiclass or regression")


def _classification_metrics(
    task: str, y_true: np.ndarray, proba: np.ndarray | None, y_pred: np.ndarray | None, optional: tuple[str, ...] = ()
) -> dict[str, float]:
    from sklearn import metrics as skm  # deferred: loads sklearn

    if proba is None:
        raise ValueError(f"{task} metrics need `proba` (an (n, n_classes) probability matrix)")
    labels_true = np.asarray(y_true)
    if labels_true.ndim != 1 or not np.issubdtype(labels_true.dtype, np.integer):
        raise ValueError("classification y_true must be a 1-D array of integer class indices")
    # float64 before clipping: sklearn clips at the dtype's eps, which for float32 is 1e-7.
    probabilities = np.asarray(proba, dtype=np.float64)
    if probabilities.ndim == 1 and task == "binary":
        probabilities = np.column_stack([1.0 - probabilities, probabilities])
    if probabilities.ndim != 2 or probabilities.shape[0] != labels_true.shape[0]:
        raise ValueError(f"proba has shape {probabilities.shape}, expected ({labels_true.shape[0]}, n_classes)")
    if not np.isfinite(probabilities).all():
        raise ValueError("proba contains non-finite values")
    row_sums = probabilities.sum(axis=1, keepdims=True)
    if probabilities.size and (np.abs(row_sums - 1.0).max() > PROBA_SUM_TOLERANCE):
        raise ValueError("proba rows must sum to 1")
    # Remove float32 rounding drift so scikit-learn sees rows that sum to one in float64.
    probabilities = probabilities / row_sums
    n_classes = probabilities.shape[1]
    if task == "binary" and n_classes != 2:
        raise ValueError(f"binary proba must have 2 columns, got {n_classes}")
    if labels_true.size and (labels_true.min() < 0 or labels_true.max() >= n_classes):
        raise ValueError(f"y_true holds class indices outside [0, {n_classes})")

    predicted = np.argmax(probabilities, axis=1) if y_pred is None else np.asarray(y_pred)
    if predicted.shape != labels_true.shape:
        raise ValueError(f"y_pred has shape {predicted.shape}, expected {labels_true.shape}")

    all_labels = np.arange(n_classes)
    results: dict[str, float] = {
        "accuracy_pct": 100.0 * float(skm.accuracy_score(labels_true, predicted)),
        "nll": float(skm.log_loss(labels_true, np.clip(probabilities, NLL_CLIP, 1.0), labels=all_labels)),
    }
    if "balanced_accuracy_pct" in optional:
        # classes absent from y_true have no recall and are left out of the mean, as in scikit-learn
        results["balanced_accuracy_pct"] = 100.0 * float(skm.balanced_accuracy_score(labels_true, predicted))
    present = np.unique(labels_true)
    if task == "binary" and present.size == 2:
        auroc = float(skm.roc_auc_score(labels_true, probabilities[:, 1]))
        results["auroc"] = auroc
        results["auc_pct"] = 100.0 * auroc
    elif task == "multiclass" and present.size == n_classes:
        results["auroc"] = float(
            skm.roc_auc_score(labels_true, probabilities, multi_class="ovr", average="macro", labels=all_labels)
        )
    return results


def _regression_metrics(y_true: np.ndarray, y_pred: np.ndarray | None) -> dict[str, float]:
    from sklearn import metrics as skm  # deferred: loads sklearn

    if y_pred is None:
        raise ValueError("regression metrics need `y_pred` (predictions in original units)")
    truth = np.asarray(y_true, dtype=np.float64)
    predicted = np.asarray(y_pred, dtype=np.float64)
    if truth.ndim != 1 or predicted.shape != truth.shape:
        raise ValueError(f"y_pred has shape {predicted.shape}, expected {truth.shape}")
    if not (np.isfinite(truth).all() and np.isfinite(predicted).all()):
        raise ValueError("regression targets or predictions contain non-finite values")
    mse = float(skm.mean_squared_error(truth, predicted))
    return {
        "rmse": float(np.sqrt(mse)),
        "mse": mse,
        "r2_pct": 100.0 * float(skm.r2_score(truth, predicted)),
    }
