"""scikit-learn-style adapter around BiSHopTrainer, for the project's model interface.

Inputs are the project's preprocessed matrices: a continuous feature is one standardised column,
a categorical feature a one-hot group (a single 0/1 column for a binary feature). `fit` takes the
preprocessor's `FeatureLayout` (tabrepro.features), which turns the matrix back into per-feature
category codes: BiSHop embeds a categorical feature from its label (categories
0..n_categories-1; a missing entry, code -1, has its own embedding row) and encodes continuous
features with PLE bins fitted on the training rows. Targets: class indices 0..n_classes-1, or
standardised floats (predictions come back on that scale).
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

import numpy as np
import torch

from tabrepro.bishop.config import BiSHopConfig
from tabrepro.bishop.trainer import BiSHopFitResult, BiSHopTrainer, TabularTensors
from tabrepro.features import FeatureLayout
from tabrepro.nn.estimator import TaskEstimator

__all__ = ["BiSHopEstimator"]


class BiSHopEstimator(TaskEstimator):
    """fit / predict / predict_proba / save_weights around BiSHopTrainer (see TaskEstimator for
    `task`; the constructor is TaskEstimator's, with config a BiSHopConfig)."""

    config_class = BiSHopConfig
    config: BiSHopConfig
    trainer_: BiSHopTrainer | None
    fit_result_: BiSHopFitResult | None

    def _targets(self, y: np.ndarray, name: str) -> torch.Tensor:
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains non-finite values")
        if self.is_classifier:
            if not np.all(y == np.round(y)) or (y < 0).any():
                raise ValueError(f"{name} must hold class indices")
            assert self.n_classes is not None
            if y.size and y.max() >= self.n_classes:
                raise ValueError(f"{name} holds class indices >= n_classes = {self.n_classes}")
            return torch.as_tensor(y.astype(np.int64))
        return torch.as_tensor(y.astype(np.float32))

    def _tensors(self, X: np.ndarray, y: np.ndarray | None = None, name: str = "X") -> TabularTensors:
        assert self._layout is not None
        x_cat = self._layout.category_codes(X)
        x_num = self._layout.continuous_values(X).astype(np.float32)
        targets = None if y is None else self._targets(y, f"y for {name}")
        if targets is not None and targets.shape[0] != x_cat.shape[0]:
            raise ValueError(f"{name} and its targets have different numbers of rows")
        return TabularTensors(torch.as_tensor(x_cat), torch.as_tensor(x_num), targets)

    def fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
        *,
        layout: FeatureLayout,
    ) -> Self:
        """Train on the training rows; the validation rows drive LR reduction, early stopping
        and the choice of the kept epoch."""
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        if self.is_classifier and self.n_classes is None:
            observed = [np.asarray(y).reshape(-1) for y in (y_train, y_val) if y is not None]
            self.n_classes = max(2, int(max(np.max(y) for y in observed if y.size)) + 1)
        self._layout = layout
        train = self._tensors(X_train, y_train, "X_train")
        val = self._tensors(X_val, y_val, "X_val") if X_val is not None else None
        self.trainer_ = BiSHopTrainer(
            self.config,
            self.task,
            cardinalities=layout.category_counts,
            n_numerical=train.x_num.shape[1],
            n_classes=self.n_classes if self.is_classifier else None,
            checkpoint_dir=self.checkpoint_dir,
        )
        self.fit_result_ = self.trainer_.fit(train, val)
        return self

    def _outputs(self, X: np.ndarray) -> np.ndarray:
        if self.trainer_ is None or self._layout is None:
            raise RuntimeError("BiSHopEstimator is not fitted; call fit() first")
        outputs = self.trainer_.outputs(self._tensors(X))
        return outputs.cpu().double().numpy()

    def save_weights(self, path: str | Path) -> Path:
        """Write the selected weights (state dict incl. PLE bins) as a weights-only file."""
        if self.trainer_ is None:
            raise RuntimeError("BiSHopEstimator is not fitted; call fit() first")
        return self.trainer_.save_weights(path)
