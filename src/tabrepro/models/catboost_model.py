"""CatBoost (NPT Table 16 space; BiSHop Table A.6 space).

CatBoost reads the NPT names `n_estimators` and `max_depth` as aliases of `iterations` and
`depth`. `bagging_temperature` only acts under Bayesian bootstrap, while CatBoost's CPU default is
MVS, which ignores it without a word; so when a space sets bagging_temperature and no
bootstrap_type we select Bayesian. Nothing is written to disk (no catboost_info directory) and
nothing is logged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.models.base import EstimatorModel


class CatBoostModel(EstimatorModel):
    name = "catboost"

    def _estimator_classes(self) -> tuple[type, type]:
        from catboost import CatBoostClassifier, CatBoostRegressor

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
        return params
