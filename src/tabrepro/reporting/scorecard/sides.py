"""Each side of a comparison: a number and the spread two independent runs of that side's
protocol would show (the k-fold SE, or the sampling SE at the test size at the pooled value)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tabrepro.config import resolve_extends
from tabrepro.reference import PaperValue
from tabrepro.reporting.spreads import KfoldFactor, pooled_value, qualified_factors, sampling_se
from tabrepro.reporting.tables import Cell
from tabrepro.reporting.verdicts import Side

# Metrics whose sampling SE has a closed form that holds at any value (a binomial proportion, a
# binary AUROC); the others come from the job's saved test predictions when they exist.
CLOSED_FORM_FIRST = ("accuracy_pct", "accuracy", "auc_pct", "auroc")

# metric -> the bootstrap SE of our side over its saved test predictions and its basis, or None.
PredictionSE = Callable[[str], tuple[float, str] | None]


@functools.cache
def _read_record(path: str) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def kfold_factor(params: Any, paper: str, dataset: str, model: str | None, metric: str) -> KfoldFactor | None:
    """The measured factor for our k-fold SE of this model × metric, or None (the plain SD/√n):
    see tabrepro.reporting.spreads.qualified_factors for when a record qualifies."""
    section = params.raw["verdicts"].get("spread_calibration")
    if not section or model is None:
        return None
    path = Path(params.source).parent / section["record"]
    record = _read_record(str(path))
    if record is None:
        return None
    factors = qualified_factors(
        record,
        max_configs=params.n_configs(paper, dataset, model) if model in _searched(params, paper, dataset) else None,
        min_datasets=int(section["min_datasets"]),
        min_split_seeds=int(section["min_split_seeds"]),
        level=float(section["level"]),
        source=section["record"],
    )
    return factors.get((model, metric))


def _searched(params: Any, paper: str, dataset: str) -> set[str]:
    """Models with a search space on this dataset (the others have no search budget to match)."""

    space = params.dataset_entry(paper, dataset)["search_space"]
    return set(resolve_extends(params.raw["search_spaces"], space, params.source))


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


def _rescaled(metric: str, se: float, own: float, at: float) -> float | None:
    """A bootstrap SE measured at our value, carried to the pooled value: scale metrics (NLL, RMSE,
    MSE) in proportion to the value, R² in proportion to 1 − R²; None where that is undefined."""
    if metric == "r2_pct":
        own_gap, at_gap = 100.0 - own, 100.0 - at
        return se * at_gap / own_gap if own_gap > 0 and at_gap >= 0 else None
    if metric in ("nll", "rmse", "mse"):
        return se * at / own if own > 0 and at >= 0 else None
    return se if at == own else None


def one_split_se(
    metric: str,
    own: float,
    at: float,
    n_test: int | None,
    counts: Mapping[str, int] | None,
    bootstrap: tuple[float, str] | None,
) -> tuple[float, str] | None:
    """The sampling SE of one split's metric at the pooled value `at`: the closed form where it
    holds at any value, else our test predictions' bootstrap carried to `at`, else the closed form
    under its assumptions (Gaussian residuals); None where none applies."""
    closed = sampling_se(metric, at, n_test, counts)
    if metric in CLOSED_FORM_FIRST and closed is not None:
        return closed[0], f"{closed[1]}, at the pooled value {at:.4g}"
    if bootstrap is not None:
        carried = _rescaled(metric, bootstrap[0], own, at)
        if carried is not None:
            where = "" if at == own else f", carried to the pooled value {at:.4g}"
            return carried, f"{bootstrap[1]}{where}"
    if closed is not None:
        return closed[0], f"{closed[1]}, at the pooled value {at:.4g}"
    return None


def _with_seeds(found: tuple[float, str] | None, seed_variance: float, runs: int) -> tuple[float, str] | None:
    """The sampling SE plus the seeds' spread of their mean; None without the first."""
    if found is None:
        return None
    se, formula = found
    if seed_variance > 0 and runs > 1:
        return math.sqrt(se * se + seed_variance / runs), f"{formula} + the spread of {runs} seeds"
    return se, formula


def ours_side(
    params: Any,
    paper: str,
    dataset: str,
    model: str | None,
    cell: Cell,
    spread_kind: str,
    folds: Mapping,
    paper_value: float | None = None,
    bootstrap: PredictionSE | None = None,
) -> Side:
    """Our number and the spread two independent runs of our protocol would show."""
    assert cell.ours_mean is not None
    metric = cell.metric
    if cell.count is not None and cell.count > 1 and cell.ours_spread is not None:
        sd = cell.ours_spread if spread_kind == "sd" else cell.ours_spread * math.sqrt(cell.count)
        factor = kfold_factor(params, paper, dataset, model, metric)
        scale, how = (1.0, "") if factor is None else (factor.factor, f" {factor.basis}")
        return Side(
            cell.ours_mean, scale * sd / math.sqrt(cell.count), cell.count - 1, f"{cell.count} folds: SD/√n{how}"
        )
    n_test, counts = _test_rows(folds)
    seeds = _seed_values(folds, metric)
    seed_variance = float(pd.Series(seeds).var(ddof=1)) if len(seeds) > 1 else 0.0
    at = pooled_value(cell.ours_mean, paper_value)
    boot = bootstrap(metric) if bootstrap is not None else None
    found = _with_seeds(one_split_se(metric, cell.ours_mean, at, n_test, counts, boot), seed_variance, len(seeds))
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
    bootstrap: PredictionSE | None = None,
) -> Side:
    """The paper's number and its spread: its own ± (never shrunk by our calibration), its
    stated bound, or what its protocol implies at the pooled value."""
    protocol = params.protocol(paper, dataset)
    kfold = protocol["kind"] == "kfold"
    runs = _paper_runs(params, paper, dataset)
    if value.spread is not None:
        if value.spread_kind not in ("se", "sd"):
            return Side(value.value, None, None, f"the paper's ± is of unknown kind ({value.spread_kind!r}): not used")
        se = value.spread if value.spread_kind == "se" else value.spread / math.sqrt(runs)
        basis = "the paper's ± (SE)" if value.spread_kind == "se" else f"the paper's ± (SD)/√{runs}"
        return Side(value.value, se, runs - 1, basis)
    if kfold:
        if ours is not None and ours.se is not None:
            return Side(value.value, ours.se, ours.df, "none given: ours taken for it (same protocol and data)")
        return Side(value.value, None, None, "none given, and ours has none to stand in for it")
    stated = table_cfg.get("stated_spread") or {}
    seed_variance = float(stated.get("variance_max", 0.0))
    n_test, counts = _test_rows(folds)
    metric = table_cfg["metric"]
    own = ours.value if ours is not None else value.value
    at = pooled_value(own, value.value) if ours is not None else value.value
    boot = bootstrap(metric) if bootstrap is not None else None
    found = _with_seeds(
        one_split_se(metric, own, at, n_test, counts, boot), seed_variance, int(stated.get("runs", runs))
    )
    if found is None:
        return Side(value.value, None, None, "none given, and none derivable at its test size")
    basis = f"{found[1]} (our split's size under the paper's protocol)"
    if stated:
        basis += f"; seed variance bound {seed_variance:g} from {stated['source']}"
    return Side(value.value, found[0], None, basis)
