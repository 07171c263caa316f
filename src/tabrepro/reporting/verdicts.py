"""The verdict rules: is a reproduced number equivalent to the paper's, different from it, or neither?

A cell compares ours with the paper's number through Δ = ours − paper and the standard error of Δ,
SE = √(SE_ours² + SE_paper²), each side's SE being the spread that two independent runs of that
side's protocol would show (tabrepro.reporting.spreads). Every verdict is stated against a declared
practical-equivalence margin δ (params.yaml `verdicts.margins`), and each names what its test
shows (equivalence and minimum-effect testing, Lakens, Scheel & Isager 2018):

- `reproduced`: two one-sided tests at level α put Δ inside ±δ (the 1 − 2α CI of Δ lies in ±δ);
- `differs`: a minimum-effect test (H0: |Δ| ≤ δ) rejects after Benjamini–Hochberg within the
  cell's family (scipy): the 1 − α CI of Δ lies wholly outside ±δ; with its direction;
- `shifted`: Δ ≠ 0 after Benjamini–Hochberg within the family, but the CI reaches into ±δ: a
  shift that may be smaller than the margin, never counted as `differs`;
- `cannot be decided`: the paper's spread alone rules out `reproduced` at δ (its 1 − 2α
  half-width is at least δ), so no run of ours can pass the equivalence test; the cell shows the
  margin it would take;
- `inconclusive`: none of these; the cell says how many more runs would decide it.

The distribution of Δ/SE is Student's t with Welch–Satterthwaite degrees of freedom where both
sides' counts are known, otherwise the normal. A cell where either side's spread is unknown is
not tested.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "DIFFERS",
    "INCONCLUSIVE",
    "Judged",
    "SHIFTED",
    "UNDECIDABLE",
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

REPRODUCED, DIFFERS, SHIFTED = "reproduced", "differs", "shifted"
UNDECIDABLE, INCONCLUSIVE = "cannot be decided", "inconclusive"
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
    """The statistics of one comparison, before its family's multiple-testing step.

    `p_difference` tests H0: Δ = 0; `p_minimum_effect` tests H0: |Δ| ≤ δ (two-sided: below α
    exactly when the 1 − α CI lies wholly outside ±δ); `p_equivalence` is TOST's (H0: |Δ| ≥ δ).
    `floor` is the smallest margin the paper's spread alone lets the equivalence test pass at:
    its 1 − 2α half-width, reached as our SE goes to 0.
    """

    delta: float
    se: float
    df: float
    margin: float
    ci95: tuple[float, float]
    ci90: tuple[float, float]
    p_difference: float
    p_minimum_effect: float
    p_equivalence: float
    alpha: float
    floor: float

    @property
    def equivalent(self) -> bool:
        """TOST at level α: the 1 − 2α CI of Δ lies inside ±δ."""
        return self.p_equivalence < self.alpha

    @property
    def decidable(self) -> bool:
        """Whether any run of ours could show equivalence: the paper's half-width is below δ."""
        return self.floor < self.margin


def _welch_df(ours: Side, paper: Side) -> float:
    """Welch–Satterthwaite degrees of freedom; infinite when a side's count is unknown."""
    parts = [(s.se**2, s.df) for s in (ours, paper) if s.se]
    if not parts or any(df is None or df <= 0 for _, df in parts):
        return math.inf
    numerator = sum(v for v, _ in parts) ** 2
    return numerator / sum(v * v / df for v, df in parts)


def compare(ours: Side, paper: Side, margin: float, alpha: float) -> Test | None:
    """The difference, minimum-effect and equivalence statistics, or None when Δ has no spread. A
    side whose spread is unknown leaves Δ's unknown too: taking it as zero would let the other
    side's spread alone decide the verdict, in either direction."""
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
    # minimum-effect test: the one-sided test on the side Δ lies, doubled (both directions tested)
    p_minimum_effect = float(min(1.0, 2 * t.sf((abs(delta) - margin) / se, df)))
    # TOST: both one-sided nulls (Δ ≤ −δ, Δ ≥ +δ) rejected at α
    p_equivalence = float(max(t.sf((delta + margin) / se, df), t.cdf((delta - margin) / se, df)))
    paper_df = paper.df if paper.df is not None and paper.df > 0 else math.inf
    floor = float(t.ppf(1 - alpha, paper_df) * paper.se)
    return Test(
        delta=delta,
        se=se,
        df=df,
        margin=margin,
        ci95=(delta - q95 * se, delta + q95 * se),
        ci90=(delta - q90 * se, delta + q90 * se),
        p_difference=p_difference,
        p_minimum_effect=p_minimum_effect,
        p_equivalence=p_equivalence,
        alpha=alpha,
        floor=floor,
    )


def adjust_table(p_values: Sequence[float], fdr: float) -> tuple[np.ndarray, np.ndarray]:
    """Benjamini–Hochberg within one table: (rejected, adjusted p) in the input order."""
    if len(p_values) == 0:
        return np.zeros(0, dtype=bool), np.zeros(0)
    adjusted = stats.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")
    return adjusted <= fdr, adjusted


@dataclass(frozen=True)
class Judged:
    """A tested cell's verdict class and its BH-adjusted p-values (difference, minimum effect)."""

    verdict: str
    p_adjusted: float
    p_minimum_effect_adjusted: float


def decide(test: Test, beyond_margin: bool, nonzero: bool) -> str:
    """The verdict class of one tested cell, given its family's BH decisions: `beyond_margin` for
    the minimum-effect test, `nonzero` for the difference test."""
    if test.equivalent:
        return REPRODUCED
    if beyond_margin:
        return DIFFERS
    if nonzero:
        return SHIFTED
    if not test.decidable:
        return UNDECIDABLE
    return INCONCLUSIVE


def judge_table(
    tests: Sequence[Test | None], fdr: float, families: Sequence[Hashable] | None = None
) -> list[Judged | None]:
    """Each tested cell's verdict, with Benjamini–Hochberg applied within each family (cells with
    the same key in `families`; one family when None). None where a cell was not tested."""
    keys = list(families) if families is not None else [None] * len(tests)
    if len(keys) != len(tests):
        raise ValueError(f"{len(tests)} tests but {len(keys)} family keys")
    out: list[Judged | None] = [None] * len(tests)
    for family in dict.fromkeys(k for k, t in zip(keys, tests, strict=True) if t is not None):
        members = [i for i, (k, t) in enumerate(zip(keys, tests, strict=True)) if t is not None and k == family]
        picked = [tests[i] for i in members]
        nonzero, p_adjusted = adjust_table([t.p_difference for t in picked if t is not None], fdr)
        beyond, p_me_adjusted = adjust_table([t.p_minimum_effect for t in picked if t is not None], fdr)
        for j, i in enumerate(members):
            test = tests[i]
            assert test is not None
            out[i] = Judged(
                decide(test, bool(beyond[j]), bool(nonzero[j])), float(p_adjusted[j]), float(p_me_adjusted[j])
            )
    return out


def runs_to_decide(test: Test, ours: Side, paper: Side, alpha: float) -> str:
    """How many runs of our protocol in all (each as many folds or seeds as this one) would decide
    an inconclusive cell at about even odds, with Δ held where it is and before the family's BH
    step; or why more runs of ours cannot."""
    gap = abs(test.delta)
    z90, z95 = stats.norm.ppf(1 - alpha), stats.norm.ppf(1 - alpha / 2)
    if gap < test.margin:
        needed, goal = (test.margin - gap) / z90, "show equivalence"
    elif gap > test.margin:
        needed, goal = (gap - test.margin) / z95, "show the difference beyond the margin"
    else:
        return "Δ sits on the margin: more runs would not move the verdict"
    paper_var = paper.se**2 if paper.se else 0.0
    ours_var = ours.se**2 if ours.se else 0.0
    room = needed**2 - paper_var
    if room <= 0 or ours_var == 0.0:
        return f"the paper's spread alone is too wide to {goal}: more runs of ours cannot decide it"
    runs = max(2, math.ceil(ours_var / room))
    return f"≈{runs} runs of our protocol in all ({runs - 1} more) would {goal} (if Δ stays at {test.delta:+.3g})"
