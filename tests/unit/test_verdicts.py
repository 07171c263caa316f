"""The verdict rules (tabrepro.reporting.verdicts): each rule at its boundary, and their error rates
on simulated tables whose SEs are estimated from 10 folds per side, as the scorecard's are.

Each rule that decides a verdict has a test that fails when the rule is removed or moved: the
margin of `differs` (minimum-effect test), the Benjamini–Hochberg step, the TOST bound, and the
paper-spread floor of `cannot be decided`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tabrepro.reporting import verdicts
from tabrepro.reporting.verdicts import (
    DIFFERS,
    INCONCLUSIVE,
    REPRODUCED,
    SHIFTED,
    UNDECIDABLE,
    Side,
    compare,
    judge_table,
)

MARGIN = 1.0
ALPHA = 0.05
FOLDS = 10
CELLS = 20


def _fold_side(rng: np.random.Generator, truth: float, fold_sd: float) -> Side:
    """One side as the scorecard sees a k-fold result: the mean of 10 fold scores, SE = SD/√10
    estimated from those scores, 9 degrees of freedom."""
    scores = rng.normal(truth, fold_sd, FOLDS)
    return Side(float(scores.mean()), float(scores.std(ddof=1) / math.sqrt(FOLDS)), FOLDS - 1, "folds")


def _simulate(shift: float, fold_sd: float, seed: int, tables: int, judge=judge_table) -> list[list[str]]:
    """`tables` tables of CELLS cells whose true Δ is `shift`, each judged as one family."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(tables):
        tests = [
            compare(_fold_side(rng, shift, fold_sd), _fold_side(rng, 0.0, fold_sd), MARGIN, ALPHA) for _ in range(CELLS)
        ]
        out.append([j.verdict for j in judge(tests, ALPHA)])
    return out


def _tables_with(tables: list[list[str]], verdict: str) -> tuple[int, int]:
    return sum(verdict in table for table in tables), len(tables)


def _cells_with(tables: list[list[str]], verdict: str) -> tuple[int, int]:
    flat = [v for table in tables for v in table]
    return sum(v == verdict for v in flat), len(flat)


def _upper(k: int, n: int) -> float:
    """The one-sided 95 % Clopper–Pearson upper bound of a rate seen k times in n."""
    return float(stats.binomtest(k, n).proportion_ci(confidence_level=0.90, method="exact").high)


# --------------------------------------------------------------------------- calibration


def test_null_differs_rate_at_the_margin_is_below_five_percent_per_table():
    """True |Δ| = δ in every cell (the minimum-effect null at its boundary): a table with any
    `differs` stays rare, with a binomial bound that has room below 5 %."""
    k, n = _tables_with(_simulate(MARGIN, 1.2 * MARGIN, seed=0, tables=300), DIFFERS)
    assert _upper(k, n) <= 0.05


def test_tost_passes_rarely_when_the_truth_sits_on_the_margin():
    """True Δ = δ: the equivalence test may pass at most α of the time (fold SEs estimated)."""
    for fold_sd, seed, tables in ((0.6, 1, 200), (1.2, 2, 100)):
        k, n = _cells_with(_simulate(MARGIN, fold_sd * MARGIN, seed=seed, tables=tables), REPRODUCED)
        assert k / n <= ALPHA and _upper(k, n) <= ALPHA + 0.01, (fold_sd, k, n)


def test_null_tables_are_rarely_shifted_or_different():
    """True Δ = 0: a table with any cell called `differs` or `shifted` in at most 5 % of tables
    (Benjamini–Hochberg's guarantee under the global null), and not significantly more."""
    tables = _simulate(0.0, 1.2 * MARGIN, seed=4, tables=300)
    k = sum(any(v in (DIFFERS, SHIFTED) for v in table) for table in tables)
    assert k / len(tables) <= 0.05 and stats.binomtest(k, len(tables), 0.05, alternative="greater").pvalue > 0.5


def test_precise_sides_that_agree_are_reproduced():
    k, n = _cells_with(_simulate(0.0, 0.3 * MARGIN, seed=5, tables=50), REPRODUCED)
    assert k / n >= 0.95


def test_the_bh_step_is_what_keeps_null_tables_clean():
    """Without Benjamini–Hochberg (each cell at its own α), null tables at the margin show `differs`."""

    def without_bh(tests, fdr, families=None):
        return [
            verdicts.Judged(verdicts.decide(t, t.p_minimum_effect < fdr, t.p_difference < fdr), 0.0, 0.0) for t in tests
        ]

    k, n = _tables_with(_simulate(MARGIN, 1.2 * MARGIN, seed=0, tables=100, judge=without_bh), DIFFERS)
    assert k / n > 0.2


def test_bh_runs_within_each_family_not_across_them():
    """Twenty null cells in one family do not dilute one strong cell of another family."""
    strong = compare(Side(3.0, 0.1, 9, ""), Side(0.0, 0.1, 9, ""), MARGIN, ALPHA)
    weak = [compare(Side(1.0, 0.5, 9, ""), Side(0.0, 0.5, 9, ""), MARGIN, ALPHA) for _ in range(20)]
    judged = judge_table([strong, *weak], ALPHA, ["a", *["b"] * 20])
    assert judged[0].verdict == DIFFERS and judged[0].p_minimum_effect_adjusted == pytest.approx(
        strong.p_minimum_effect
    )
    with pytest.raises(ValueError, match="family keys"):
        judge_table([strong], ALPHA, ["a", "b"])


# --------------------------------------------------------------------------- each rule at its boundary


def test_differs_needs_the_whole_ci_beyond_the_margin():
    """Δ = 1.5δ with CI [+1.04, +1.96]δ: outside ±δ, `differs`; the same Δ with a CI reaching to
    +0.9δ is significant against 0 but only `shifted` (the margin removed from `differs` fails this)."""
    narrow = compare(Side(1.5, 0.2, None, ""), Side(0.0, 0.1, None, ""), MARGIN, ALPHA)
    wide = compare(Side(1.5, 0.25, None, ""), Side(0.0, 0.2, None, ""), MARGIN, ALPHA)
    assert narrow.ci95[0] > MARGIN and wide.ci95[0] < MARGIN < wide.ci95[1] and wide.ci95[0] > 0
    (first,) = judge_table([narrow], ALPHA)
    (second,) = judge_table([wide], ALPHA)
    assert first.verdict == DIFFERS and second.verdict == SHIFTED


def test_minimum_effect_p_is_below_alpha_exactly_when_the_ci_clears_the_margin():
    for gap in np.linspace(0.2, 3.0, 29):
        for sign in (1, -1):
            t = compare(Side(sign * gap, 0.4, 9, ""), Side(0.0, 0.3, 9, ""), MARGIN, ALPHA)
            outside = t.ci95[0] > MARGIN or t.ci95[1] < -MARGIN
            assert (t.p_minimum_effect < ALPHA) == outside, (sign * gap, t)


def test_tost_bound_is_the_90_percent_ci_inside_the_margin():
    """Just inside and just outside the margin, by the 1 − 2α CI (a moved TOST bound fails this)."""
    se = 0.2
    q90 = stats.norm.ppf(1 - ALPHA)
    inside = compare(Side(MARGIN - q90 * se - 1e-6, se, None, ""), Side(0.0, 0.0, None, ""), MARGIN, ALPHA)
    outside = compare(Side(MARGIN - q90 * se + 1e-6, se, None, ""), Side(0.0, 0.0, None, ""), MARGIN, ALPHA)
    # a side with SE 0 leaves the other to carry Δ's spread; both tested
    assert inside.equivalent and not outside.equivalent
    assert inside.ci90[1] < MARGIN < outside.ci90[1]


def test_tost_at_exactly_the_margin_never_passes():
    t = compare(Side(MARGIN, 0.01, 9, ""), Side(0.0, 0.01, 9, ""), MARGIN, ALPHA)
    assert not t.equivalent and t.p_equivalence == pytest.approx(0.5)


def test_cannot_be_decided_when_the_papers_spread_alone_is_too_wide():
    """The paper's 90 % half-width (t with its df) at or beyond δ: no run of ours could pass TOST."""
    paper = Side(0.0, 0.7, 9, "the paper's ±")  # t(9) 95 % quantile 1.833 × 0.7 = 1.28 > δ
    ours = Side(0.1, 0.05, 9, "folds")
    t = compare(ours, paper, MARGIN, ALPHA)
    assert not t.decidable and t.floor == pytest.approx(stats.t.ppf(0.95, 9) * 0.7)
    assert judge_table([t], ALPHA)[0].verdict == UNDECIDABLE
    # with the same paper SE over more folds (normal quantile) the floor is lower, still above δ
    assert compare(ours, Side(0.0, 0.7, None, ""), MARGIN, ALPHA).floor == pytest.approx(1.645 * 0.7, abs=1e-3)
    # a narrower paper spread leaves the cell to the data: inconclusive, not undecidable
    wide_ours = compare(Side(0.1, 0.9, 9, ""), Side(0.0, 0.3, 9, ""), MARGIN, ALPHA)
    assert wide_ours.decidable and judge_table([wide_ours], ALPHA)[0].verdict == INCONCLUSIVE


def test_decide_order_reproduced_differs_shifted_undecidable_inconclusive():
    t = compare(Side(0.1, 0.9, 9, ""), Side(0.0, 0.7, 9, ""), MARGIN, ALPHA)
    assert not t.equivalent and not t.decidable
    assert verdicts.decide(t, True, True) == DIFFERS
    assert verdicts.decide(t, False, True) == SHIFTED
    assert verdicts.decide(t, False, False) == UNDECIDABLE


def test_stated_more_runs_decide_most_simulated_cells():
    """Undecided cells, priced by `runs_to_decide`, then re-run through the engine itself
    (compare + judge_table) at the stated number of runs: at least 75 % end up decided."""
    rng = np.random.default_rng(7)
    decided, priced = 0, 0
    for _ in range(12):
        truth = rng.uniform(-2.5, 2.5) * MARGIN
        fold_sd, paper_se = rng.uniform(1.0, 3.0), rng.uniform(0.05, 0.3)
        ours = _fold_side(rng, truth, fold_sd)
        paper = Side(0.0, paper_se, FOLDS - 1, "the paper's ±")
        test = compare(ours, paper, MARGIN, ALPHA)
        if judge_table([test], ALPHA)[0].verdict in (REPRODUCED, DIFFERS):
            continue
        cost = verdicts.runs_to_decide(test, ours, paper, ALPHA)
        if cost.more_runs is None:
            continue
        priced += 1
        runs = cost.more_runs + 1
        hits = 0
        for _ in range(40):  # new runs of our protocol around the same Δ, judged by the engine
            scores = rng.normal(test.delta, fold_sd, FOLDS * runs)
            again = Side(float(scores.mean()), float(scores.std(ddof=1) / math.sqrt(scores.size)), scores.size - 1, "")
            hits += judge_table([compare(again, paper, MARGIN, ALPHA)], ALPHA)[0].verdict in (REPRODUCED, DIFFERS)
        decided += hits
    assert priced >= 5 and decided / (40 * priced) >= 0.75


def test_no_number_of_runs_where_the_papers_spread_rules_it_out():
    ours, paper = Side(0.2, 0.5, 9, ""), Side(0.0, 0.8, 9, "")  # paper's half-width 1.47 > δ, Δ inside
    test = compare(ours, paper, MARGIN, ALPHA)
    cost = verdicts.runs_to_decide(test, ours, paper, ALPHA, max_runs=200)
    assert cost.more_runs is None and "no number of runs" in cost.text and "paper's spread" in cost.text


def test_more_runs_count_the_family_in():
    """The same cell needs more runs when BH must share α with nineteen null cells."""
    ours, paper = Side(1.6, 0.4, 9, ""), Side(0.0, 0.05, 9, "")
    test = compare(ours, paper, MARGIN, ALPHA)
    alone = verdicts.runs_to_decide(test, ours, paper, ALPHA)
    crowded = verdicts.runs_to_decide(test, ours, paper, ALPHA, [0.9] * 19)
    assert alone.more_runs is not None and crowded.more_runs is not None and crowded.more_runs > alone.more_runs
    assert f"{alone.more_runs} more runs" in alone.text


def test_a_side_without_a_spread_leaves_delta_untested():
    # taking the unknown spread as zero would let the paper's SE alone call this cell `differs`
    ours = Side(0.0866, None, None, "one fold; NLL has no closed-form sampling SE")
    paper = Side(0.137, 0.018, 9, "the paper's ± (SE)")
    assert compare(ours, paper, 0.0137, ALPHA) is None
    assert compare(paper, ours, 0.0137, ALPHA) is None
    assert compare(ours, Side(0.137, 0.0, 9, "exact"), 0.0137, ALPHA) is None
    assert compare(Side(0.09, 0.01, 9, "folds"), paper, 0.0137, ALPHA) is not None
