"""The scikit-learn-style adapter base of the paper networks' estimators (NPTEstimator,
BiSHopEstimator): what both need between the project's model interface and their trainers.

Both take the project's preprocessed matrices with the preprocessor's `FeatureLayout`
(tabrepro.features) and targets as class indices 0..n_classes-1 (classification) or standardised
floats (regression, predicted on the same scale). This module imports no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from tabrepro.features import FeatureLayout
from tabrepro.tasks import TASK_FAMILIES, TaskFamily

__all__ = ["TaskEstimator", "Rows"]

Rows = tuple[np.ndarray, np.ndarray]  # (X, y): a matrix and its checked float64 targets


class TaskEstimator:
    """The task / n_classes contract of the constructor, the checks `fit` makes before training,
    the fitted feature layout, and turning `_outputs` (logits, or the value in column 0) into
    predictions and probabilities. Subclasses set `config_class` and implement `_fit` / `_outputs`.

    task: "classification" (targets are class indices 0..n_classes-1) or "regression" (targets
    are standardised floats; predictions come back on the same scale).
    """

    config_class: ClassVar[type]  # the default config is config_class()

    def __init__(
        self,
        task: TaskFamily,
        config: Any = None,
        *,
        n_classes: int | None = None,
        checkpoint_dir: str | Path | None = None,
    ):
        if task not in TASK_FAMILIES:
            raise ValueError(f"unknown task {task!r}")
        if task == "regression" and n_classes is not None:
            raise ValueError("n_classes applies to classification only")
        self.task = task
        self.config = config if config is not None else self.config_class()
        self.n_classes = n_classes
        self.checkpoint_dir = checkpoint_dir
        self.trainer_: Any = None
        self.fit_result_: Any = None
        self._layout: FeatureLayout | None = None

    @property
    def is_classifier(self) -> bool:
        return self.task == "classification"

    def fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None = None,
        y_val: np.ndarray | None = None,
        *,
        layout: FeatureLayout,
        **options: Any,
    ) -> Self:
        """Train on the training rows; the validation rows drive model selection. `options` are
        the subclass's (NPT: X_test, progress). Targets are checked, and n_classes inferred when
        the constructor was not given it, before `_fit` sees them (as float64 vectors)."""
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        y_train = self._checked_targets(X_train, y_train, "y_train")
        y_val = None if X_val is None or y_val is None else self._checked_targets(X_val, y_val, "y_val")
        if self.is_classifier:
            observed = np.concatenate([y_train, y_val if y_val is not None else y_train[:0]])
            if self.n_classes is None:
                self.n_classes = max(2, int(observed.max(initial=0)) + 1)
            elif observed.size and observed.max() >= self.n_classes:
                raise ValueError(f"targets hold class indices >= n_classes = {self.n_classes}")
        self._layout = layout
        self._fit((X_train, y_train), None if X_val is None or y_val is None else (X_val, y_val), **options)
        return self

    def _checked_targets(self, X: np.ndarray, y: np.ndarray, name: str) -> np.ndarray:
        """y as a float64 vector with one finite value per row of X (class indices when
        classifying); ValueError naming `name` otherwise."""
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if y.shape[0] != np.shape(X)[0]:
            raise ValueError(f"{name} has {y.shape[0]} values for {np.shape(X)[0]} rows")
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains non-finite values")
        if self.is_classifier and (not np.all(y == np.round(y)) or (y < 0).any()):
            raise ValueError(f"{name} must hold class indices")
        return y

    def _fit(self, train: Rows, val: Rows | None, **options: Any) -> None:
        """Train (self._layout and self.n_classes are set; targets are checked float64)."""
        raise NotImplementedError

    def _outputs(self, X: np.ndarray) -> np.ndarray:
        """(n, n_outputs) float64 model outputs for the rows of X."""
        raise NotImplementedError

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Class indices (classification) or standardised-scale values (regression)."""
        outputs = self._outputs(X)
        if self.is_classifier:
            return np.argmax(outputs, axis=1).astype(np.int64)
        return outputs[:, 0]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(n, n_classes) class probabilities (softmax of the logits, in float64)."""
        if not self.is_classifier:
            raise AttributeError("predict_proba is only available for classification")
        logits = self._outputs(X)
        logits = logits - logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        return probabilities / probabilities.sum(axis=1, keepdims=True)
