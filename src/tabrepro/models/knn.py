"""k-nearest neighbours (scikit-learn), the NPT "k-NN" baseline.

`n_neighbors` is capped at the number of training rows: the medium-data space reaches 1000
neighbours, more than a small fold may hold, and scikit-learn refuses such a query. The effective
value is recorded in `fit_info_`. Nothing is random, so the seed is unused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.models.base import EstimatorModel
from tabrepro.models.hyperparameters import THREADS, Hyperparameters, estimator_library


class KNNModel(EstimatorModel):
    name = "knn"

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        return Hyperparameters(library=estimator_library(cls), owned={"n_jobs": THREADS})

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

        return KNeighborsClassifier, KNeighborsRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {"n_jobs": self.n_jobs}

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        params["n_neighbors"] = min(int(params.get("n_neighbors", 5)), X_train.shape[0])
        self.fit_info_["n_neighbors"] = params["n_neighbors"]
        return params
