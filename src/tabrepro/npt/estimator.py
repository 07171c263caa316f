"""scikit-learn-style adapter around NPTTrainer, for the project's model interface.

The project's models receive preprocessed matrices: one-hot groups for categorical features,
single standardised columns for continuous ones, targets as class indices (classification) or
standardised floats (regression). NPT needs to know the column groups, so `fit` takes
`attributes`, a list of (kind, n_columns) in column order, e.g.
[("continuous", 1), ("categorical", 3), ("continuous", 1)].

NPT predicts a row by attending to other rows, so the estimator keeps the training and
validation rows as context: `predict(X)` builds the table [train rows (targets visible),
validation rows (targets hidden), X (targets hidden)] and runs the trained model on it. When X is
the `X_val` or `X_test` given to `fit`, the estimator uses exactly the table the model was
trained and evaluated on (validation rows are not added twice), so validation predictions are the
ones model selection saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import numpy as np
import torch

from tabrepro.npt.config import Attribute, NPTConfig, categorical, continuous
from tabrepro.npt.masking import TEST, TRAIN, VAL, NPTTable
from tabrepro.npt.trainer import FitResult, NPTTrainer

__all__ = ["NPTEstimator", "TaskEstimator", "decode_features"]

ColumnGroup = tuple[str, int]
Task = Literal["classification", "regression"]


def _feature_attributes(groups: Sequence[ColumnGroup]) -> list[Attribute]:
    attributes = []
    for kind, width in groups:
        if kind == "continuous":
            if width != 1:
                raise ValueError(f"a continuous attribute is one column, got {width}")
            attributes.append(continuous())
        elif kind == "categorical":
            if width < 1:
                raise ValueError("a categorical attribute needs at least one column")
            # One column = a 0/1 indicator of a binary attribute; more = a one-hot group.
            attributes.append(categorical(max(width, 2)))
        else:
            raise ValueError(f"unknown attribute kind {kind!r}")
    return attributes


def decode_features(X: np.ndarray, groups: Sequence[ColumnGroup]) -> np.ndarray:
    """Encoded matrix -> (n, n_groups) codes; NaN marks a missing entry.

    A one-hot group that is all zero or contains NaN is missing; a continuous NaN is missing.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    total = sum(width for _, width in groups)
    if X.shape[1] != total:
        raise ValueError(f"attributes describe {total} columns, X has {X.shape[1]}")
    codes = np.empty((X.shape[0], len(groups)), dtype=np.float64)
    start = 0
    for j, (kind, width) in enumerate(groups):
        block = X[:, start : start + width]
        start += width
        if kind == "continuous" or width == 1:
            codes[:, j] = block[:, 0]
            if kind == "categorical":
                bad = ~np.isnan(block[:, 0]) & ~np.isin(block[:, 0], (0.0, 1.0))
                if bad.any():
                    raise ValueError(f"binary indicator column {j} holds values other than 0/1")
            continue
        missing = np.isnan(block).any(axis=1) | (np.nan_to_num(block).max(axis=1) <= 0)
        codes[:, j] = np.where(missing, np.nan, np.argmax(np.nan_to_num(block), axis=1))
    return codes


def _same_codes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.size > 0 and bool(np.array_equal(a, b, equal_nan=True))


class TaskEstimator:
    """What the NPT and BiSHop adapters share: the task / n_classes contract of the constructor,
    the fitted attributes, and turning `_outputs` (logits, or the value in column 0) into
    predictions and probabilities. Subclasses set `config_class` and implement fit / `_outputs`.

    task: "classification" (targets are class indices 0..n_classes-1) or "regression" (targets
    are standardised floats; predictions come back on the same scale).
    """

    config_class: ClassVar[type]  # the default config is config_class()

    def __init__(
        self, task: Task, config: Any = None, *, n_classes: int | None = None, checkpoint_dir: str | Path | None = None
    ):
        if task not in ("classification", "regression"):
            raise ValueError(f"unknown task {task!r}")
        if task == "regression" and n_classes is not None:
            raise ValueError("n_classes applies to classification only")
        self.task = task
        self.config = config if config is not None else self.config_class()
        self.n_classes = n_classes
        self.checkpoint_dir = checkpoint_dir
        self.trainer_: Any = None
        self.fit_result_: Any = None
        self._groups: list[ColumnGroup] | None = None

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


class NPTEstimator(TaskEstimator):
    """fit / predict / predict_proba around NPTTrainer (see TaskEstimator for `task`)."""

    config_class = NPTConfig
    config: NPTConfig
    trainer_: NPTTrainer | None
    fit_result_: FitResult | None

    def __init__(
        self,
        task: Task,
        config: NPTConfig | None = None,
        *,
        n_classes: int | None = None,
        checkpoint_dir: str | Path | None = None,
    ):
        super().__init__(task, config, n_classes=n_classes, checkpoint_dir=checkpoint_dir)
        self._attributes: tuple[Attribute, ...] = ()
        # (train codes, train targets, validation codes, validation targets): NPT's context rows
        self._context: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._test_codes: np.ndarray | None = None  # the X_test given to fit, as codes

    def _target_attribute(self, *targets: np.ndarray) -> Attribute:
        if not self.is_classifier:
            return continuous("target")
        if self.n_classes is None:
            self.n_classes = max(2, int(max(np.nanmax(t) for t in targets if t.size)) + 1)
        return categorical(self.n_classes, "target")

    def _check_target(self, y: np.ndarray, name: str) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if self.is_classifier:
            if not np.all(y == np.round(y)) or (y < 0).any():
                raise ValueError(f"{name} must hold class indices")
        elif not np.isfinite(y).all():
            raise ValueError(f"{name} contains non-finite values")
        return y

    def fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
        *,
        attributes: Sequence[ColumnGroup],
        X_test: np.ndarray | None = None,
        progress: Callable[[int, dict[str, float]], None] | None = None,
    ) -> Self:
        """Train; validation rows drive model selection, X_test rows join the input (targets
        hidden) when the config is semi-supervised. `progress(step, losses)` runs after each step."""
        groups = [(str(kind), int(width)) for kind, width in attributes]
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        train_codes = decode_features(X_train, groups)
        y_train = self._check_target(y_train, "y_train")
        if y_train.shape[0] != train_codes.shape[0]:
            raise ValueError("X_train and y_train have different numbers of rows")
        val_codes = decode_features(X_val, groups) if X_val is not None else train_codes[:0]
        y_val = self._check_target(y_val, "y_val") if y_val is not None else y_train[:0]
        if y_val.shape[0] != val_codes.shape[0]:
            raise ValueError("X_val and y_val have different numbers of rows")
        test_codes = decode_features(X_test, groups) if X_test is not None else train_codes[:0]

        self._attributes = (*_feature_attributes(groups), self._target_attribute(y_train, y_val))
        self._groups = groups
        if self.is_classifier and max(y_train.max(initial=0), y_val.max(initial=0)) >= self.n_classes:
            raise ValueError(f"targets exceed n_classes = {self.n_classes}")
        self._context = (train_codes, y_train, val_codes, y_val)
        self._test_codes = test_codes
        table = self._table(test_codes)
        self.trainer_ = NPTTrainer(self._attributes, self.config, checkpoint_dir=self.checkpoint_dir)
        self.fit_result_ = self.trainer_.fit(table, callback=progress)
        return self

    def _table(self, test_codes: np.ndarray) -> NPTTable:
        """[train | val | test] rows; test targets unknown (NaN -> missing)."""
        assert self._context is not None
        train_codes, y_train, val_codes, y_val = self._context
        y_test = np.full(test_codes.shape[0], np.nan)
        values = np.concatenate(
            [
                np.column_stack([train_codes, y_train]),
                np.column_stack([val_codes, y_val]),
                np.column_stack([test_codes, y_test]),
            ]
        )
        roles = np.concatenate(
            [np.full(len(train_codes), TRAIN), np.full(len(val_codes), VAL), np.full(len(test_codes), TEST)]
        )
        return NPTTable(self._attributes, torch.as_tensor(values, dtype=torch.float32), torch.as_tensor(roles))

    def _outputs(self, X: np.ndarray) -> np.ndarray:
        if self.trainer_ is None or self._groups is None:
            raise RuntimeError("NPTEstimator is not fitted; call fit() first")
        assert self._context is not None and self._test_codes is not None
        codes = decode_features(X, self._groups)
        if _same_codes(codes, self._context[2]):  # the validation rows: the fit-time table
            table, role, outputs = self._table(self._test_codes), VAL, self.trainer_.target_outputs()
        elif _same_codes(codes, self._test_codes):
            table, role, outputs = self._table(self._test_codes), TEST, self.trainer_.target_outputs()
        else:
            table, role = self._table(codes), TEST
            outputs = self.trainer_.target_outputs(table)
        rows = table.rows(role)
        return outputs[rows.to(outputs.device)].cpu().double().numpy()
