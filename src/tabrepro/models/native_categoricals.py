"""Categorical features for the boosting libraries: one-hot columns, or their own handling.

The preprocessor one-hot encodes every categorical feature (tabrepro.preprocessing). With the
search-space key `cat_encoding: native` a boosting wrapper turns each one-hot group back into one
label-encoded column (the category code of `FeatureLayout`) and tells its library which columns
are categorical, so that the trees split on categories themselves: BiSHop's App. A.3 ("For tree
based method, we employ the build in categorical embedding method"). `one_hot` (the default, and
what NPT's baselines ran) passes the matrix as it is.

A missing entry stays missing for XGBoost and LightGBM (NaN); CatBoost refuses NaN in a
categorical column, so there it is one more category (the code after the last one). A matrix
without a feature layout, or without categorical features, is passed unchanged either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.features import FeatureLayout
from tabrepro.models.estimator import EstimatorModel
from tabrepro.models.rules import Rule, options

__all__ = ["CAT_ENCODINGS", "NativeCategoricalModel", "cat_encoding_rule"]

CAT_ENCODINGS = ("one_hot", "native")
KEY = "cat_encoding"


def cat_encoding_rule() -> Rule:
    return options(*CAT_ENCODINGS)


class NativeCategoricalModel(EstimatorModel):
    """An `EstimatorModel` whose library can take categorical columns (`cat_encoding`).

    A wrapper says how its library is told which columns are categorical
    (`_categorical_kwargs`, `_categorical_fit_kwargs`) and, where it must, how the encoded matrix
    is handed over (`_native_matrix`)."""

    _layout: FeatureLayout | None = None

    def _categorical_kwargs(self, layout: FeatureLayout) -> dict[str, Any]:
        """Constructor arguments that mark the layout's categorical features."""
        return {}

    def _categorical_fit_kwargs(self, layout: FeatureLayout) -> dict[str, Any]:
        """Arguments of the estimator's `fit` that mark the layout's categorical features."""
        return {}

    def _native_matrix(self, layout: FeatureLayout, X: np.ndarray) -> Any:
        """One column per feature: a continuous value, a categorical code with NaN for missing."""
        return layout.decode(X).astype(X.dtype, copy=False)

    def _encoded(self, X: np.ndarray) -> Any:
        return X if self._layout is None else self._native_matrix(self._layout, X)

    def _native_layout(self, encoding: Any, n_columns: int) -> FeatureLayout | None:
        """The layout to label-encode by, or None where the one-hot matrix goes in unchanged."""
        if encoding not in CAT_ENCODINGS:
            raise ValueError(f"{self.name}: {KEY} must be one of {', '.join(CAT_ENCODINGS)}, got {encoding!r}")
        if encoding == "one_hot":
            return None
        layout = self.context.layout_for(n_columns)
        return layout if layout.categorical_features else None

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        params = dict(self.params)
        self._layout = self._native_layout(params.pop(KEY, "one_hot"), X_train.shape[1])
        params = self._translate_params(params, X_train)
        fit_kwargs = self._fit_kwargs()
        if self._layout is not None:
            params.update(self._categorical_kwargs(self._layout))
            fit_kwargs.update(self._categorical_fit_kwargs(self._layout))
        self._estimator = self._new_estimator(params).fit(self._encoded(X_train), y_train, **fit_kwargs)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(self._encoded(X))

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(self._encoded(X))
