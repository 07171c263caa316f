"""scikit-learn-style adapter around NPTTrainer, for the project's model interface.

The project's models receive preprocessed matrices: one-hot groups for categorical features,
single standardised columns for continuous ones, targets as class indices (classification) or
standardised floats (regression). NPT treats a feature, not a column, as an attribute, so `fit`
takes the preprocessor's `FeatureLayout` (tabrepro.features): each feature becomes an attribute
with its category count, the target one more; an entry the layout decodes as missing is masked.

NPT predicts a row by attending to other rows, so the estimator keeps the training and
validation rows as context: `predict(X)` builds the table [train rows (targets visible),
validation rows (targets hidden), X (targets hidden)] and runs the trained model on it. When X is
the `X_val` or `X_test` given to `fit`, the estimator uses exactly the table the model was
trained and evaluated on (validation rows are not added twice), so validation predictions are the
ones model selection saw.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from tabrepro.features import Feature, FeatureLayout, categorical, continuous
from tabrepro.nn.estimator import Rows, TaskEstimator
from tabrepro.npt.config import NPTConfig
from tabrepro.npt.masking import TEST, TRAIN, VAL, NPTTable
from tabrepro.npt.trainer import NPTFitResult, NPTTrainer
from tabrepro.tasks import TaskFamily

__all__ = ["NPTEstimator", "feature_attributes"]


def feature_attributes(layout: FeatureLayout) -> list[Feature]:
    """NPT's attributes for the layout's features: kind and category count, unnamed (the names
    are part of what a state file's table fingerprint was computed from)."""
    return [Feature(f.kind, f.n_categories) for f in layout.features]


def _codes(layout: FeatureLayout, X: np.ndarray) -> np.ndarray:
    """The layout's codes of X in float32, the precision of NPT's table: the estimator keeps every
    row's codes as context, and float64 ones take twice the memory (239 MiB on Forest Cover's
    581,012 rows, held through every training step) for the same table."""
    return layout.decode(X).astype(np.float32)


def _same_codes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.size > 0 and bool(np.array_equal(a, b, equal_nan=True))


class NPTEstimator(TaskEstimator):
    """fit / predict / predict_proba around NPTTrainer (see TaskEstimator for `task`)."""

    config_class = NPTConfig
    config: NPTConfig
    trainer_: NPTTrainer | None
    fit_result_: NPTFitResult | None

    def __init__(
        self,
        task: TaskFamily,
        config: NPTConfig | None = None,
        *,
        n_classes: int | None = None,
        checkpoint_dir: str | Path | None = None,
    ):
        super().__init__(task, config, n_classes=n_classes, checkpoint_dir=checkpoint_dir)
        self._attributes: tuple[Feature, ...] = ()
        # (train codes, train targets, validation codes, validation targets): NPT's context rows
        self._context: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._test_codes: np.ndarray | None = None  # the X_test given to fit, as codes

    def _fit(
        self,
        train: Rows,
        val: Rows | None,
        *,
        X_test: np.ndarray | None = None,
        progress: Callable[[int, dict[str, float]], None] | None = None,
    ) -> None:
        """Train; validation rows drive model selection, X_test rows join the input (targets
        hidden) when the config is semi-supervised. `progress(step, losses)` runs after each step."""
        layout = self._layout
        assert layout is not None
        train_codes, y_train = _codes(layout, train[0]), train[1]
        val_codes, y_val = (_codes(layout, val[0]), val[1]) if val is not None else (train_codes[:0], y_train[:0])
        test_codes = _codes(layout, X_test) if X_test is not None else train_codes[:0]
        target = categorical(self.n_classes, "target") if self.is_classifier else continuous("target")
        self._attributes = (*feature_attributes(layout), target)
        self._context = (train_codes, y_train, val_codes, y_val)
        self._test_codes = test_codes
        table = self._table(test_codes)
        self.trainer_ = NPTTrainer(self._attributes, self.config, checkpoint_dir=self.checkpoint_dir)
        self.fit_result_ = self.trainer_.fit(table, callback=progress)

    def _table(self, test_codes: np.ndarray) -> NPTTable:
        """[train | val | test] rows; test targets unknown (NaN -> missing).

        Filled into one float32 array, the table's own precision: stacking the codes beside the
        float64 targets passed ~6 GiB of float64 copies through memory for HIGGS's 1.3 GiB table.
        """
        assert self._context is not None
        train_codes, y_train, val_codes, y_val = self._context
        parts = ((train_codes, y_train), (val_codes, y_val), (test_codes, None))
        values = np.empty((sum(len(codes) for codes, _ in parts), train_codes.shape[1] + 1), dtype=np.float32)
        start = 0
        for codes, targets in parts:
            stop = start + len(codes)
            values[start:stop, :-1] = codes
            values[start:stop, -1] = np.nan if targets is None else targets
            start = stop
        return NPTTable(self._attributes, torch.from_numpy(values), self._roles(len(test_codes)))

    def _roles(self, n_test: int) -> torch.Tensor:
        assert self._context is not None
        n_train, n_val = len(self._context[0]), len(self._context[2])
        return torch.cat([torch.full((n_train,), TRAIN), torch.full((n_val,), VAL), torch.full((n_test,), TEST)])

    def _outputs(self, X: np.ndarray) -> np.ndarray:
        if self.trainer_ is None or self._layout is None:
            raise RuntimeError("NPTEstimator is not fitted; call fit() first")
        assert self._context is not None and self._test_codes is not None
        codes = _codes(self._layout, X)
        for role, fit_codes in ((VAL, self._context[2]), (TEST, self._test_codes)):
            if _same_codes(codes, fit_codes):
                # rows given to fit: the fit-time table's outputs, at the rows its roles give (the
                # table itself is not rebuilt: on HIGGS it is 11 M rows)
                outputs = self.trainer_.target_outputs()
                rows = torch.nonzero(self._roles(len(self._test_codes)) == role).reshape(-1)
                break
        else:
            table = self._table(codes)
            outputs, rows = self.trainer_.target_outputs(table), table.rows(TEST)
        return outputs[rows.to(outputs.device)].cpu().double().numpy()
