"""The sampling SE of a test metric from a job's test predictions (tabrepro.evaluation.prediction_spread)
and the file it reads (tabrepro.evaluation.job_predictions)."""

from __future__ import annotations

import io
import math
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tabrepro.errors import InputError
from tabrepro.evaluation import prediction_spread as spread
from tabrepro.evaluation.job_predictions import (
    PredictionsFileError,
    job_predictions,
    read_predictions,
    write_predictions,
)
from tabrepro.evaluation.metrics import compute_metrics
from tabrepro.reporting.spreads import hanley_mcneil_se


def _binary(n: int, seed: int = 0, separation: float = 1.2) -> tuple[np.ndarray, np.ndarray]:
    """Balanced labels and binormal scores, symmetric in the two classes (so each class has the
    same accuracy and the same mean log-loss: stratifying changes no SE below)."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    score = 1.0 / (1.0 + np.exp(-(rng.normal(size=y.size) + separation * (2 * y - 1))))
    return y, np.column_stack([1.0 - score, score])


def _write(path: Path, task: str, y: np.ndarray, runs: list[np.ndarray]) -> Path:
    write_predictions(path, job_predictions(task, 0, np.arange(y.size) * 3, y, runs))
    return path


def _delong_se(y: np.ndarray, score: np.ndarray) -> float:
    """DeLong et al. (1988): the variance of the AUROC from the placement values of each class."""
    pos, neg = score[y == 1], score[y == 0]
    greater = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = greater.mean(axis=1), greater.mean(axis=0)
    return math.sqrt(v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size)


def test_accuracy_se_is_the_binomial_se(tmp_path):
    y, proba = _binary(2000)
    path = _write(tmp_path / "p.npz", "binary", y, [proba])
    accuracy = compute_metrics("binary", y, proba=proba)["accuracy_pct"] / 100
    binomial = 100 * math.sqrt(accuracy * (1 - accuracy) / y.size)
    se, basis = spread.test_metric_se(path, "accuracy_pct")
    assert se == pytest.approx(binomial, rel=0.10)
    assert basis == "stratified bootstrap, 2000 resamples of 2000 test rows"


def test_auroc_se_matches_delong_and_hanley_mcneil(tmp_path):
    y, proba = _binary(1000, seed=1, separation=0.8)
    path = _write(tmp_path / "p.npz", "binary", y, [proba])
    auroc = compute_metrics("binary", y, proba=proba)["auroc"]
    se, _ = spread.test_metric_se(path, "auroc")
    assert se == pytest.approx(_delong_se(y, proba[:, 1]), rel=0.10)
    assert se == pytest.approx(hanley_mcneil_se(auroc, 500, 500), rel=0.15)
    se_pct, _ = spread.test_metric_se(path, "auc_pct")
    assert se_pct == pytest.approx(100 * se, rel=1e-12)  # the same resamples, in percent


def test_nll_and_regression_errors_get_the_se_of_a_mean_of_row_losses(tmp_path):
    """NLL and MSE are means over rows: their SE is the rows' SD / √n (nothing assumed about the
    loss's distribution, which no formula of the scorecard covers)."""
    y, proba = _binary(2000, seed=2)
    path = _write(tmp_path / "c.npz", "binary", y, [proba])
    losses = -np.log(proba[np.arange(y.size), y])
    se, _ = spread.test_metric_se(path, "nll")
    assert np.isfinite(se) and se == pytest.approx(losses.std(ddof=1) / math.sqrt(y.size), rel=0.10)

    rng = np.random.default_rng(3)
    truth = rng.normal(50.0, 10.0, size=1500)
    predicted = truth + rng.standard_t(5, size=truth.size)
    path = _write(tmp_path / "r.npz", "regression", truth, [predicted])
    squared = (predicted.astype(np.float32).astype(np.float64) - truth) ** 2
    se, basis = spread.test_metric_se(path, "mse")
    assert se == pytest.approx(squared.std(ddof=1) / math.sqrt(truth.size), rel=0.10)
    assert basis == "bootstrap, 2000 resamples of 1500 test rows"  # no classes to stratify on
    rmse_se, _ = spread.test_metric_se(path, "rmse")  # delta method: SE(mse) / (2 rmse)
    assert rmse_se == pytest.approx(se / (2 * math.sqrt(squared.mean())), rel=0.05)
    assert spread.test_metric_se(path, "r2_pct")[0] > 0


def _resample_metrics(task: str, y: np.ndarray, outputs: np.ndarray, rows: np.ndarray) -> dict[str, float]:
    if task == "regression":
        return compute_metrics(task, y[rows], y_pred=outputs[rows])
    return compute_metrics(task, y[rows], proba=outputs[rows], optional=("balanced_accuracy_pct",))


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_each_resample_scores_what_compute_metrics_scores_on_the_drawn_rows(task):
    """The weighted forms are the project's metrics: on a resample drawn as row indices (ties in
    the scores included), they equal compute_metrics on those rows."""
    rng = np.random.default_rng(4)
    n = 300
    if task == "regression":
        y = rng.normal(size=n) * 4 + 20
        outputs = (y + rng.normal(size=n)).astype(np.float32)
    else:
        k = 2 if task == "binary" else 4
        y = np.sort(rng.integers(0, k, size=n))  # grouped by class, as the module orders them
        logits = np.round(rng.normal(size=(n, k)), 1)  # coarse: many tied scores
        logits[np.arange(n), y] += 1.0
        outputs = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)
    predictions = job_predictions(task, 0, np.arange(n), y, [outputs])
    terms = spread._RowTerms(predictions, 0)
    for draw in range(3):
        if task == "regression":
            rows = rng.integers(0, n, size=n)
        else:  # within each class, as many rows as it has
            rows = np.concatenate([rng.choice(np.flatnonzero(y == c), size=(y == c).sum()) for c in np.unique(y)])
        counts = np.bincount(rows, minlength=n).astype(np.float64)[:, None]
        expected = _resample_metrics(task, y, predictions.outputs[0], rows)
        for metric, value in expected.items():
            assert terms.metric(metric, counts)[0] == pytest.approx(value, rel=1e-9, abs=1e-9), (draw, metric)


def test_the_se_is_deterministic_for_a_seed(tmp_path):
    y, proba = _binary(400, seed=5)
    path = _write(tmp_path / "p.npz", "binary", y, [proba])
    first = spread.test_metric_se(path, "nll", seed=7)
    assert spread.test_metric_se(path, "nll", seed=7) == first
    assert spread.test_metric_se(path, "nll", seed=8)[0] != first[0]
    assert spread.test_metric_se(path, "nll", seed=7, resamples=500)[1].startswith("stratified bootstrap, 500 ")


def test_runs_of_one_split_are_scored_on_the_same_rows_and_averaged(tmp_path):
    """The job's metric is the runs' mean: two identical runs have the SE of one; a second,
    different run narrows nothing it should not (its rows are drawn together with the first's)."""
    y, proba = _binary(600, seed=6)
    one = spread.test_metric_se(_write(tmp_path / "one.npz", "binary", y, [proba]), "auroc")
    twice = spread.test_metric_se(_write(tmp_path / "two.npz", "binary", y, [proba, proba]), "auroc")
    assert twice[0] == pytest.approx(one[0], rel=1e-12)
    assert twice[1] == "stratified bootstrap, 2000 resamples of 600 test rows, mean of 2 runs each"


def test_no_se_where_the_metric_does_not_apply_or_the_file_is_not_there(tmp_path):
    y, proba = _binary(100)
    path = _write(tmp_path / "p.npz", "binary", y, [proba])
    assert spread.test_metric_se(path, "rmse") is None  # not a classification metric
    assert spread.test_metric_se(tmp_path / "absent.npz", "nll") is None  # a job from before predictions were kept
    single = _write(tmp_path / "single.npz", "binary", np.ones(50, dtype=np.int64), [proba[:50]])
    assert spread.test_metric_se(single, "auroc") is None  # one class: AUROC is undefined
    assert spread.test_metric_se(single, "accuracy_pct")[0] >= 0
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        spread.test_metric_se(path, "f1")


def _npz(path: Path, **arrays) -> Path:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path.write_bytes(buffer.getvalue())
    return path


def test_a_corrupt_or_non_finite_file_is_one_error_naming_it(tmp_path):
    y, proba = _binary(40)
    good = {
        "version": np.asarray(1),
        "task": np.asarray("binary"),
        "fold": np.asarray(0),
        "row_id": np.arange(40),
        "y_true": y,
        "proba": proba[None].astype(np.float32),
    }
    nan = good["proba"].copy()
    nan[0, 3, 0] = np.nan
    cases = {
        "garbage.npz": lambda p: p.write_bytes(b"not a zip file"),
        "truncated.npz": lambda p: p.write_bytes(_npz(tmp_path / "whole.npz", **good).read_bytes()[:200]),
        "nan.npz": lambda p: _npz(p, **{**good, "proba": nan}),
        "no_labels.npz": lambda p: _npz(p, **{k: v for k, v in good.items() if k != "y_true"}),
        "pickled.npz": lambda p: _npz(p, **{**good, "row_id": np.array([object()] * 40, dtype=object)}),
        "not_probabilities.npz": lambda p: _npz(p, **{**good, "proba": good["proba"] * 2}),
        "short.npz": lambda p: _npz(p, **{**good, "y_true": y[:10]}),
    }
    for name, make in cases.items():
        path = tmp_path / name
        make(path)
        with pytest.raises(PredictionsFileError) as caught:
            spread.test_metric_se(path, "nll")
        assert isinstance(caught.value, InputError) and str(path) in str(caught.value), name
        assert "\n" not in str(caught.value)
    assert read_predictions(_npz(tmp_path / "fine.npz", **good)).n_rows == 40  # the same arrays, unspoilt


def test_ten_thousand_rows_take_under_a_second_of_cpu(tmp_path):
    y, proba = _binary(10_000, seed=9)
    path = _write(tmp_path / "p.npz", "binary", y, [proba])
    spread.test_metric_se(path, "auroc", resamples=10)  # imports, caches
    started = time.process_time()
    spread.test_metric_se(path, "auroc")
    # 1 s on an idle core; the bound leaves room for a machine busy with other work
    assert time.process_time() - started < 3.0


def test_the_file_keeps_row_ids_labels_and_each_run_compactly(tmp_path):
    y, proba = _binary(1000, seed=10)
    other = np.roll(proba, 1, axis=0)
    path = _write(tmp_path / "p.npz", "binary", y, [proba, other])
    with np.load(path, allow_pickle=False) as stored:
        assert stored["proba"].dtype == np.float32 and stored["proba"].shape == (2, 1000, 2)
        assert stored["row_id"].tolist() == list(range(0, 3000, 3)) and str(stored["task"]) == "binary"
    read = read_predictions(path)
    expected = [compute_metrics("binary", y, proba=p.astype(np.float32))["nll"] for p in (proba, other)]
    assert read.metrics()["nll"] == pytest.approx(np.mean(expected), rel=1e-12)
    assert path.stat().st_size < 20_000  # 2 runs x 1000 rows x 2 float32 are 16 kB before compression
    assert stats.pearsonr(read.outputs[0, :, 1], proba[:, 1])[0] > 0.999999


def test_every_resample_keeps_each_class_as_many_rows_as_it_has():
    """Stratified: no resample loses a class (an AUROC without positives is undefined) or moves
    rows between classes; within a class, rows are drawn with replacement."""
    y = np.array([0] * 95 + [1] * 5)
    predictions = job_predictions("binary", 0, np.arange(100), y, [np.tile([0.5, 0.5], (100, 1))])
    _, strata = spread._by_stratum(predictions)
    counts = spread._resample_counts(np.random.default_rng(0), strata, 100, 400)
    assert (counts[:95].sum(axis=0) == 95).all() and (counts[95:].sum(axis=0) == 5).all()
    assert (counts[95:].max(axis=0) > 1).mean() > 0.5  # with replacement: a positive drawn twice
