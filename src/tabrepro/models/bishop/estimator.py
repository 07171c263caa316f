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
from typing import Any

import numpy as np
import torch

from tabrepro.models.bishop.config import BiSHopConfig
from tabrepro.models.bishop.trainer import BiSHopFitResult, BiSHopTrainer, TabularTensors
from tabrepro.nn.estimator import Rows, TaskEstimator

__all__ = ["BiSHopEstimator"]


class BiSHopEstimator(TaskEstimator):
    """fit / predict / predict_proba / save_weights around BiSHopTrainer (see TaskEstimator for
    `task`; the constructor is TaskEstimator's, with config a BiSHopConfig)."""

    config_class = BiSHopConfig
    config: BiSHopConfig
    trainer_: BiSHopTrainer | None
    fit_result_: BiSHopFitResult | None
    _val_X: np.ndarray | None = None  # the validation rows given to fit

    def _tensors(self, X: np.ndarray, y: np.ndarray | None = None) -> TabularTensors:
        """The rows of X (and their checked targets) as BiSHop's tensors."""
        assert self._layout is not None
        x_cat = self._layout.category_codes(X)
        x_num = self._layout.continuous_values(X).astype(np.float32)
        targets = None
        if y is not None:
            targets = torch.as_tensor(y.astype(np.int64 if self.is_classifier else np.float32))
        return TabularTensors(torch.as_tensor(x_cat), torch.as_tensor(x_num), targets)

    def _fit(self, train: Rows, val: Rows | None, **options: Any) -> None:
        """Train on the training rows; the validation rows drive LR reduction, early stopping
        and the choice of the kept epoch."""
        if options:
            raise TypeError(f"BiSHopEstimator.fit got unexpected options {sorted(options)}")
        assert self._layout is not None
        train_tensors = self._tensors(*train)
        val_tensors = self._tensors(*val) if val is not None else None
        self._val_X = val[0] if val is not None else None
        self.trainer_ = BiSHopTrainer(
            self.config,
            self.task,
            cardinalities=self._layout.category_counts,
            n_numerical=train_tensors.x_num.shape[1],
            n_classes=self.n_classes if self.is_classifier else None,
            checkpoint_dir=self.checkpoint_dir,
        )
        self.fit_result_ = self.trainer_.fit(train_tensors, val_tensors)

    def _outputs(self, X: np.ndarray) -> np.ndarray:
        if self.trainer_ is None or self._layout is None:
            raise RuntimeError("BiSHopEstimator is not fitted; call fit() first")
        kept = self.trainer_.validation_outputs()
        if kept is not None and self._val_X is not None and _same_rows(X, self._val_X):
            return kept.cpu().double().numpy()  # fit's validation pass with the selected weights
        outputs = self.trainer_.outputs(self._tensors(X))
        return outputs.cpu().double().numpy()

    def save_weights(self, path: str | Path) -> Path:
        """Write the selected weights (state dict incl. PLE bins) as a weights-only file."""
        if self.trainer_ is None:
            raise RuntimeError("BiSHopEstimator is not fitted; call fit() first")
        return self.trainer_.save_weights(path)


def _same_rows(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True)))
