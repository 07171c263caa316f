"""The spread behind each side of a scorecard cell: what two independent runs of its protocol would show.

A spread over seeds of one split leaves out the largest source of difference between two runs of
a holdout protocol, which test rows the split drew; so it is never used alone. The sources, in the
order they are used:

- k-fold results: the SD of the fold means / √n. A factor below 1 is applied only for a model ×
  metric that a split-seed record measured on at least `min_datasets` datasets with at least
  `min_split_seeds` split seeds each, at the judged profile's search budget, and then its upper
  one-sided bound (`qualified_factors`); never on the paper's side (the NPT authors' folds overlap,
  so their ± is not the fold procedure the record measured);
- one split (holdout): the sampling SE of the metric at the test size, evaluated at the value both
  sides pool under the null (their mean), so that a printed 100.00 or 0 does not carry SE 0; from
  the job's saved test predictions (a bootstrap over test rows) where no closed form exists; plus
  the seeds' own spread (SD²/r) where the run repeated its seeds;
- the paper's ±, as SE (an SD divided by √ of its folds or runs); where it gives none: its stated
  bound (BiSHop's "variances ≤ 0.13 %") plus the sampling SE at its test size, or, for a k-fold
  protocol, our SE (the same protocol on the same data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scipy import stats

__all__ = ["KfoldFactor", "hanley_mcneil_se", "pooled_value", "qualified_factors", "sampling_se"]

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


def pooled_value(ours: float, paper: float | None) -> float:
    """The value a sampling SE is evaluated at: under the null both sides share one true value,
    best estimated by their mean; our own value where the paper has none."""
    return ours if paper is None else (ours + paper) / 2.0


# Metrics that are another metric on another scale: the same factor applies.
SAME_SPREAD_AS = {"auc_pct": "auroc"}


@dataclass(frozen=True)
class KfoldFactor:
    """A measured factor for one model × metric's k-fold SE, and what it rests on."""

    model: str
    metric: str
    factor: float
    datasets: tuple[str, ...]
    min_seeds: int
    basis: str


def _upper_ratio(row: Mapping[str, Any], level: float) -> float:
    """The upper one-sided `level` bound of a record row's ratio (empirical SD over split seeds /
    assigned SE), from the chi-square distribution of the sample variance over its seeds."""
    n = int(row["n_seeds"])
    sd_upper = float(row["empirical_sd"]) * math.sqrt((n - 1) / float(stats.chi2.ppf(1.0 - level, n - 1)))
    return sd_upper / float(row["assigned_se_mean"])


def qualified_factors(
    record: Mapping[str, Any],
    *,
    max_configs: int | None,
    min_datasets: int,
    min_split_seeds: int,
    level: float,
    source: str,
) -> dict[tuple[str, str], KfoldFactor]:
    """The k-fold factors a split-seed record (scripts/calibrate_spread.py) supports, per
    (model, metric): only where it measured the model on `min_datasets` datasets or more, each
    with `min_split_seeds` seeds or more, at the search budget `max_configs` of the profile being
    judged; the factor is the largest of the datasets' upper `level` bounds, and is used only when
    it is below 1. Everything else keeps the plain SD/√n."""
    settings = record.get("settings") or {}
    if max_configs is not None and settings.get("max_configs") != max_configs:
        return {}
    rows: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in record.get("summary") or []:
        rows.setdefault((str(row["model"]), str(row["metric"])), []).append(row)
    found: dict[tuple[str, str], KfoldFactor] = {}
    for (model, metric), group in sorted(rows.items()):
        datasets = tuple(sorted({str(r["dataset"]) for r in group}))
        seeds = min(int(r["n_seeds"]) for r in group)
        if len(datasets) < min_datasets or seeds < min_split_seeds:
            continue
        factor = round(max(_upper_ratio(r, level) for r in group), 2)
        if factor >= 1.0:
            continue
        basis = (
            f"× {factor:.2f}, the upper {100 * level:g} % bound measured over {len(datasets)} datasets "
            f"× ≥{seeds} split seeds ({source})"
        )
        found[(model, metric)] = KfoldFactor(model, metric, factor, datasets, seeds, basis)
        for alias, base in SAME_SPREAD_AS.items():
            if base == metric:
                found[(model, alias)] = KfoldFactor(model, alias, factor, datasets, seeds, basis)
    return found
