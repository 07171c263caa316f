"""XGBoost through its scikit-learn wrapper (NPT Table 16 space; BiSHop Table A.9 space).

Histogram tree building on the CPU is deterministic for a fixed seed and thread count. No early
stopping: the NPT sweep tunes n_estimators directly. The library is imported on first fit so that
importing the model registry stays cheap.
"""

from __future__ import annotations

import numpy as np

from tabrepro.models.base import TabularModel


class XGBoostModel(TabularModel):
    name = "xgboost"

    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        from xgboost import XGBClassifier, XGBRegressor

        kwargs = self._estimator_kwargs(
            {"random_state": self.seed, "n_jobs": self.n_jobs, "verbosity": 0}
        )
        kwargs.setdefault("tree_method", "hist")
        estimator_class = XGBClassifier if self.is_classifier else XGBRegressor
        self._estimator = estimator_class(**kwargs).fit(X_train, y_train, verbose=False)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
