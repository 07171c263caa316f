"""CatBoost (NPT Table 16 space; BiSHop Table A.6 space).

CatBoost reads the NPT names `n_estimators` and `max_depth` as aliases of `iterations` and
`depth`. `bagging_temperature` only acts under Bayesian bootstrap, while CatBoost's CPU default is
MVS, which ignores it without a word; so when a space sets bagging_temperature and no
bootstrap_type we select Bayesian, and refuse it beside any other bootstrap_type. Nothing is
written to disk (no catboost_info directory) and nothing is logged: CatBoost has no warnings-only
level, and the conflicting options we know of raise a CatBoostError (one line, see training).
`cat_encoding: native` (BiSHop App. A.3) hands CatBoost label-encoded categorical columns as
`cat_features` (tabrepro.models.native_categoricals); CatBoost refuses NaN there, so a missing
entry is one more category, and the matrix goes in as a frame of integer and float columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.features import FeatureLayout
from tabrepro.models.native_categoricals import NativeCategoricalModel, cat_encoding_rule
from tabrepro.models.rules import (
    FRACTION_OPEN_LOW,
    LOGGING,
    SEED,
    THREADS,
    Hyperparameters,
    estimator_library,
    integer,
    nullable,
    number,
)


class CatBoostModel(NativeCategoricalModel):
    name = "catboost"
    cost_family = "catboost"

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """CatBoost's signature has names but no types; the types and ranges of the names the
        papers tune come from CatBoost's documentation."""
        positive_int, non_negative = nullable(integer(1)), nullable(number(0.0))
        files = "tabrepro writes no CatBoost files"
        return Hyperparameters(
            library=estimator_library(cls),
            owned={
                "random_seed": SEED,
                "random_state": SEED,
                "thread_count": THREADS,
                "logging_level": LOGGING,
                "verbose": LOGGING,
                "silent": LOGGING,
                "allow_writing_files": files,
                "train_dir": files,
                "cat_features": "set from cat_encoding (one_hot or native)",
            },
            reads={
                "cat_encoding": cat_encoding_rule(),
                "depth": nullable(integer(1, 16)),
                "max_depth": nullable(integer(1, 16)),
                "iterations": positive_int,
                "n_estimators": positive_int,
                "learning_rate": nullable(number(0.0, None, closed="neither")),
                "l2_leaf_reg": non_negative,
                "bagging_temperature": non_negative,
                "leaf_estimation_iterations": positive_int,
                "border_count": nullable(integer(1, 65535)),
                "subsample": nullable(FRACTION_OPEN_LOW),
                "rsm": nullable(FRACTION_OPEN_LOW),
            },
        )

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from catboost import CatBoostClassifier, CatBoostRegressor  # deferred: loads catboost

        return CatBoostClassifier, CatBoostRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {
            "random_seed": self.seed,
            "thread_count": self.n_jobs,
            "logging_level": "Silent",
            "allow_writing_files": False,
        }

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        if "bagging_temperature" in params:
            params.setdefault("bootstrap_type", "Bayesian")
            if params["bootstrap_type"] != "Bayesian":  # CatBoost would ignore it without a word
                raise ValueError(
                    f"catboost: bagging_temperature only acts with bootstrap_type Bayesian, "
                    f"got bootstrap_type {params['bootstrap_type']!r}"
                )
        return params

    def _categorical_kwargs(self, layout: FeatureLayout) -> dict[str, Any]:
        return {"cat_features": list(layout.categorical_features)}

    def _native_matrix(self, layout: FeatureLayout, X: np.ndarray) -> Any:
        """Continuous features as float columns, categorical ones as integer codes (missing last)."""
        import pandas as pd  # deferred: loads pandas

        columns: dict[str, np.ndarray] = {}
        codes = layout.embedding_codes(X)
        categorical = {j: k for k, j in enumerate(layout.categorical_features)}
        for j, start in enumerate(layout.starts):
            columns[f"f{j}"] = codes[:, categorical[j]] if j in categorical else X[:, start]
        return pd.DataFrame(columns)
