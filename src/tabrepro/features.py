"""The feature layout: which columns of a preprocessed matrix hold which original feature, and the
one rule that turns a categorical feature's columns back into a category code.

The preprocessor (tabrepro.preprocessing) standardises a continuous feature into one column and
one-hot encodes a categorical feature into a group of columns; it describes what it produced as a
`FeatureLayout` (`Preprocessor.feature_layout`), and every model that treats a feature rather than
a column as its unit reads that layout: NPT and BiSHop embed features, TabNet and FT-Transformer
embed categories. NPT also describes its table's columns, the target included, as `Feature`s.

The one rule for categorical codes (`FeatureLayout.decode`, `category_codes`, `embedding_codes`):

* a categorical feature has `n_categories` categories, coded 0..n_categories-1: the index of the
  hot column of a one-hot group, or the value of a single 0/1 column (a one-column group is a
  binary indicator, so it has two categories);
* an entry with no hot column (the level was not among the training rows' one-hot columns, or its
  value was missing where the training rows had no missing value) or with NaN in its columns is
  missing: NaN in `decode`, `MISSING_CODE` (-1) in `category_codes`;
* a model that embeds categories gives a missing entry the row after the last category:
  `embedding_codes` maps MISSING_CODE to n_categories, and `embedding_sizes` are n_categories + 1.

Imports nothing heavier than numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np

__all__ = [
    "FeatureKind",
    "FEATURE_KINDS",
    "MISSING_CODE",
    "Feature",
    "FeatureLayout",
    "categorical",
    "continuous",
]

FeatureKind = Literal["continuous", "categorical"]
FEATURE_KINDS: tuple[FeatureKind, ...] = get_args(FeatureKind)
MISSING_CODE = -1


@dataclass(frozen=True)
class Feature:
    """One feature: continuous, or categorical with `n_categories` (>= 2) categories.

    `columns` is how many columns it takes in a preprocessed matrix: 1 for a continuous feature,
    its one-hot group's width for a categorical one (1 for a 0/1 indicator column, which has two
    categories). It defaults to 1 / n_categories.
    """

    kind: FeatureKind
    n_categories: int = 0
    name: str = ""
    columns: int = field(default=0, compare=True)

    def __post_init__(self) -> None:
        if self.kind == "categorical":
            if self.n_categories < 2:
                raise ValueError(f"categorical feature {self.name!r} needs n_categories >= 2")
            columns = self.columns or self.n_categories
            if columns not in (1, self.n_categories):
                raise ValueError(
                    f"categorical feature {self.name!r}: {columns} columns for {self.n_categories} categories "
                    "(a one-hot group has one column per category, an indicator one column)"
                )
        elif self.kind == "continuous":
            if self.n_categories != 0:
                raise ValueError(f"continuous feature {self.name!r} must have n_categories == 0")
            columns = self.columns or 1
            if columns != 1:
                raise ValueError(f"continuous feature {self.name!r} takes one column, not {columns}")
        else:
            raise ValueError(f"unknown feature kind {self.kind!r}")
        object.__setattr__(self, "columns", columns)

    @classmethod
    def group(cls, kind: str, width: int, name: str = "") -> Feature:
        """The feature behind a (kind, width) column group: a categorical group of width w >= 2 has
        w categories, one of width 1 is a 0/1 indicator (two categories)."""
        width = int(width)
        if kind == "categorical":
            if width < 1:
                raise ValueError(f"a categorical feature needs at least one column, got {width}")
            return cls("categorical", max(width, 2), name, width)
        if kind == "continuous":
            if width != 1:
                raise ValueError(f"a continuous feature is one column, got {width}")
            return cls("continuous", 0, name, 1)
        raise ValueError(f"unknown feature kind {kind!r}")

    @property
    def is_categorical(self) -> bool:
        return self.kind == "categorical"

    @property
    def one_hot_width(self) -> int:
        """Width of the value one-hot encoded over its categories (1 for a continuous feature)."""
        return self.n_categories if self.is_categorical else 1


def categorical(n_categories: int, name: str = "") -> Feature:
    """A categorical feature (or target) with `n_categories` categories, one-hot in the matrix."""
    return Feature("categorical", n_categories, name)


def continuous(name: str = "") -> Feature:
    """A continuous feature (or target): one standardised column."""
    return Feature("continuous", 0, name)


@dataclass(frozen=True)
class FeatureLayout:
    """The features of a preprocessed matrix, in column order (see the module docstring)."""

    features: tuple[Feature, ...]
    _starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))
        for feature in self.features:
            if not isinstance(feature, Feature):
                raise TypeError(f"a FeatureLayout holds Feature objects, got {feature!r}")
        starts = np.cumsum([0, *(f.columns for f in self.features)])[:-1]
        object.__setattr__(self, "_starts", tuple(int(s) for s in starts))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_groups(cls, groups: Iterable[tuple[str, int]], names: Sequence[str] | None = None) -> FeatureLayout:
        """The layout of (kind, width) column groups in column order (see `Feature.group`)."""
        groups = list(groups)
        if names is not None and len(names) != len(groups):
            raise ValueError(f"{len(names)} names for {len(groups)} feature groups")
        return cls(
            tuple(Feature.group(kind, width, names[i] if names else "") for i, (kind, width) in enumerate(groups))
        )

    @classmethod
    def all_continuous(cls, n_columns: int) -> FeatureLayout:
        """Every column its own continuous feature: the layout of a matrix without one."""
        return cls(tuple(continuous() for _ in range(int(n_columns))))

    def select(self, indices: Iterable[int]) -> FeatureLayout:
        """The layout of the given features only (in the given order)."""
        return FeatureLayout(tuple(self.features[i] for i in indices))

    # ------------------------------------------------------------------ shape
    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def n_columns(self) -> int:
        return sum(f.columns for f in self.features)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    @property
    def groups(self) -> tuple[tuple[FeatureKind, int], ...]:
        """(kind, columns) per feature, in column order."""
        return tuple((f.kind, f.columns) for f in self.features)

    @property
    def starts(self) -> tuple[int, ...]:
        """First column of each feature."""
        return self._starts

    @property
    def categorical_features(self) -> tuple[int, ...]:
        """Indices (among the features) of the categorical ones."""
        return tuple(i for i, f in enumerate(self.features) if f.is_categorical)

    @property
    def continuous_features(self) -> tuple[int, ...]:
        return tuple(i for i, f in enumerate(self.features) if not f.is_categorical)

    @property
    def continuous_columns(self) -> np.ndarray:
        """Matrix column of each continuous feature (int64)."""
        return np.array([self._starts[i] for i in self.continuous_features], dtype=np.int64)

    @property
    def category_counts(self) -> tuple[int, ...]:
        """n_categories of each categorical feature, in feature order."""
        return tuple(self.features[i].n_categories for i in self.categorical_features)

    @property
    def embedding_sizes(self) -> list[int]:
        """Rows of an embedding table per categorical feature: its categories plus missing."""
        return [count + 1 for count in self.category_counts]

    # ------------------------------------------------------------------ decoding a matrix
    def _checked(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        if X.shape[1] != self.n_columns:
            raise ValueError(f"the feature layout describes {self.n_columns} columns, X has {X.shape[1]}")
        return X

    def _decode_feature(self, X: np.ndarray, j: int) -> np.ndarray:
        """Feature j of X as float64: its value, or its category code with NaN for missing."""
        feature, start = self.features[j], self._starts[j]
        block = np.asarray(X[:, start : start + feature.columns], dtype=np.float64)
        if feature.columns == 1:
            if feature.is_categorical:
                bad = ~np.isnan(block[:, 0]) & ~np.isin(block[:, 0], (0.0, 1.0))
                if bad.any():
                    raise ValueError(f"binary indicator column {j} holds values other than 0/1")
            return block[:, 0]
        missing = np.isnan(block).any(axis=1) | (np.nan_to_num(block).max(axis=1) <= 0)
        return np.where(missing, np.nan, np.argmax(np.nan_to_num(block), axis=1))

    def decode(self, X: np.ndarray) -> np.ndarray:
        """(n, n_features) float64: a continuous feature's value, a categorical feature's code;
        NaN marks a missing entry (a NaN value, or a categorical group without a hot column)."""
        X = self._checked(X)
        codes = np.empty((X.shape[0], self.n_features), dtype=np.float64)
        for j in range(self.n_features):
            codes[:, j] = self._decode_feature(X, j)
        return codes

    def category_codes(self, X: np.ndarray) -> np.ndarray:
        """(n, n_categorical) int64 codes of the categorical features; MISSING_CODE when missing."""
        X = self._checked(X)
        codes = np.empty((X.shape[0], len(self.categorical_features)), dtype=np.int64)
        for k, j in enumerate(self.categorical_features):
            code = self._decode_feature(X, j)
            codes[:, k] = np.where(np.isnan(code), MISSING_CODE, code)
        return codes

    def embedding_codes(self, X: np.ndarray) -> np.ndarray:
        """`category_codes` with a missing entry at n_categories: indices into tables of
        `embedding_sizes` rows."""
        codes = self.category_codes(X)
        counts = np.asarray(self.category_counts, dtype=np.int64)
        return np.where(codes == MISSING_CODE, counts, codes)

    def per_feature(self, X: np.ndarray) -> np.ndarray:
        """(n, n_features) float32, one column per feature: a continuous feature's value, a
        categorical feature's embedding code (for models that take categories as integer-valued
        columns, e.g. TabNet's cat_idxs)."""
        X = self._checked(X)
        out = np.empty((X.shape[0], self.n_features), dtype=np.float32)
        out[:, list(self.continuous_features)] = X[:, self.continuous_columns]
        out[:, list(self.categorical_features)] = self.embedding_codes(X)
        return out

    def continuous_values(self, X: np.ndarray) -> np.ndarray:
        """(n, n_continuous) values of the continuous features, in X's dtype (NaN kept)."""
        return self._checked(X)[:, self.continuous_columns]
