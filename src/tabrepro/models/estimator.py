"""`EstimatorModel`: a model that is one library estimator with a classifier and a regressor class
(the tree, boosting and neighbour baselines). A wrapper names its classes, the keyword arguments
tabrepro owns (seed, threads, verbosity) and any translation of the search space's names;
building, fitting and predicting are written once here. The library is imported on first fit."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from tabrepro.models.base import TabularModel

__all__ = ["EstimatorModel"]


class EstimatorModel(TabularModel):
    """A model that is one library estimator with a classifier class and a regressor class.

    The tree, boosting and neighbour wrappers all built, fitted and queried their estimator with
    the same lines; those lines live here, and a wrapper states only what differs: its classes,
    the keyword arguments tabrepro owns, and how the search space's names translate.
    """

    @classmethod
    @abstractmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        """(classifier, regressor). Import the library here so that it loads on first fit only.
        A classmethod: the hyperparameter manifest reads the classes' signatures without a model."""

    def _owned_kwargs(self) -> dict[str, Any]:
        """Settings tabrepro owns (seed, threads, verbosity); a search space may not set them."""
        return {}

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        """The search space's parameters in the library's terms; `params` is a copy to edit."""
        return params

    def _fit_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments for the estimator's own `fit`."""
        return {}

    def _new_estimator(self, params: dict[str, Any]) -> Any:
        """An unfitted estimator of the task's class: translated params plus owned settings."""
        classifier, regressor = self._estimator_classes()
        estimator_class = classifier if self.is_classifier else regressor
        return estimator_class(**self._estimator_kwargs(self._owned_kwargs(), params))

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        params = self._translate_params(dict(self.params), X_train)
        self._estimator = self._new_estimator(params).fit(X_train, y_train, **self._fit_kwargs())

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
