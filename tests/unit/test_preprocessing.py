"""Preprocessing must learn from training rows only and keep widths fixed by the schema."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabrepro.data.table import ColumnSpec, TableSchema
from tabrepro.preprocessing import PreprocessingError, Preprocessor, TargetEncoder

TRAIN = np.arange(6)
TEST = np.arange(6, 9)


def _schema(task: str = "multiclass") -> TableSchema:
    target = (
        ColumnSpec("y", "continuous")
        if task == "regression"
        else ColumnSpec("y", "categorical", ["a", "b", "c"] if task == "multiclass" else ["no", "yes"])
    )
    return TableSchema(
        dataset="toy",
        task=task,
        target="y",
        columns=[
            ColumnSpec("x1", "continuous"),
            ColumnSpec("x2", "continuous"),
            ColumnSpec("colour", "categorical", ["blue", "green", "red"]),
            ColumnSpec("size", "categorical", ["L", "M", "S"]),
            target,
        ],
        n_rows=9,
    )


def _frame(task: str = "multiclass") -> pd.DataFrame:
    targets = {
        "multiclass": ["a", "b", "a", "b", "a", "b", "c", "c", "a"],  # "c" only outside training
        "binary": ["no", "yes", "no", "yes", "no", "yes", "no", "yes", "no"],
        "regression": [10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 1000.0, -5.0, 3.0],
    }
    return pd.DataFrame(
        {
            "x1": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0, 200.0, 300.0],
            "x2": [0.0, np.nan, 2.0, 2.0, np.nan, 4.0, 7.0, np.nan, 9.0],
            "colour": ["red", "blue", None, "red", "blue", "red", "green", None, "red"],
            "size": ["S", "M", "L", "S", "M", "L", "S", None, "M"],
            "y": targets[task],
        }
    )


def test_continuous_standardised_with_training_statistics() -> None:
    frame = _frame()
    X = Preprocessor().fit(frame, _schema(), TRAIN).transform(frame)
    x1 = np.array([1, 2, 3, 4, 5, 6], dtype=float)
    expected = (frame["x1"].to_numpy() - x1.mean()) / x1.std()
    np.testing.assert_allclose(X[:, 0], expected, rtol=1e-6)
    assert X[TRAIN, 0].mean() == pytest.approx(0.0, abs=1e-6)


def test_missing_continuous_becomes_training_mean_without_indicator() -> None:
    frame = _frame()
    pre = Preprocessor().fit(frame, _schema(), TRAIN)
    X = pre.transform(frame)
    assert X[1, 1] == 0.0 and X[4, 1] == 0.0 and X[7, 1] == 0.0  # mean -> 0 after scaling
    observed = np.array([0.0, 2.0, 2.0, 4.0])
    assert X[0, 1] == pytest.approx((0.0 - observed.mean()) / observed.std())
    assert not any(name.startswith("x2=") for name in pre.feature_names_out)


def test_fit_ignores_non_training_rows() -> None:
    frame = _frame()
    changed = frame.copy()
    changed.loc[TEST, "x1"] = [-1e6, 5e6, 0.0]
    changed.loc[TEST, "x2"] = [np.nan, 1e9, -3.0]
    changed.loc[TEST, "size"] = [None, None, None]  # missing only outside training
    a = Preprocessor().fit(frame, _schema(), TRAIN)
    b = Preprocessor().fit(changed, _schema(), TRAIN)
    assert a.feature_names_out == b.feature_names_out
    np.testing.assert_array_equal(a.transform(frame), b.transform(frame))


def test_one_hot_widths_follow_schema_levels_and_training_missingness() -> None:
    frame = _frame()
    pre = Preprocessor().fit(frame, _schema(), TRAIN)
    # colour: 3 levels + missing indicator (None in training); size: 3 levels, no indicator.
    assert pre.n_features_out == 2 + 4 + 3
    assert pre.feature_names_out[2:] == [
        "colour=blue",
        "colour=green",
        "colour=red",
        "colour=<missing>",
        "size=L",
        "size=M",
        "size=S",
    ]
    X = pre.transform(frame)
    colour = X[:, 2:6]
    np.testing.assert_array_equal(colour.sum(axis=1), np.ones(9))
    assert colour[2].tolist() == [0, 0, 0, 1]  # missing
    assert colour[6].tolist() == [0, 1, 0, 0]  # "green" never seen in training still has a column
    size = X[:, 6:9]
    assert size[7].tolist() == [0, 0, 0]  # missing outside training, no indicator: all zeros


def test_transform_output_dtype_and_order_of_rows() -> None:
    frame = _frame()
    pre = Preprocessor().fit(frame, _schema(), TRAIN)
    X = pre.transform(frame)
    assert X.dtype == np.float32 and X.shape == (9, 9)
    np.testing.assert_array_equal(pre.transform(frame.iloc[TEST]), X[TEST])
    assert Preprocessor(np.float64).fit_transform(frame, _schema(), TRAIN).dtype == np.float64


def test_unknown_level_and_unfitted_use_are_errors() -> None:
    frame = _frame()
    pre = Preprocessor()
    with pytest.raises(PreprocessingError, match="not fitted"):
        pre.transform(frame)
    pre.fit(frame, _schema(), TRAIN)
    bad = frame.copy()
    bad.loc[0, "colour"] = "purple"
    with pytest.raises(PreprocessingError, match="colour"):
        pre.transform(bad)


def test_classification_target_uses_schema_levels() -> None:
    frame = _frame("multiclass")
    encoder = TargetEncoder().fit(frame, _schema("multiclass"), TRAIN)
    assert encoder.n_classes == 3  # "c" is absent from the training rows
    y = encoder.transform(frame)
    assert y.dtype == np.int64
    assert y.tolist() == [0, 1, 0, 1, 0, 1, 2, 2, 0]
    assert list(encoder.inverse_transform(y[:3])) == ["a", "b", "a"]

    binary = TargetEncoder().fit(_frame("binary"), _schema("binary"), TRAIN)
    assert binary.n_classes == 2
    assert binary.transform(_frame("binary")["y"]).tolist()[:2] == [0, 1]


def test_regression_target_round_trip_and_training_statistics() -> None:
    frame = _frame("regression")
    encoder = TargetEncoder().fit(frame, _schema("regression"), TRAIN)
    train_values = np.array([10.0, 12.0, 14.0, 16.0, 18.0, 20.0])
    assert encoder.mean == pytest.approx(train_values.mean())
    assert encoder.scale == pytest.approx(train_values.std())
    assert encoder.n_classes is None
    y = encoder.transform(frame)
    assert y[TRAIN].mean() == pytest.approx(0.0) and y[TRAIN].std() == pytest.approx(1.0)
    np.testing.assert_allclose(encoder.inverse_transform(y), frame["y"].to_numpy())

    changed = frame.copy()
    changed.loc[TEST, "y"] = [1e9, -1e9, 0.0]
    other = TargetEncoder().fit(changed, _schema("regression"), TRAIN)
    assert (other.mean, other.scale) == (encoder.mean, encoder.scale)


def test_missing_target_is_an_error() -> None:
    frame = _frame("binary")
    frame.loc[7, "y"] = None
    encoder = TargetEncoder().fit(frame, _schema("binary"), TRAIN)
    with pytest.raises(PreprocessingError, match="missing"):
        encoder.transform(frame)
