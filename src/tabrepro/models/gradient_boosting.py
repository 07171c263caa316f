"""scikit-learn's GradientBoostingClassifier/Regressor, the NPT "Gradient Boosting" baseline.

The NPT sweep tunes learning_rate, max_depth and n_estimators and uses no early stopping
(n_estimators is itself tuned), so neither do we. This estimator has no thread pool: `n_jobs` only
caps BLAS/OpenMP threads through the base class.
"""

from __future__ import annotations

from typing import Any

from tabrepro.models.estimator import EstimatorModel
from tabrepro.models.rules import LOGGING, SEED, Hyperparameters, estimator_library


class GradientBoostingModel(EstimatorModel):
    name = "gradient_boosting"
    cost_family = "boosting_exact"  # sorted (exact) splits, unlike the histogram boosters

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        return Hyperparameters(library=estimator_library(cls), owned={"random_state": SEED, "verbose": LOGGING})

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor  # deferred: loads sklearn

        return GradientBoostingClassifier, GradientBoostingRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {"random_state": self.seed, "verbose": 0}
