"""The omnibus test that must come before a critical-difference diagram (Demšar 2006, §3.2.2).

Nemenyi's post-hoc comparisons are only meaningful once a Friedman test over the same blocks
(datasets, or folds of one dataset) has rejected "all methods perform alike". Both need a complete
design: every method ranked in every block, ranks taken among those methods only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest, friedmanchisquare

ALPHA = 0.05


@dataclass(frozen=True)
class OmnibusResult:
    """Outcome of the test over blocks; `reason` says why there is no p-value when there is none."""

    test: str
    n_methods: int
    n_blocks: int
    statistic: float | None = None
    p_value: float | None = None
    reason: str | None = None

    def significant(self, alpha: float = ALPHA) -> bool:
        return self.p_value is not None and self.p_value < alpha

    def describe(self, alpha: float = ALPHA) -> str:
        """One sentence for captions: the test, its result and what it allows."""
        if self.p_value is None:
            return f"No {self.test}: {self.reason}."
        verdict = (
            "methods differ significantly" if self.significant(alpha) else "no significant difference between methods"
        )
        friedman = self.test == "Friedman test" and self.statistic is not None
        stat = f"χ² = {self.statistic:.3g}, " if friedman else ""
        why = " (two-sided; the Friedman test needs 3 or more methods)" if self.test == "sign test" else ""
        return (
            f"{self.test.capitalize()}{why} over {self.n_blocks} blocks and {self.n_methods} "
            f"methods: {stat}"
            f"p = {self.p_value:.3g} ({verdict} at α = {alpha:g})."
        )


def complete_rank_matrix(ranks: pd.DataFrame) -> pd.DataFrame:
    """Blocks x methods, only methods ranked in every block, re-ranked among themselves
    (1 = best, ties share the mean rank). `ranks` has columns block, method, rank."""
    wide = ranks.pivot(index="block", columns="method", values="rank").sort_index()
    wide = wide.dropna(axis=1).sort_index(axis=1)
    return wide.rank(axis=1, method="average")


def friedman_test(matrix: np.ndarray) -> OmnibusResult:
    """Friedman's chi-square test on an (N blocks x k methods) matrix of ranks or scores.

    With two methods scipy's Friedman test is undefined; the two-sided sign test over blocks
    (ties dropped) is the exact test of the same hypothesis and is used instead.
    """

    matrix = np.asarray(matrix, dtype=float)
    n_blocks, n_methods = matrix.shape if matrix.ndim == 2 else (0, 0)
    name = "Friedman test" if n_methods >= 3 else "sign test"
    if n_methods < 2 or n_blocks < 2:
        return OmnibusResult(
            name, n_methods, n_blocks, reason=f"needs at least 2 methods and 2 blocks (have {n_methods} and {n_blocks})"
        )
    if not np.isfinite(matrix).all():
        raise ValueError("rank matrix has missing values: only methods ranked in every block may enter")
    if (matrix == matrix[:, :1]).all():
        return OmnibusResult(name, n_methods, n_blocks, statistic=0.0, p_value=1.0)
    if n_methods == 2:
        wins = int((matrix[:, 0] < matrix[:, 1]).sum())
        decided = wins + int((matrix[:, 0] > matrix[:, 1]).sum())
        return OmnibusResult(
            "sign test", 2, n_blocks, statistic=float(wins), p_value=float(binomtest(wins, decided, 0.5).pvalue)
        )
    result = friedmanchisquare(*matrix.T)
    statistic, p_value = float(result.statistic), float(result.pvalue)
    if not (math.isfinite(statistic) and math.isfinite(p_value)):
        return OmnibusResult(name, n_methods, n_blocks, reason="the statistic is undefined for these ranks")
    return OmnibusResult(name, n_methods, n_blocks, statistic=statistic, p_value=p_value)
