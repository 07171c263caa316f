"""The verdict rules: is a reproduced number equivalent to the paper's, different from it, or neither?

A cell compares ours with the paper's number through Δ = ours − paper and the standard error of Δ,
SE = √(SE_ours² + SE_paper²), each side's SE being the spread that two independent runs of that
side's protocol would show (tabrepro.reporting.spreads). Every verdict is stated against a declared
practical-equivalence margin δ (params.yaml `verdicts.margins`):

- `reproduced`: two one-sided tests at level α put Δ inside ±δ (the 1 − 2α CI of Δ lies in ±δ);
- `differs`: the 1 − α CI of Δ excludes 0 after Benjamini–Hochberg across the table's cells (scipy),
  and |Δ| > δ; with its direction, and whether that is better or worse for the metric;
- `inconclusive`: neither; the cell says how many runs of ours would decide it.

The distribution of Δ/SE is Student's t with Welch–Satterthwaite degrees of freedom where both
sides' counts are known, otherwise the normal. A cell where either side's spread is unknown is
`inconclusive`, with that side named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "DIFFERS",
    "INCONCLUSIVE",
    "NOT_COMPARABLE",
    "NOT_RUN",
    "OURS_ONLY",
    "REPRODUCED",
    "Margin",
    "Side",
    "Test",
    "VerdictRules",
    "adjust_table",
    "compare",
    "decide",
    "judge_table",
    "runs_to_decide",
]

REPRODUCED, DIFFERS, INCONCLUSIVE = "reproduced", "differs", "inconclusive"
NOT_COMPARABLE, NOT_RUN, OURS_ONLY = "not comparable", "not run", "ours only"


@dataclass(frozen=True)
class Margin:
    """δ for one metric: absolute (in the metric's units) or relative to the paper's value."""

    metric: str
    value: float
    relative: bool
    reason: str

    def width(self, paper_value: float) -> float:
        return self.value * abs(paper_value) if self.relative else self.value

    def describe(self, paper_value: float) -> str:
        if self.relative:
            return f"±{self.value:.4g} × |paper| = ±{self.width(paper_value):.4g}"
        return f"±{self.value:.4g}"


@dataclass(frozen=True)
class VerdictRules:
    """The margins and error levels a scorecard is judged with (params.yaml `verdicts`)."""

    margins: Mapping[str, Margin]
    alpha: float = 0.05
    fdr: float = 0.05

    @classmethod
    def from_params(cls, section: Mapping[str, Any]) -> VerdictRules:
        margins = {}
        for metric, spec in section["margins"].items():
            relative = "relative" in spec
            margins[metric] = Margin(
                metric, float(spec["relative" if relative else "absolute"]), relative, spec["reason"]
            )
        return cls(margins=margins, alpha=float(section.get("alpha", 0.05)), fdr=float(section.get("fdr", 0.05)))

    def margin(self, metric: str) -> Margin | None:
        if metric in self.margins:
            return self.margins[metric]
        return self.margins.get("rank") if metric.startswith("rank") else None


@dataclass(frozen=True)
class Side:
    """One side's number, its standard error, the degrees of freedom behind it, and where it comes from."""

    value: float
    se: float | None
    df: float | None
    basis: str


@dataclass(frozen=True)
class Test:
    """The statistics of one comparison, before the table's multiple-testing step."""

    delta: float
    se: float
    df: float
    margin: float
    ci95: tuple[float, float]
    ci90: tuple[float, float]
    p_difference: float
    p_equivalence: float
    alpha: float

    @property
    def equivalent(self) -> bool:
        """TOST at level α: the 1 − 2α CI of Δ lies inside ±δ."""
        return self.p_equivalence < self.alpha


def _welch_df(ours: Side, paper: Side) -> float:
    """Welch–Satterthwaite degrees of freedom; infinite when a side's count is unknown."""
    parts = [(s.se**2, s.df) for s in (ours, paper) if s.se]
    if not parts or any(df is None or df <= 0 for _, df in parts):
        return math.inf
    numerator = sum(v for v, _ in parts) ** 2
    return numerator / sum(v * v / df for v, df in parts)


def compare(ours: Side, paper: Side, margin: float, alpha: float) -> Test | None:
    """The difference and equivalence statistics, or None when Δ has no spread. A side whose
    spread is unknown leaves Δ's unknown too: taking it as zero would let the other side's spread
    alone decide the verdict, in either direction."""
    if ours.se is None or paper.se is None:
        return None
    variance = ours.se**2 + paper.se**2
    if variance == 0.0:
        return None
    se = math.sqrt(variance)
    delta = ours.value - paper.value
    df = _welch_df(ours, paper)
    t = stats.t  # df = inf is the normal
    q95, q90 = t.ppf([1 - alpha / 2, 1 - alpha], df)
    p_difference = float(2 * t.sf(abs(delta) / se, df))
    # TOST: both one-sided nulls (Δ ≤ −δ, Δ ≥ +δ) rejected at α
    p_equivalence = float(max(t.sf((delta + margin) / se, df), t.cdf((delta - margin) / se, df)))
    return Test(
        delta=delta,
        se=se,
        df=df,
        margin=margin,
        ci95=(delta - q95 * se, delta + q95 * se),
        ci90=(delta - q90 * se, delta + q90 * se),
        p_difference=p_difference,
        p_equivalence=p_equivalence,
        alpha=alpha,
    )


def adjust_table(p_values: Sequence[float], fdr: float) -> tuple[np.ndarray, np.ndarray]:
    """Benjamini–Hochberg within one table: (rejected, adjusted p) in the input order."""
    if len(p_values) == 0:
        return np.zeros(0, dtype=bool), np.zeros(0)
    adjusted = stats.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")
    return adjusted <= fdr, adjusted


def decide(test: Test, rejected_after_bh: bool) -> str:
    """The verdict class of one compared cell."""
    if test.equivalent:
        return REPRODUCED
    if rejected_after_bh and abs(test.delta) > test.margin:
        return DIFFERS
    return INCONCLUSIVE


def judge_table(tests: Sequence[Test | None], fdr: float) -> list[tuple[str, float] | None]:
    """Verdict class and BH-adjusted p of each tested cell of one table (None where untested)."""
    tested = [i for i, t in enumerate(tests) if t is not None]
    rejected, adjusted = adjust_table([tests[i].p_difference for i in tested], fdr)
    out: list[tuple[str, float] | None] = [None] * len(tests)
    for i, r, p in zip(tested, rejected, adjusted, strict=True):
        out[i] = (decide(tests[i], bool(r)), float(p))
    return out


def runs_to_decide(test: Test, ours: Side, paper: Side, alpha: float) -> str:
    """How many runs of our protocol (each as many folds or seeds as this one) would decide an
    inconclusive cell, with Δ held where it is; or why more runs of ours cannot."""
    gap = abs(test.delta)
    z90, z95 = stats.norm.ppf(1 - alpha), stats.norm.ppf(1 - alpha / 2)
    if gap < test.margin:
        needed, goal = (test.margin - gap) / z90, "show equivalence"
    elif gap > test.margin:
        needed, goal = gap / z95, "show the difference"
    else:
        return "Δ sits on the margin: more runs would not move the verdict"
    paper_var = paper.se**2 if paper.se else 0.0
    ours_var = ours.se**2 if ours.se else 0.0
    room = needed**2 - paper_var
    if room <= 0 or ours_var == 0.0:
        return f"the paper's spread alone is too wide to {goal}: more runs of ours cannot decide it"
    runs = max(2, math.ceil(ours_var / room))
    return f"≈{runs} runs of our protocol would {goal} (if Δ stays at {test.delta:+.3g})"
