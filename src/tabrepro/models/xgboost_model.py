"""XGBoost through its scikit-learn wrapper (NPT Table 16 space; BiSHop Table A.9 space).

Histogram tree building on the CPU is deterministic for a fixed seed and thread count. No early
stopping: the NPT sweep tunes n_estimators directly. The library is imported on first fit so that
importing the model registry stays cheap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.models.base import EstimatorModel


class XGBoostModel(EstimatorModel):
    name = "xgboost"

    def _estimator_classes(self) -> tuple[type, type]:
        from xgboost import XGBClassifier, XGBRegressor

        return XGBClassifier, XGBRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {"random_state": self.seed, "n_jobs": self.n_jobs, "verbosity": 0}

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        params.setdefault("tree_method", "hist")
        return params

    def _fit_kwargs(self) -> dict[str, Any]:
        return {"verbose": False}
