"""tabrepro.features: the layout the preprocessor produces, and its one rule for category codes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabrepro.data.table import ColumnSpec, TableSchema
from tabrepro.features import MISSING_CODE, Feature, FeatureLayout, categorical, continuous
from tabrepro.preprocessing import Preprocessor


def _frame() -> tuple[pd.DataFrame, TableSchema]:
    frame = pd.DataFrame(
        {
            "x": [0.5, 1.0, np.nan, 2.0, 3.0, 4.0],
            "colour": ["red", None, "blue", "red", None, "green"],  # missing in training
            "size": ["S", "L", "S", "M", None, "L"],  # missing only outside training
            "y": ["a", "b", "a", "b", "a", "b"],
        }
    )
    schema = TableSchema(
        dataset="t",
        task="binary",
        target="y",
        columns=[
            ColumnSpec("x", "continuous"),
            ColumnSpec("colour", "categorical", ["blue", "green", "red"]),
            ColumnSpec("size", "categorical", ["L", "M", "S"]),
            ColumnSpec("y", "categorical", ["a", "b"]),
        ],
        n_rows=6,
    )
    return frame, schema


def test_the_preprocessor_describes_what_it_produced():
    frame, schema = _frame()
    pre = Preprocessor().fit(frame, schema, [0, 1, 2, 3])
    layout = pre.feature_layout
    X = pre.transform(frame)
    assert layout.n_columns == X.shape[1] == len(pre.feature_names_out)
    assert layout.names == ("x", "colour", "size")
    assert layout.groups == (("continuous", 1), ("categorical", 4), ("categorical", 3))
    assert layout.category_counts == (4, 3) and layout.embedding_sizes == [5, 4]
    codes = layout.category_codes(X)
    # colour: blue, green, red, then the missing column seen in training (a category of its own)
    assert codes[:, 0].tolist() == [2, 3, 0, 2, 3, 1]
    # size: a missing value never seen in training has no column: the missing code
    assert codes[:, 1].tolist() == [2, 0, 2, 1, MISSING_CODE, 0]
    assert layout.embedding_codes(X)[:, 1].tolist() == [2, 0, 2, 1, 3, 0]
    decoded = layout.decode(X)
    assert np.isnan(decoded[4, 2]) and decoded[0, 1] == 2.0
    np.testing.assert_array_equal(layout.continuous_values(X)[:, 0], X[:, 0])


def test_an_indicator_column_has_two_categories_and_nan_is_missing():
    layout = FeatureLayout.from_groups([("categorical", 1), ("continuous", 1)])
    assert layout.features[0] == Feature("categorical", 2, "", 1)
    X = np.array([[1.0, 0.3], [0.0, 0.1], [np.nan, 0.2]])
    assert layout.category_codes(X)[:, 0].tolist() == [1, 0, MISSING_CODE]
    assert layout.embedding_codes(X)[:, 0].tolist() == [1, 0, 2]
    with pytest.raises(ValueError, match="values other than 0/1"):
        layout.category_codes(np.array([[0.5, 0.0]]))


def test_layout_shape_checks_and_selection():
    layout = FeatureLayout.from_groups([("continuous", 1), ("categorical", 3), ("categorical", 2)], names="abc")
    assert layout.starts == (0, 1, 4) and layout.n_columns == 6
    assert layout.continuous_columns.tolist() == [0]
    assert layout.select([2, 0]).groups == (("categorical", 2), ("continuous", 1))
    with pytest.raises(ValueError, match="describes 6 columns, X has 5"):
        layout.decode(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="one column"):
        FeatureLayout.from_groups([("continuous", 2)])
    with pytest.raises(ValueError, match="unknown feature kind"):
        FeatureLayout.from_groups([("ordinal", 2)])
    with pytest.raises(ValueError, match="n_categories >= 2"):
        categorical(1)
    assert FeatureLayout.all_continuous(3).groups == (("continuous", 1),) * 3
    assert continuous("t").one_hot_width == 1 and categorical(4).one_hot_width == 4
