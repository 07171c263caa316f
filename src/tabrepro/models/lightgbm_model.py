"""LightGBM through its scikit-learn wrapper (NPT Table 16 space; BiSHop Table A.7 space).

Determinism: `deterministic=True` with row-wise histograms gives identical models for a fixed
seed and thread count. `subsample` (bagging_fraction) is ignored by LightGBM unless bagging is
switched on with `subsample_freq`; when a space sets subsample < 1 and no subsample_freq we bag
every iteration (subsample_freq=1), which is what a tuned "subsample" is meant to do.
`cat_encoding: native` (BiSHop App. A.3) passes label-encoded categorical columns as LightGBM's
`categorical_feature` (tabrepro.models.native_categoricals).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.features import FeatureLayout
from tabrepro.models.library_log import lightgbm_logging
from tabrepro.models.native_categoricals import NativeCategoricalModel, cat_encoding_rule
from tabrepro.models.rules import (
    FRACTION_OPEN_LOW,
    LOGGING,
    SEED,
    THREADS,
    Hyperparameters,
    estimator_library,
    integer,
    number,
)


class LightGBMModel(NativeCategoricalModel):
    name = "lightgbm"
    cost_family = "boosting_hist"  # histogram boosting, priced as XGBoost

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """The estimator's named keywords only (LightGBM takes any other keyword and only warns
        about an unknown one). Ranges: LightGBM's parameter documentation."""
        return Hyperparameters(
            library=estimator_library(cls),
            owned={
                "random_state": SEED,
                "n_jobs": THREADS,
                "verbosity": LOGGING,
                "verbose": LOGGING,
                "deterministic": "always on, for bit-identical results",
                "force_row_wise": "always on, for bit-identical results",
            },
            reads={
                "cat_encoding": cat_encoding_rule(),
                "num_leaves": integer(1, 131072, closed="right"),
                "learning_rate": number(0.0, None, closed="neither"),
                "n_estimators": integer(0),
                "subsample": FRACTION_OPEN_LOW,
                "colsample_bytree": FRACTION_OPEN_LOW,
                "min_child_samples": integer(0),
                "min_child_weight": number(0.0),
                "min_split_gain": number(0.0),
                "reg_alpha": number(0.0),
                "reg_lambda": number(0.0),
            },
        )

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from lightgbm import LGBMClassifier, LGBMRegressor  # deferred: loads lightgbm

        return LGBMClassifier, LGBMRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {
            "random_state": self.seed,
            "n_jobs": self.n_jobs,
            "verbosity": 0,  # warnings on: each reaches the job's log once (library_log)
            "deterministic": True,
            "force_row_wise": True,
        }

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        with lightgbm_logging():
            super()._fit(X_train, y_train, X_val, y_val)

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        if float(params.get("subsample", 1.0)) < 1.0:
            params.setdefault("subsample_freq", 1)
        return params

    def _categorical_fit_kwargs(self, layout: FeatureLayout) -> dict[str, Any]:
        return {"categorical_feature": list(layout.categorical_features)}
