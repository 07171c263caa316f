"""Turn a canonical table into model matrices, with every statistic taken from training rows only.

Features: continuous columns are standardised with the training mean and standard deviation and a
missing value becomes the training mean (0 after scaling; no indicator column). Categorical
columns are one-hot encoded over the schema's levels, so the width never depends on which levels
a split happens to contain; a missing-value column is added only when the training rows contain a
missing value in that column (a missing value seen only outside training encodes as all zeros,
exactly what a model fitted without that indicator would see).

What was produced is described by `Preprocessor.feature_layout` (tabrepro.features): which
columns hold which feature, and how many categories each categorical feature has. Every model that
embeds features or categories reads its layout from there.

Targets: classification targets become class indices over the schema's sorted target levels
(so `n_classes` is the schema's, not the training rows'); regression targets are standardised
with the training mean and standard deviation, and `inverse_transform` maps predictions back to
the original units in which the papers report RMSE/MSE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tabrepro.data.table import ColumnSpec, TableSchema
from tabrepro.errors import InputError
from tabrepro.features import Feature, FeatureLayout

__all__ = ["Preprocessor", "TargetEncoder", "PreprocessingError"]


class PreprocessingError(InputError, ValueError):
    """Raised when a frame does not match the schema the transformer was fitted with."""


def _train_rows(frame: pd.DataFrame, train_index: np.ndarray | list[int]) -> pd.DataFrame:
    """Select training rows by position; positions are what the split files store."""
    positions = np.asarray(train_index)
    if positions.ndim != 1 or positions.size == 0:
        raise PreprocessingError("train_index must be a non-empty 1-D array of row positions")
    if positions.dtype == bool:
        raise PreprocessingError("train_index must hold row positions, not a boolean mask")
    return frame.iloc[positions]


def _safe_scale(std: float) -> float:
    """A constant (or all-missing) training column is centred but not divided by zero."""
    return std if np.isfinite(std) and std > 0.0 else 1.0


def _category_codes(values: pd.Series, column: ColumnSpec) -> np.ndarray:
    """Level index per row (-1 for missing); an unknown level is a schema violation, not data."""
    codes = pd.Index(column.levels).get_indexer(values.astype("object")).astype(np.int64)
    unknown = (codes == -1) & values.notna().to_numpy()
    if unknown.any():
        examples = sorted({str(v) for v in values[unknown].unique()[:3]})
        raise PreprocessingError(f"column {column.name!r} has values outside the schema's levels: {examples}")
    return codes


@dataclass(frozen=True)
class _ContinuousStats:
    name: str
    mean: float
    scale: float


@dataclass(frozen=True)
class _OneHotLevels:
    """A categorical column's fitted one-hot encoding: its schema levels, plus a missing column."""

    name: str
    levels: tuple[str, ...]
    missing_column: bool  # one extra output column flags a missing value

    @property
    def width(self) -> int:
        return len(self.levels) + int(self.missing_column)


class Preprocessor:
    """Standardise continuous features and one-hot encode categoricals, fitted on training rows."""

    def __init__(self, dtype: type[np.floating] = np.float32) -> None:
        # float32 halves the memory of the largest tables (Higgs) and every model accepts it.
        self.dtype = np.dtype(dtype)
        self._blocks: list[_ContinuousStats | _OneHotLevels] | None = None

    def fit(self, frame: pd.DataFrame, schema: TableSchema, train_index: np.ndarray | list[int]) -> Preprocessor:
        """Learn means, scales and one-hot layouts from `frame.iloc[train_index]` only."""
        train = _train_rows(frame, train_index)
        blocks: list[_ContinuousStats | _OneHotLevels] = []
        for column in schema.features:
            if column.name not in frame.columns:
                raise PreprocessingError(f"feature column {column.name!r} is missing from the frame")
            values = train[column.name]
            if column.kind == "continuous":
                numeric = values.to_numpy(dtype=np.float64, na_value=np.nan)
                observed = numeric[~np.isnan(numeric)]
                mean = float(observed.mean()) if observed.size else 0.0
                std = float(observed.std()) if observed.size else 1.0
                blocks.append(_ContinuousStats(column.name, mean, _safe_scale(std)))
            elif column.kind == "categorical":
                if not column.levels:
                    raise PreprocessingError(f"categorical column {column.name!r} has no levels")
                blocks.append(_OneHotLevels(column.name, tuple(column.levels), bool(values.isna().any())))
            else:
                raise PreprocessingError(f"column {column.name!r} has unknown kind {column.kind!r}")
        self._blocks = blocks
        return self

    @property
    def n_features_out(self) -> int:
        return sum(1 if isinstance(b, _ContinuousStats) else b.width for b in self._fitted_blocks())

    @property
    def feature_layout(self) -> FeatureLayout:
        """Which output columns hold which input feature (named), in output column order: one
        column per continuous feature, the one-hot group of a categorical one."""
        return FeatureLayout(
            tuple(
                Feature.group("continuous", 1, b.name)
                if isinstance(b, _ContinuousStats)
                else Feature.group("categorical", b.width, b.name)
                for b in self._fitted_blocks()
            )
        )

    @property
    def feature_names_out(self) -> list[str]:
        """Output column names: `col` for continuous, `col=level` and `col=<missing>` for one-hot."""
        names: list[str] = []
        for block in self._fitted_blocks():
            if isinstance(block, _ContinuousStats):
                names.append(block.name)
            else:
                names.extend(f"{block.name}={level}" for level in block.levels)
                if block.missing_column:
                    names.append(f"{block.name}=<missing>")
        return names

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """Encode any rows (train, validation or test) with the statistics learned in `fit`."""
        blocks = self._fitted_blocks()
        out = np.zeros((len(frame), self.n_features_out), dtype=self.dtype)
        start = 0
        for block in blocks:
            if block.name not in frame.columns:
                raise PreprocessingError(f"feature column {block.name!r} is missing from the frame")
            values = frame[block.name]
            if isinstance(block, _ContinuousStats):
                numeric = values.to_numpy(dtype=np.float64, na_value=np.nan)
                scaled = (numeric - block.mean) / block.scale
                out[:, start] = np.where(np.isnan(scaled), 0.0, scaled)
                start += 1
                continue
            column = ColumnSpec(block.name, "categorical", list(block.levels))
            codes = _category_codes(values, column)
            rows = np.arange(len(frame))
            present = codes >= 0
            out[rows[present], start + codes[present]] = 1.0
            if block.missing_column:
                out[rows[~present], start + len(block.levels)] = 1.0
            start += block.width
        return out

    def fit_transform(
        self, frame: pd.DataFrame, schema: TableSchema, train_index: np.ndarray | list[int]
    ) -> np.ndarray:
        """Fit on the training rows, then encode the whole frame."""
        return self.fit(frame, schema, train_index).transform(frame)

    def _fitted_blocks(self) -> list[_ContinuousStats | _OneHotLevels]:
        if self._blocks is None:
            raise PreprocessingError("Preprocessor is not fitted; call fit() first")
        return self._blocks


class TargetEncoder:
    """Encode the target column: class indices, or a standardised regression target."""

    def __init__(self) -> None:
        self.task: str | None = None
        self.target: str | None = None
        self.classes: tuple[str, ...] = ()
        self.mean: float = 0.0
        self.scale: float = 1.0

    @property
    def is_classification(self) -> bool:
        return self.task in ("binary", "multiclass")

    @property
    def n_classes(self) -> int | None:
        """Number of classes from the schema (None for regression)."""
        return len(self.classes) if self.is_classification else None

    def fit(self, frame: pd.DataFrame, schema: TableSchema, train_index: np.ndarray | list[int]) -> TargetEncoder:
        """Take class levels from the schema; take regression mean/std from training rows only."""
        self.task = schema.task
        self.target = schema.target
        column = schema.target_column
        if self.is_classification:
            if column.kind != "categorical" or len(column.levels) < 2:
                raise PreprocessingError(
                    f"{schema.task} target {column.name!r} needs a categorical column with >= 2 levels"
                )
            if schema.task == "binary" and len(column.levels) != 2:
                raise PreprocessingError(f"binary target {column.name!r} has {len(column.levels)} levels, expected 2")
            self.classes = tuple(column.levels)
            return self
        if schema.task != "regression":
            raise PreprocessingError(f"unknown task {schema.task!r}")
        values = self._values(_train_rows(frame, train_index)).to_numpy(dtype=np.float64, na_value=np.nan)
        if np.isnan(values).any():
            raise PreprocessingError(f"regression target {self.target!r} has missing training values")
        self.mean = float(values.mean())
        self.scale = _safe_scale(float(values.std()))
        return self

    def transform(self, data: pd.DataFrame | pd.Series) -> np.ndarray:
        """Class indices (int64) or standardised values (float64) for the given rows."""
        self._check_fitted()
        values = self._values(data)
        if values.isna().any():
            raise PreprocessingError(f"target {self.target!r} has missing values")
        if self.is_classification:
            column = ColumnSpec(str(self.target), "categorical", list(self.classes))
            return _category_codes(values, column)
        numeric = values.to_numpy(dtype=np.float64)
        return (numeric - self.mean) / self.scale

    def inverse_transform(self, y: np.ndarray) -> np.ndarray:
        """Regression: standardised predictions back to original units; classification: labels."""
        self._check_fitted()
        y = np.asarray(y)
        if self.is_classification:
            return np.asarray(self.classes, dtype=object)[y.astype(np.int64)]
        return y.astype(np.float64) * self.scale + self.mean

    def _values(self, data: pd.DataFrame | pd.Series) -> pd.Series:
        if isinstance(data, pd.Series):
            return data
        if self.target not in data.columns:
            raise PreprocessingError(f"target column {self.target!r} is missing from the frame")
        return data[self.target]

    def _check_fitted(self) -> None:
        if self.task is None:
            raise PreprocessingError("TargetEncoder is not fitted; call fit() first")
