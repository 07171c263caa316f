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
    "RunsToDecide",
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
    counted = [(v, df) for v, df in parts if df is not None and df > 0]
    if not parts or len(counted) < len(parts):
        return math.inf
    numerator = sum(v for v, _ in counted) ** 2
    return numerator / sum(v * v / df for v, df in counted)


def _statistics(delta: Any, se: Any, df: Any, margin: float, alpha: float) -> dict[str, Any]:
    """The tests of Δ (scalars or arrays alike), one code path for the verdict and its simulation:
    the difference test (H0 Δ = 0), the minimum-effect test (H0 |Δ| ≤ δ: the one-sided test on
    the side Δ lies, doubled, so it is below α exactly when the 1 − α CI clears ±δ) and TOST (both
    one-sided nulls Δ ≤ −δ, Δ ≥ +δ rejected)."""
    t = stats.t  # df = inf is the normal
    gap = np.abs(delta)
    return {
        "p_difference": 2 * t.sf(gap / se, df),
        "p_minimum_effect": np.minimum(1.0, 2 * t.sf((gap - margin) / se, df)),
        "p_equivalence": np.maximum(t.sf((delta + margin) / se, df), t.cdf((delta - margin) / se, df)),
    }


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
    q95, q90 = stats.t.ppf([1 - alpha / 2, 1 - alpha], df)
    found = _statistics(delta, se, df, margin, alpha)
    paper_df = paper.df if paper.df is not None and paper.df > 0 else math.inf
    floor = float(stats.t.ppf(1 - alpha, paper_df) * paper.se)
    return Test(
        delta=delta,
        se=se,
        df=df,
        margin=margin,
        ci95=(delta - q95 * se, delta + q95 * se),
        ci90=(delta - q90 * se, delta + q90 * se),
        p_difference=float(found["p_difference"]),
        p_minimum_effect=float(found["p_minimum_effect"]),
        p_equivalence=float(found["p_equivalence"]),
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


@dataclass(frozen=True)
class RunsToDecide:
    """How many more runs of our protocol would decide an undecided cell, and with what power;
    `more_runs` None: no number of runs up to the limit would (the text says why)."""

    more_runs: int | None
    power: float
    text: str


def _decided_fraction(
    runs: int,
    test: Test,
    ours: Side,
    paper: Side,
    fdr: float,
    family: Sequence[float],
    noise: tuple[np.ndarray, np.ndarray],
) -> float:
    """The share of simulated cells that `runs` runs of our protocol in all would decide
    (`reproduced` or `differs`), with the true Δ where it is now and the rest of the family's
    p-values as they are: each draw is judged by the engine's own tests, t with its Welch df and
    Benjamini–Hochberg within the family."""
    assert ours.se is not None and paper.se is not None
    normal, uniform = noise
    se_ours = ours.se / math.sqrt(runs)
    drawn_ours = test.delta + se_ours * normal
    if ours.df is None:
        estimated, df = np.full_like(normal, se_ours), math.inf
    else:
        # our SE as estimated from runs × (df + 1) scores: a scaled chi-square draw
        df_ours = (ours.df + 1) * runs - 1
        estimated = se_ours * np.sqrt(stats.chi2.ppf(uniform, df_ours) / df_ours)
        df = _welch_df_arrays(estimated, df_ours, paper)
    se = np.sqrt(estimated**2 + paper.se**2)
    found = _statistics(drawn_ours, se, df, test.margin, test.alpha)
    equivalent = found["p_equivalence"] < test.alpha
    beyond = _rejected_with(found["p_minimum_effect"], np.asarray(family, dtype=float), fdr)
    return float(np.mean(equivalent | beyond))


def _welch_df_arrays(se_ours: np.ndarray, df_ours: float, paper: Side) -> Any:
    """Welch–Satterthwaite df for arrays of our SE against the paper's fixed side."""
    if paper.df is None or paper.df <= 0:
        return math.inf
    assert paper.se is not None
    v1, v2 = se_ours**2, paper.se**2
    return (v1 + v2) ** 2 / (v1 * v1 / df_ours + v2 * v2 / paper.df)


def _rejected_with(p: np.ndarray, others: np.ndarray, fdr: float) -> np.ndarray:
    """Whether each simulated p-value is rejected by Benjamini–Hochberg beside the family's
    other (fixed) p-values."""
    if others.size == 0:
        return p <= fdr
    matrix = np.column_stack([p, np.broadcast_to(others, (p.size, others.size))])
    return stats.false_discovery_control(matrix, axis=1, method="bh")[:, 0] <= fdr


def runs_to_decide(
    test: Test,
    ours: Side,
    paper: Side,
    fdr: float,
    family: Sequence[float] = (),
    *,
    power: float = 0.8,
    max_runs: int = 1000,
    draws: int = 1000,
    seed: int = 0,
) -> RunsToDecide:
    """The fewest runs of our protocol in all (each as many folds or seeds as this one; new split
    seeds) that would decide this cell with `power`, by simulating the engine on it with Δ held
    where it is (`family`: the minimum-effect p-values of the other cells of its family, fixed); the
    answer is in more runs than the one there is. Common random numbers across run counts keep
    the search monotone."""
    if ours.se is None or paper.se is None or ours.se == 0.0:
        return RunsToDecide(None, 0.0, "our spread is unknown or zero: more runs cannot be priced")
    rng = np.random.default_rng(seed)
    noise = (rng.standard_normal(draws), rng.uniform(1e-12, 1.0, draws))

    def share(runs: int) -> float:
        return _decided_fraction(runs, test, ours, paper, fdr, family, noise)

    top = share(max_runs)
    if top < power:
        why = (
            "the paper's spread alone rules out equivalence at δ, and keeps a difference beyond δ from being shown"
            if not test.decidable
            else "Δ sits too close to the margin"
        )
        return RunsToDecide(
            None, top, f"no number of runs decides it ({why}: {100 * top:.0f} % decided at {max_runs} runs)"
        )
    low, high = 1, max_runs
    while high - low > 1:
        middle = (low + high) // 2
        if share(middle) >= power:
            high = middle
        else:
            low = middle
    reached = share(high)
    return RunsToDecide(
        high - 1,
        reached,
        f"{high - 1} more runs of our protocol (new split seeds; {high} in all) would decide it with "
        f"{100 * reached:.0f} % power, if Δ stays at {test.delta:+.3g}",
    )
