"""The spreads a scorecard cell rests on (tabrepro.reporting.spreads)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tabrepro.reporting.spreads import hanley_mcneil_se, sampling_se


def test_hanley_mcneil_at_chance_by_hand():
    # A = 0.5: Q1 = Q2 = 1/3, so var = (1/4 + 9/12 + 9/12) / 100 with ten of each class
    assert hanley_mcneil_se(0.5, 10, 10) == pytest.approx(math.sqrt(1.75 / 100))


def test_hanley_mcneil_matches_the_spread_of_simulated_test_sets():
    """Exact for exponentially distributed scores (to within 10 % over 2,000 test sets of 60
    positives and 400 negatives at AUC 0.85); wider than the binormal spread, never narrower."""
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


def test_hanley_mcneil_refuses_a_missing_class_or_an_auc_out_of_range():
    assert hanley_mcneil_se(0.8, 400, 4000) < hanley_mcneil_se(0.8, 40, 400)
    with pytest.raises(ValueError):
        hanley_mcneil_se(0.8, 0, 10)
    with pytest.raises(ValueError):
        hanley_mcneil_se(1.2, 10, 10)


def test_binomial_accuracy_se_matches_simulated_test_sets():
    rng = np.random.default_rng(1)
    draws = rng.binomial(200, 0.9, 20000) / 200 * 100
    se, formula = sampling_se("accuracy_pct", 90.0, 200)
    assert se == pytest.approx(np.std(draws), rel=0.03)
    assert "binomial" in formula


def test_rmse_se_matches_gaussian_residuals():
    rng = np.random.default_rng(2)
    rmses = [math.sqrt(np.mean(rng.normal(0, 3.0, 500) ** 2)) for _ in range(4000)]
    se, _ = sampling_se("rmse", 3.0, 500)
    assert se == pytest.approx(np.std(rmses), rel=0.08)


def test_auc_needs_both_class_counts_and_nll_has_no_closed_form():
    assert sampling_se("auc_pct", 90.0, 300) is None
    se, formula = sampling_se("auc_pct", 90.0, 300, {"0": 200, "1": 100})
    assert se == pytest.approx(100 * hanley_mcneil_se(0.9, 100, 200))
    assert "100 positive / 200 negative" in formula
    assert sampling_se("nll", 0.3, 300) is None
    assert sampling_se("accuracy_pct", 90.0, None) is None
