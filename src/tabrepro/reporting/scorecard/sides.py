"""Each side of a comparison: a number and the spread two independent runs of that side's
protocol would show (the k-fold SE calibrated, or the sampling SE at the test size)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tabrepro.reporting.reference import PaperValue
from tabrepro.reporting.spreads import sampling_se
from tabrepro.reporting.tables import Cell
from tabrepro.reporting.verdicts import Side


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
