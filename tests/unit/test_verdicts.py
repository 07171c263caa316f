"""Calibration of the verdict rules (tabrepro.reporting.verdicts) on simulated tables.

Each simulated table has 20 cells; each side's number is drawn around a true value with a known
SE over 10 folds. The rules must keep their error rates: cells whose two sides share one truth
are called `differs` in at most 5 % of tables (Benjamini-Hochberg's guarantee under the global
null), and cells whose truths are 2δ apart are called `reproduced` in at most 5 % of cells (the
two one-sided tests). Removing the margin from either rule, or the BH step, breaks one of them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tabrepro.reporting import verdicts
from tabrepro.reporting.verdicts import DIFFERS, REPRODUCED, Side, compare, judge_table

MARGIN = 1.0
CELLS, TABLES = 20, 400


def _simulate(shift: float, se: float, seed: int, judge=judge_table) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    tables = []
    for _ in range(TABLES):
        tests = []
        for _ in range(CELLS):
            ours = Side(shift + rng.normal(0, se), se, 9, "folds")
            paper = Side(rng.normal(0, se), se, 9, "folds")
            tests.append(compare(ours, paper, MARGIN, 0.05))
        tables.append([v for v, _ in judge(tests, 0.05)])
    return tables


def _differs_in_table(tables: list[list[str]]) -> float:
    return float(np.mean([DIFFERS in table for table in tables]))


def _reproduced_cells(tables: list[list[str]]) -> float:
    return float(np.mean([v == REPRODUCED for table in tables for v in table]))


def test_one_truth_is_rarely_called_differs_in_any_cell_of_a_table():
    assert _differs_in_table(_simulate(0.0, 0.8 * MARGIN, seed=0)) <= 0.05


def test_truths_two_margins_apart_are_rarely_called_reproduced():
    for se in (0.3, 0.8, 2.0):
        assert _reproduced_cells(_simulate(2 * MARGIN, se * MARGIN, seed=1)) <= 0.05


def test_precise_sides_that_agree_are_reproduced():
    assert _reproduced_cells(_simulate(0.0, 0.1 * MARGIN, seed=2)) >= 0.95


def _without_bh(tests, fdr):
    return [(verdicts.decide(t, t.p_difference < fdr), t.p_difference) for t in tests]


def test_the_bh_step_is_what_keeps_null_tables_clean():
    assert _differs_in_table(_simulate(0.0, 0.8 * MARGIN, seed=0, judge=_without_bh)) > 0.05


def test_the_margin_is_what_keeps_shifted_cells_from_reproduced(monkeypatch):
    """'No difference seen' (the old rule) calls half of the 2δ-shifted, wide cells reproduced."""

    def no_margin_decide(test, rejected):
        return DIFFERS if rejected else REPRODUCED

    monkeypatch.setattr(verdicts, "decide", no_margin_decide)
    assert _reproduced_cells(_simulate(2 * MARGIN, 1.0 * MARGIN, seed=1)) > 0.05


def test_differs_needs_the_gap_to_exceed_the_margin():
    """A precise but practically small gap (δ/2, SE δ/20) is significant yet not `differs`."""
    tests = [compare(Side(0.5, 0.05, 9, ""), Side(0.0, 0.05, 9, ""), MARGIN, 0.05)]
    ((verdict, p),) = judge_table(tests, 0.05)
    assert p < 1e-4 and verdict == REPRODUCED


@pytest.mark.parametrize("delta, expected", [(0.2, "equivalence"), (3.0, "the difference")])
def test_inconclusive_says_how_many_runs_would_decide(delta, expected):
    ours, paper = Side(delta, 0.9, 9, ""), Side(0.0, 0.2, 9, "")
    test = compare(ours, paper, MARGIN, 0.05)
    text = verdicts.runs_to_decide(test, ours, paper, 0.05)
    assert "runs of our protocol would" in text and expected in text


def test_a_side_without_a_spread_leaves_delta_untested():
    # taking the unknown spread as zero would let the paper's SE alone call this cell `differs`
    ours = Side(0.0866, None, None, "one fold; NLL has no closed-form sampling SE")
    paper = Side(0.137, 0.018, 9, "the paper's ± (SE)")
    assert compare(ours, paper, 0.0137, 0.05) is None
    assert compare(paper, ours, 0.0137, 0.05) is None
    assert compare(ours, Side(0.137, 0.0, 9, "exact"), 0.0137, 0.05) is None
    assert compare(Side(0.09, 0.01, 9, "folds"), paper, 0.0137, 0.05) is not None
