"""Random forest (scikit-learn), as tuned in NPT App. E.2 (Table 16 and friends).

Translations: `max_features: all` means every feature (scikit-learn spells it 1.0). Criterion names
are taken from the search space as they are (classification: gini/entropy/log_loss; regression:
squared_error/absolute_error/...), so a space written for the wrong task fails loudly in
scikit-learn's own parameter validation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.models.estimator import EstimatorModel
from tabrepro.models.rules import LOGGING, SEED, THREADS, Hyperparameters, estimator_library, options


def translate_max_features(value: Any) -> Any:
    """The papers' `all` is scikit-learn's 1.0 (a fraction of the features)."""
    return 1.0 if value == "all" else value


class RandomForestModel(EstimatorModel):
    name = "random_forest"
    cost_family = "random_forest"

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        return Hyperparameters(
            library=estimator_library(cls),
            owned={"random_state": SEED, "n_jobs": THREADS, "verbose": LOGGING},
            translates={"max_features": options("all")},
        )

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # deferred: loads sklearn

        return RandomForestClassifier, RandomForestRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {"random_state": self.seed, "n_jobs": self.n_jobs, "verbose": 0}

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        if "max_features" in params:
            params["max_features"] = translate_max_features(params["max_features"])
        return params
