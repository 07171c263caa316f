"""scikit-learn's GradientBoostingClassifier/Regressor, the NPT "Gradient Boosting" baseline.

The NPT sweep tunes learning_rate, max_depth and n_estimators and uses no early stopping
(n_estimators is itself tuned), so neither do we. This estimator has no thread pool: `n_jobs` only
caps BLAS/OpenMP threads through the base class.
"""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

from tabrepro.models.base import TabularModel


class GradientBoostingModel(TabularModel):
    name = "gradient_boosting"

    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        kwargs = self._estimator_kwargs({"random_state": self.seed, "verbose": 0})
        estimator_class = (
            GradientBoostingClassifier if self.is_classifier else GradientBoostingRegressor
        )
        self._estimator = estimator_class(**kwargs).fit(X_train, y_train)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
