"""Metric values against hand-computed numbers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from tabrepro.evaluation.metrics import HIGHER_IS_BETTER, compute_metrics, is_better


def test_binary_known_values() -> None:
    y = np.array([0, 0, 1, 1])
    p1 = np.array([0.1, 0.4, 0.35, 0.8])
    metrics = compute_metrics("binary", y, proba=np.column_stack([1 - p1, p1]))
    assert metrics["auroc"] == pytest.approx(0.75)
    assert metrics["auc_pct"] == pytest.approx(75.0)
    assert metrics["accuracy_pct"] == pytest.approx(75.0)  # 0.35 is below 0.5
    expected_nll = -np.mean(np.log([0.9, 0.6, 0.35, 0.8]))
    assert metrics["nll"] == pytest.approx(expected_nll)
    assert all(type(v) is float for v in metrics.values())
    assert set(metrics) <= set(HIGHER_IS_BETTER)


def test_binary_accepts_positive_class_vector_and_explicit_predictions() -> None:
    y = np.array([0, 1, 1])
    p1 = np.array([0.2, 0.9, 0.6])
    metrics = compute_metrics("binary", y, proba=p1, y_pred=np.array([1, 1, 1]))
    assert metrics["accuracy_pct"] == pytest.approx(200 / 3)  # from y_pred, not the proba
    assert metrics["auroc"] == pytest.approx(1.0)


def test_nll_clips_zero_probabilities() -> None:
    y = np.array([0, 1])
    proba = np.array([[1.0, 0.0], [1.0, 0.0]])  # the second row is certain and wrong
    metrics = compute_metrics("binary", y, proba=proba)
    assert metrics["nll"] == pytest.approx(-math.log(1e-15) / 2, rel=1e-6)


def test_nll_does_not_clip_float32_at_its_eps() -> None:
    y = np.array([1])
    proba = np.array([[1 - 1e-9, 1e-9]], dtype=np.float32)
    nll = compute_metrics("multiclass", y, proba=proba)["nll"]
    assert nll == pytest.approx(-math.log(float(np.float32(1e-9))), rel=1e-5)


def test_float32_rounding_in_rows_is_tolerated_without_warnings() -> None:
    rng = np.random.default_rng(0)
    raw = rng.random((200, 3)).astype(np.float32)
    proba = raw / raw.sum(axis=1, keepdims=True)  # rows off by float32 rounding
    y = np.arange(200) % 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = compute_metrics("multiclass", y, proba=proba)
    assert {"accuracy_pct", "nll", "auroc"} <= set(metrics)


def test_single_class_test_set_omits_auroc() -> None:
    metrics = compute_metrics("binary", np.array([1, 1]), proba=np.array([[0.3, 0.7], [0.6, 0.4]]))
    assert "auroc" not in metrics and metrics["accuracy_pct"] == pytest.approx(50.0)


def test_multiclass_metrics_and_auroc_only_when_all_classes_present() -> None:
    proba = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.5, 0.4, 0.1]])
    full = compute_metrics("multiclass", np.array([0, 1, 2, 1]), proba=proba)
    assert full["accuracy_pct"] == pytest.approx(75.0)
    assert full["nll"] == pytest.approx(-np.mean(np.log([0.7, 0.8, 0.6, 0.4])))
    assert 0.0 <= full["auroc"] <= 1.0
    partial = compute_metrics("multiclass", np.array([0, 1, 0, 1]), proba=proba)
    assert "auroc" not in partial and {"accuracy_pct", "nll"} <= set(partial)


def test_regression_known_values() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    pred = np.array([1.0, 2.0, 3.0, 6.0])
    metrics = compute_metrics("regression", y, y_pred=pred)
    assert metrics["mse"] == pytest.approx(1.0)
    assert metrics["rmse"] == pytest.approx(1.0)
    assert metrics["r2_pct"] == pytest.approx(100 * (1 - 4.0 / 5.0))
    assert set(metrics) == {"rmse", "mse", "r2_pct"}


def test_bad_inputs_are_errors() -> None:
    with pytest.raises(ValueError, match="proba"):
        compute_metrics("binary", np.array([0, 1]))
    with pytest.raises(ValueError, match="shape"):
        compute_metrics("multiclass", np.array([0, 1]), proba=np.ones((3, 3)) / 3)
    with pytest.raises(ValueError, match="sum to 1"):
        compute_metrics("binary", np.array([0, 1]), proba=np.array([[0.2, 0.2], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="y_pred"):
        compute_metrics("regression", np.array([1.0]))
    with pytest.raises(ValueError, match="non-finite"):
        compute_metrics("regression", np.array([1.0, 2.0]), y_pred=np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="task"):
        compute_metrics("ranking", np.array([1]), y_pred=np.array([1]))  # type: ignore[arg-type]


def test_is_better_follows_direction() -> None:
    assert is_better("auroc", 0.9, 0.8) and not is_better("auroc", 0.8, 0.8)
    assert is_better("rmse", 1.0, 2.0) and not is_better("nll", 2.0, 1.0)
    with pytest.raises(ValueError, match="unknown metric"):
        is_better("f1", 1.0, 0.0)
