"""The scikit-learn-style adapter base of the paper networks' estimators (NPTEstimator,
BiSHopEstimator): what both need between the project's model interface and their trainers.

Both take the project's preprocessed matrices with the preprocessor's `FeatureLayout`
(tabrepro.features) and targets as class indices 0..n_classes-1 (classification) or standardised
floats (regression, predicted on the same scale). This module imports no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tabrepro.features import FeatureLayout
from tabrepro.tasks import TASK_FAMILIES, TaskFamily

__all__ = ["TaskEstimator"]


class TaskEstimator:
    """The task / n_classes contract of the constructor, the fitted feature layout, and turning
    `_outputs` (logits, or the value in column 0) into predictions and probabilities. Subclasses
    set `config_class` and implement fit / `_outputs`.

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
