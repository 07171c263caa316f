"""CatBoost (NPT Table 16 space; BiSHop Table A.6 space).

CatBoost reads the NPT names `n_estimators` and `max_depth` as aliases of `iterations` and
`depth`. `bagging_temperature` only acts under Bayesian bootstrap, while CatBoost's CPU default is
MVS, which ignores it without a word; so when a space sets bagging_temperature and no
bootstrap_type we select Bayesian. Nothing is written to disk (no catboost_info directory) and
nothing is logged.
"""

from __future__ import annotations

import numpy as np

from tabrepro.models.base import TabularModel


class CatBoostModel(TabularModel):
    name = "catboost"

    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        from catboost import CatBoostClassifier, CatBoostRegressor

        params = dict(self.params)
        if "bagging_temperature" in params:
            params.setdefault("bootstrap_type", "Bayesian")
        kwargs = self._estimator_kwargs(
            {
                "random_seed": self.seed,
                "thread_count": self.n_jobs,
                "logging_level": "Silent",
                "allow_writing_files": False,
            },
            params,
        )
        estimator_class = CatBoostClassifier if self.is_classifier else CatBoostRegressor
        self._estimator = estimator_class(**kwargs).fit(X_train, y_train)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
