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
from tabrepro.models.npt.config import NPTConfig
from tabrepro.models.npt.masking import TEST, TRAIN, VAL, NPTTable
from tabrepro.models.npt.trainer import NPTFitResult, NPTTrainer
from tabrepro.nn.estimator import Rows, TaskEstimator
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
        # rows of each role in the fit-time table [train | val | test], which holds NPT's context
        # rows (see _fit_rows) and the X_test given to fit
        self._counts: dict[int, int] = {}

    def _fit(  # type: ignore[override]  # takes only NPT's options; any other is fit's TypeError
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
        if self.is_classifier:
            assert self.n_classes is not None  # fit inferred it before calling _fit
            target = categorical(self.n_classes, "target")
        else:
            target = continuous("target")
        self._attributes = (*feature_attributes(layout), target)
        self._counts = {TRAIN: len(train_codes), VAL: len(val_codes), TEST: len(test_codes)}
        table = self._table(((train_codes, y_train), (val_codes, y_val), (test_codes, None)))
        del train_codes, val_codes, test_codes  # the table holds them (see _fit_rows)
        self.trainer_ = NPTTrainer(self._attributes, self.config, checkpoint_dir=self.checkpoint_dir)
        self.fit_result_ = self.trainer_.fit(table, callback=progress)

    def _table(self, parts: tuple[tuple[np.ndarray, np.ndarray | None], ...]) -> NPTTable:
        """The table of the (codes, targets) of the training, validation and test rows, in that
        order; test targets unknown (None: NaN, i.e. missing).

        Filled into one float32 array, the table's own precision: stacking the codes beside the
        float64 targets passed ~6 GiB of float64 copies through memory for HIGGS's 1.3 GiB table.
        """
        counts = [len(codes) for codes, _ in parts]
        values = np.empty((sum(counts), parts[0][0].shape[1] + 1), dtype=np.float32)
        start = 0
        for codes, targets in parts:
            stop = start + len(codes)
            values[start:stop, :-1] = codes
            values[start:stop, -1] = np.nan if targets is None else targets
            start = stop
        roles = torch.cat([torch.full((n,), role) for n, role in zip(counts, (TRAIN, VAL, TEST), strict=True)])
        return NPTTable(self._attributes, torch.from_numpy(values), roles)

    def _fit_rows(self, role: int) -> tuple[np.ndarray, np.ndarray]:
        """(codes, targets) of the fit-time table's rows of `role`, as fit was given them.

        Read back from the table rather than kept beside it (1.2 GiB more on HIGGS, through every
        training step): its inputs hold every observed feature value as given, missing ones as
        mask bits, and its labels every row's target.
        """
        assert self.trainer_ is not None and self.trainer_.table is not None
        table = self.trainer_.table
        rows = self._role_rows(role)
        codes = table.inputs[rows, :-1].masked_fill(table.missing[rows, :-1], float("nan"))
        targets = table.labels[rows].masked_fill(~table.label_observed[rows], float("nan"))
        return codes.cpu().numpy(), targets.cpu().numpy()

    def _role_rows(self, role: int) -> slice:
        """Where `role`'s rows are in the fit-time table (roles in the order TRAIN, VAL, TEST)."""
        start = sum(n for r, n in self._counts.items() if r < role)
        return slice(start, start + self._counts[role])

    def _outputs(self, X: np.ndarray) -> np.ndarray:
        if self.trainer_ is None or self._layout is None:
            raise RuntimeError("NPTEstimator is not fitted; call fit() first")
        codes = _codes(self._layout, X)
        for role in (VAL, TEST):
            if len(codes) == self._counts[role] and _same_codes(codes, self._fit_rows(role)[0]):
                # rows given to fit: the fit-time table's outputs at that role's rows (the table
                # itself is not rebuilt: on HIGGS it is 11 M rows)
                outputs = self.trainer_.target_outputs()
                fit_rows = self._role_rows(role)
                rows = torch.arange(fit_rows.start, fit_rows.stop)
                break
        else:
            table = self._table((self._fit_rows(TRAIN), self._fit_rows(VAL), (codes, None)))
            outputs, rows = self.trainer_.target_outputs(table), table.rows(TEST)
        return outputs[rows.to(outputs.device)].cpu().double().numpy()
