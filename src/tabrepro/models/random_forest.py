"""Random forest (scikit-learn), as tuned in NPT App. E.2 (Table 16 and friends).

Translations: `max_features: all` means every feature (scikit-learn spells it 1.0). Criterion names
are taken from the search space as they are (classification: gini/entropy/log_loss; regression:
squared_error/absolute_error/...), so a space written for the wrong task fails loudly in
scikit-learn's own parameter validation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from tabrepro.models.base import TabularModel


def translate_max_features(value: Any) -> Any:
    """The papers' `all` is scikit-learn's 1.0 (a fraction of the features)."""
    return 1.0 if value == "all" else value


class RandomForestModel(TabularModel):
    name = "random_forest"

    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        params = dict(self.params)
        if "max_features" in params:
            params["max_features"] = translate_max_features(params["max_features"])
        kwargs = self._estimator_kwargs(
            {"random_state": self.seed, "n_jobs": self.n_jobs, "verbose": 0}, params
        )
        estimator_class = RandomForestClassifier if self.is_classifier else RandomForestRegressor
        self._estimator = estimator_class(**kwargs).fit(X_train, y_train)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
