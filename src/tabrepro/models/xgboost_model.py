"""XGBoost through its scikit-learn wrapper (NPT Table 16 space; BiSHop Table A.9 space).

Histogram tree building on the CPU is deterministic for a fixed seed and thread count. No early
stopping: the NPT sweep tunes n_estimators directly. `cat_encoding: native` (BiSHop App. A.3)
gives XGBoost label-encoded categorical columns marked as such (`enable_categorical`, feature
type "c"; tabrepro.models.native_categoricals). The library is imported on first fit so that
importing the model registry stays cheap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.features import FeatureLayout
from tabrepro.models.library_log import relayed_warnings
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

CATEGORICAL = "set from cat_encoding (one_hot or native)"


class XGBoostModel(NativeCategoricalModel):
    name = "xgboost"
    cost_family = "boosting_hist"

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """The estimator's named keywords only: XGBoost also takes any other keyword and ignores
        an unknown one, so a name outside its signature is refused here. Ranges: XGBoost's
        parameter documentation (they are not in its signature)."""
        non_negative = nullable(number(0.0))
        return Hyperparameters(
            library=estimator_library(cls),
            owned={
                "random_state": SEED,
                "n_jobs": THREADS,
                "verbosity": LOGGING,
                "enable_categorical": CATEGORICAL,
                "feature_types": CATEGORICAL,
            },
            reads={
                "cat_encoding": cat_encoding_rule(),
                "max_depth": nullable(integer(0)),
                "learning_rate": nullable(number(0.0, 1.0)),
                "subsample": nullable(FRACTION_OPEN_LOW),
                "colsample_bytree": nullable(FRACTION_OPEN_LOW),
                "colsample_bylevel": nullable(FRACTION_OPEN_LOW),
                "colsample_bynode": nullable(FRACTION_OPEN_LOW),
                "min_child_weight": non_negative,
                "gamma": non_negative,
                "max_delta_step": non_negative,
                "reg_alpha": non_negative,
                "reg_lambda": non_negative,
                "n_estimators": nullable(integer(1)),
            },
        )

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from xgboost import XGBClassifier, XGBRegressor  # deferred: loads xgboost

        return XGBClassifier, XGBRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        # Warning level: an ignored parameter is reported (once, in the job's log; library_log).
        return {"random_state": self.seed, "n_jobs": self.n_jobs, "verbosity": 1}

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        with relayed_warnings("xgboost"):
            super()._fit(X_train, y_train, X_val, y_val)

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        params.setdefault("tree_method", "hist")
        return params

    def _fit_kwargs(self) -> dict[str, Any]:
        return {"verbose": False}

    def _categorical_kwargs(self, layout: FeatureLayout) -> dict[str, Any]:
        types = ["c" if feature.is_categorical else "q" for feature in layout.features]
        return {"enable_categorical": True, "feature_types": types}
