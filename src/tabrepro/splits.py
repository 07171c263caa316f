"""Fixed train/validation/test splits that can be proven correct.

A split is stored as one int8 *role* per row (train, val, test, or unused), saved with
`numpy.save` (a deterministic header plus raw bytes), so:
  - disjointness holds by construction, and coverage is one `np.unique` away;
  - the same seed gives the same bytes, hence the same sha256, on any machine;
  - every model of a dataset reads the very same file.

Folds of a k-fold protocol are cut from ONE shuffled (stratified) KFold partition, so each row is
in exactly one test fold. (The NPT authors' code re-drew the partition per fold, so their later
folds overlap and many rows are never tested.)
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

from tabrepro.errors import InputError
from tabrepro.io import atomic_write, write_json
from tabrepro.layout import SPLIT_MANIFEST_FILE

TRAIN, VAL, TEST, UNUSED = 0, 1, 2, -1
ROLE_NAMES = {TRAIN: "train", VAL: "val", TEST: "test", UNUSED: "unused"}


class SplitError(InputError, ValueError):
    """A protocol that cannot be applied to a dataset (e.g. no fixed test rows)."""


@dataclass(frozen=True)
class Split:
    roles: np.ndarray  # int8, one per row

    @property
    def train(self) -> np.ndarray:
        return np.flatnonzero(self.roles == TRAIN)

    @property
    def val(self) -> np.ndarray:
        return np.flatnonzero(self.roles == VAL)

    @property
    def test(self) -> np.ndarray:
        return np.flatnonzero(self.roles == TEST)

    def counts(self) -> dict[str, int]:
        return {ROLE_NAMES[r]: int((self.roles == r).sum()) for r in (TRAIN, VAL, TEST, UNUSED)}

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, self.roles.astype(np.int8), allow_pickle=False)
        return buffer.getvalue()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()


def n_folds(protocol: dict) -> int:
    return protocol["n_folds"] if protocol["kind"] == "kfold" else 1


def _stratify_labels(y: np.ndarray | None, n_splits: int = 2) -> np.ndarray | None:
    """Labels to stratify on, or None when stratifying is impossible (regression, tiny classes)."""
    if y is None:
        return None
    _, counts = np.unique(y, return_counts=True)
    return y if counts.min() >= n_splits else None


def _carve(indices: np.ndarray, n_take: int, y: np.ndarray | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split `indices` into (rest, taken) with `n_take` taken rows, stratified when possible."""
    if n_take <= 0:
        return indices, indices[:0]
    if n_take >= len(indices):
        raise SplitError(f"cannot take {n_take} rows out of {len(indices)}")
    labels = _stratify_labels(None if y is None else y[indices])
    try:
        rest, taken = train_test_split(indices, test_size=n_take, random_state=seed, stratify=labels)
    except ValueError:  # a class too small for the requested size: fall back to a plain shuffle
        rest, taken = train_test_split(indices, test_size=n_take, random_state=seed)
    return np.sort(rest), np.sort(taken)


def class_codes(y: np.ndarray | None) -> np.ndarray | None:
    """Labels as integer codes in the labels' sorted order.

    scikit-learn's stratified splitters only use the order of the sorted classes and each row's
    class, so codes give the same splits as the labels themselves; but sorting 11 million label
    strings (HIGGS) takes a minute and a gigabyte each time a splitter does it, and a hash-based
    factorisation done once takes a second.
    """
    if y is None:
        return None
    codes, _ = pd.factorize(np.asarray(y), sort=True, use_na_sentinel=False)
    return codes


def _subsampled_rows(protocol: dict, all_rows: np.ndarray, y: np.ndarray | None, seed: int) -> np.ndarray:
    """The rows a holdout split divides: all of them, or `subsample_rows` drawn at random
    (stratified) when the training fraction of all rows would exceed that many.

    This is the tabular benchmark's rule as BiSHop's data code applies it (Grinsztajn et al.'s
    `max_train_samples`): a large dataset is cut to 10,000 rows first, so that 70 / 9 / 21 % of it
    are the 7,000 / 900 / 2,100 rows of thesis section 4.1; a smaller one is split whole.
    """
    cap = protocol.get("subsample_rows")
    if cap is None or protocol["train"] * len(all_rows) <= cap:
        return all_rows
    _, taken = _carve(all_rows, cap, y, seed + 3)
    return taken


def make_split(
    protocol: dict, n_rows: int, *, fold: int, seed: int, y: np.ndarray | None = None, n_fixed_test_rows: int = 0
) -> Split:
    """The roles of every row for one fold of a protocol.

    `y` holds class labels for classification (stratification) and None for regression.
    """
    if not 0 <= fold < n_folds(protocol):
        raise SplitError(f"fold {fold} out of range for a protocol with {n_folds(protocol)} fold(s)")
    y = class_codes(y)
    roles = np.full(n_rows, UNUSED, dtype=np.int8)
    all_rows = np.arange(n_rows)
    kind = protocol["kind"]

    if kind == "kfold":
        labels = _stratify_labels(y, protocol["n_folds"])
        splitter = (StratifiedKFold if labels is not None else KFold)(
            n_splits=protocol["n_folds"], shuffle=True, random_state=seed
        )
        rest, test = list(splitter.split(all_rows, labels))[fold]
        n_val = int(round(protocol["val_fraction"] * n_rows))
        train, val = _carve(rest, n_val, y, seed + 1 + fold)
    elif kind == "holdout":
        pool = _subsampled_rows(protocol, all_rows, y, seed)
        n_test = int(round(protocol["test"] * len(pool)))
        n_val = int(round(protocol["val"] * len(pool)))
        rest, test = _carve(pool, n_test, y, seed)
        train, val = _carve(rest, n_val, y, seed + 1)
        cap = protocol.get("max_train_rows")
        if cap is not None and len(train) > cap:
            _, train = _carve(train, cap, y, seed + 2)
    elif kind == "fixed_test":
        if n_fixed_test_rows <= 0:
            raise SplitError("protocol 'fixed_test' needs a dataset with an official test set")
        test = all_rows[n_rows - n_fixed_test_rows :]
        rest = all_rows[: n_rows - n_fixed_test_rows]
        n_val = int(round(protocol["val_fraction"] * len(rest)))
        train, val = _carve(rest, n_val, y, seed)
    else:
        raise SplitError(f"unknown protocol kind {kind!r}")

    roles[train], roles[val], roles[test] = TRAIN, VAL, TEST
    return Split(roles)


def make_all_splits(
    protocol: dict, n_rows: int, *, seed: int, y: np.ndarray | None = None, n_fixed_test_rows: int = 0
) -> list[Split]:
    return [
        make_split(protocol, n_rows, fold=k, seed=seed, y=y, n_fixed_test_rows=n_fixed_test_rows)
        for k in range(n_folds(protocol))
    ]


def fold_path(directory: Path, fold: int) -> Path:
    return directory / f"fold{fold}.npy"


def save_splits(splits: list[Split], directory: Path, meta: dict) -> Path:
    """Write fold<k>.npy per fold plus a manifest with each fold's sha256 and row counts."""
    manifest = {**meta, "folds": []}
    for k, split in enumerate(splits):
        atomic_write(fold_path(directory, k), split.to_bytes())
        manifest["folds"].append({"fold": k, "sha256": split.sha256, **split.counts()})
    path = directory / SPLIT_MANIFEST_FILE
    write_json(path, manifest)
    return path


def load_split(path: Path) -> Split:
    roles = np.load(path, allow_pickle=False)
    if roles.dtype != np.int8 or roles.ndim != 1:
        raise SplitError(f"{path}: not a split file (expected a 1-d int8 array)")
    return Split(roles)
