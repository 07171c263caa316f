"""The spread behind each side of a scorecard cell: what two independent runs of its protocol would show.

A spread over seeds of one split leaves out the largest source of difference between two runs of
a holdout protocol, which test rows the split drew; so it is never used alone. The sources, in the
order they are used:

- k-fold results: the SD of the fold means / √n, times the calibration factor that the split-seed
  experiment measured for the metric (params.yaml `verdicts.spread_calibration`);
- one split (holdout): the sampling SE of the metric at the test size, plus the seeds' own spread
  (SD²/r) where the run repeated its seeds;
- the paper's ±, as SE (an SD divided by √ of its folds or runs), calibrated like ours when it is
  over folds; where it gives none: its stated bound (BiSHop's "variances ≤ 0.13 %") plus the sampling SE
  at its test size, or, for a k-fold protocol, our SE (the same protocol on the same data).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["calibration_factors", "hanley_mcneil_se", "sampling_se"]

PCT_METRICS = {"accuracy_pct": "accuracy", "auc_pct": "auroc", "r2_pct": "r2"}


def hanley_mcneil_se(auc: float, n_positive: int, n_negative: int) -> float:
    """The SE of an AUROC (as a fraction) on a test set with these class counts (Hanley & McNeil,
    Radiology 1982, eq. 2, with their exponential approximations of Q1, Q2: exact for exponentially
    distributed scores, about a quarter too wide for binormal ones at AUC 0.85; tests/unit/test_spreads.py)."""
    if not 0.0 <= auc <= 1.0 or n_positive < 1 or n_negative < 1:
        raise ValueError(f"need 0 <= auc <= 1 and both classes present, got {auc}, {n_positive}, {n_negative}")
    q1, q2 = auc / (2.0 - auc), 2.0 * auc * auc / (1.0 + auc)
    variance = (auc * (1.0 - auc) + (n_positive - 1) * (q1 - auc * auc) + (n_negative - 1) * (q2 - auc * auc)) / (
        n_positive * n_negative
    )
    return math.sqrt(max(variance, 0.0))


def sampling_se(
    metric: str, value: float, n_test: int | None, class_counts: Mapping[Any, int] | None = None
) -> tuple[float, str] | None:
    """The metric's SE from sampling `n_test` test rows, with the formula's name; None when no
    closed form exists for it (NLL needs the per-row losses) or the counts it needs are unknown."""
    if not n_test or n_test < 2:
        return None
    scale = 100.0 if metric in PCT_METRICS else 1.0
    base = PCT_METRICS.get(metric, metric)
    x = value / scale
    if base == "accuracy":
        return scale * math.sqrt(max(x * (1.0 - x), 0.0) / n_test), f"binomial at {n_test} test rows"
    if base == "auroc":
        counts = [int(c) for c in (class_counts or {}).values()]
        if len(counts) != 2 or min(counts) < 1:
            return None
        return scale * hanley_mcneil_se(min(max(x, 0.0), 1.0), counts[1], counts[0]), (
            f"Hanley–McNeil at {counts[1]} positive / {counts[0]} negative test rows"
        )
    if base == "rmse":
        return x / math.sqrt(2.0 * n_test), f"RMSE/√(2n), Gaussian residuals, {n_test} test rows"
    if base == "mse":
        return x * math.sqrt(2.0 / n_test), f"MSE·√(2/n), Gaussian residuals, {n_test} test rows"
    if base == "r2":
        return scale * (1.0 - x) * math.sqrt(2.0 / n_test), f"(1 − R²)·√(2/n), Gaussian residuals, {n_test} test rows"
    return None


# Metrics that are another metric on another scale: the same factor applies.
SAME_SPREAD_AS = {"auc_pct": "auroc"}


def calibration_factors(summary: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per metric, the factor between the k-fold SE and the spread of the protocol's mean over
    independent runs, from the split-seed record's summary rows (scripts/calibrate_spread.py): the
    root mean square of the rows' ratios (empirical SD / assigned SE), rounded to two places, so
    that datasets and models of different scales weigh alike. params.yaml carries these numbers
    (`verdicts.spread_calibration.kfold`); a test checks that they match the record."""
    ratios: dict[str, list[float]] = {}
    for row in summary:
        ratios.setdefault(row["metric"], []).append(float(row["ratio_assigned"]))
    factors = {m: round(math.sqrt(sum(r * r for r in rs) / len(rs)), 2) for m, rs in sorted(ratios.items())}
    for alias, metric in SAME_SPREAD_AS.items():
        if metric in factors:
            factors[alias] = factors[metric]
    return dict(sorted(factors.items()))
