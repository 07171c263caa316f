"""k-nearest neighbours (scikit-learn), the NPT "k-NN" baseline.

`n_neighbors` is capped at the number of training rows: the medium-data space reaches 1000
neighbours, more than a small fold may hold, and scikit-learn refuses such a query. The effective
value is recorded in `fit_info_`. Nothing is random, so the seed is unused.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from tabrepro.models.base import TabularModel


class KNNModel(TabularModel):
    name = "knn"

    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        params = dict(self.params)
        requested = int(params.get("n_neighbors", 5))
        params["n_neighbors"] = min(requested, X_train.shape[0])
        self.fit_info_["n_neighbors"] = params["n_neighbors"]
        kwargs = self._estimator_kwargs({"n_jobs": self.n_jobs}, params)
        estimator_class = KNeighborsClassifier if self.is_classifier else KNeighborsRegressor
        self._estimator = estimator_class(**kwargs).fit(X_train, y_train)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
