"""The split-to-split yardstick of the audit (tabrepro.reporting.yardstick)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tabrepro.reporting.yardstick import SplitGap, format_gaps, hanley_mcneil_se


def test_hanley_mcneil_at_chance_by_hand():
    # A = 0.5: Q1 = Q2 = 1/3, so var = (1/4 + 9/12 + 9/12) / 100 with ten of each class
    assert hanley_mcneil_se(0.5, 10, 10) == pytest.approx(math.sqrt(1.75 / 100))


def test_hanley_mcneil_matches_the_spread_of_simulated_test_sets():
    """Under the model its Q1/Q2 approximations are exact for (exponentially distributed scores),
    the SE over many independent test sets of 60 positives and 400 negatives at AUC 0.85 is what
    the formula says, to within 10 %; with binormal scores it overstates the spread (~25 % here),
    which makes the audit's yardstick lenient, as docs/reproduction.md says."""
    rng = np.random.default_rng(0)
    auc = 0.85
    exponential, binormal = [], []
    for _ in range(2000):
        neg, pos = rng.exponential(1.0, 400), rng.exponential(1.0 / (1 / auc - 1), 60)
        exponential.append((pos[:, None] > neg[None, :]).mean())
        neg, pos = rng.normal(0, 1, 400), rng.normal(math.sqrt(2) * 1.0364, 1, 60)  # Phi(1.0364) = 0.85
        binormal.append((pos[:, None] > neg[None, :]).mean())
    formula = hanley_mcneil_se(auc, 60, 400)
    assert np.mean(exponential) == pytest.approx(auc, abs=0.01)
    assert np.std(exponential) == pytest.approx(formula, rel=0.10)
    assert 0.7 * formula < np.std(binormal) < formula


def test_se_shrinks_with_the_test_set_and_bad_input_is_refused():
    assert hanley_mcneil_se(0.8, 400, 4000) < hanley_mcneil_se(0.8, 40, 400)
    with pytest.raises(ValueError):
        hanley_mcneil_se(0.8, 0, 10)
    with pytest.raises(ValueError):
        hanley_mcneil_se(1.2, 10, 10)


def test_gap_in_split_ses_and_its_table():
    gap = SplitGap("fig4_1", "qsar", "tabnet", ours=92.0, paper=67.0, n_positive=71, n_negative=140, split_se=2.5)
    assert gap.z_split == pytest.approx(25 / (math.sqrt(2) * 2.5))
    near = SplitGap("fig4_1", "qsar", "xgboost", ours=94.0, paper=93.0, n_positive=71, n_negative=140, split_se=2.0)
    text = format_gaps([gap, near])
    assert "| fig4_1 | qsar | tabnet | 92.00 | 67.00 | 71 / 140 | 2.50 | +7.1 |" in text
    assert "1 of 2 cells within 2 split SEs" in text
