"""Split protocols: disjoint, complete, stratified, identical bytes for the same seed."""

from __future__ import annotations

import numpy as np
import pytest

from tabrepro.splits import (
    TEST,
    TRAIN,
    UNUSED,
    VAL,
    Split,
    SplitError,
    fold_path,
    load_split,
    make_all_splits,
    make_split,
    save_splits,
)

CV10 = {"kind": "kfold", "n_folds": 10, "val_fraction": 0.2}
HOLDOUT = {"kind": "holdout", "train": 0.7, "val": 0.1, "test": 0.2}
OPENML = {"kind": "holdout", "train": 0.7, "val": 0.09, "test": 0.21, "max_train_rows": 500}
SUBSAMPLED = {"kind": "holdout", "train": 0.7, "val": 0.09, "test": 0.21, "subsample_rows": 300}
FIXED = {"kind": "fixed_test", "val_fraction": 0.15}


def labels(n: int, p_positive: float = 0.37, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < p_positive, "M", "B")


@pytest.mark.parametrize("protocol", [CV10, HOLDOUT, OPENML, SUBSAMPLED])
@pytest.mark.parametrize("y", [None, labels(569)])
def test_every_fold_is_a_disjoint_cover(protocol, y):
    for split in make_all_splits(protocol, 569, seed=3, y=y):
        roles = split.roles
        assert roles.dtype == np.int8 and len(roles) == 569
        assert set(np.unique(roles)) <= {TRAIN, VAL, TEST, UNUSED}
        parts = [split.train, split.val, split.test, np.flatnonzero(roles == UNUSED)]
        assert sum(map(len, parts)) == 569
        assert len(np.unique(np.concatenate(parts))) == 569
        if "max_train_rows" not in protocol and "subsample_rows" not in protocol:
            assert (roles == UNUSED).sum() == 0


def test_kfold_tests_every_row_exactly_once():
    y = labels(569)
    times_tested = np.zeros(569, dtype=int)
    for split in make_all_splits(CV10, 569, seed=11, y=y):
        times_tested[split.test] += 1
    assert (times_tested == 1).all()


def test_kfold_sizes_follow_the_protocol():
    for split in make_all_splits(CV10, 569, seed=0, y=labels(569)):
        counts = split.counts()
        assert counts["test"] in (56, 57)
        assert counts["val"] == round(0.2 * 569)
        assert counts["train"] == 569 - counts["test"] - counts["val"]


@pytest.mark.parametrize("protocol", [CV10, HOLDOUT])
def test_class_proportions_are_kept(protocol):
    y = labels(1000, p_positive=0.2)
    overall = (y == "M").mean()
    for split in make_all_splits(protocol, 1000, seed=5, y=y):
        for part in (split.train, split.val, split.test):
            assert abs((y[part] == "M").mean() - overall) < 0.02


def test_same_seed_same_bytes_and_other_seed_other_bytes():
    y = labels(569)
    first = [s.to_bytes() for s in make_all_splits(CV10, 569, seed=7, y=y)]
    again = [s.to_bytes() for s in make_all_splits(CV10, 569, seed=7, y=y)]
    other = [s.to_bytes() for s in make_all_splits(CV10, 569, seed=8, y=y)]
    assert first == again
    assert first != other


def test_openml_protocol_caps_training_rows():
    split = make_split(OPENML, 5000, fold=0, seed=1, y=labels(5000))
    counts = split.counts()
    assert counts["train"] == 500
    assert counts["val"] == round(0.09 * 5000) and counts["test"] == round(0.21 * 5000)
    assert counts["unused"] == 5000 - 500 - counts["val"] - counts["test"]


def test_fixed_test_keeps_trailing_rows_as_test():
    split = make_split(FIXED, 1000, fold=0, seed=2, y=labels(1000), n_fixed_test_rows=300)
    assert (split.test == np.arange(700, 1000)).all()
    assert split.counts()["val"] == round(0.15 * 700)


def test_fixed_test_without_official_test_rows_is_refused():
    with pytest.raises(SplitError, match="official test set"):
        make_split(FIXED, 100, fold=0, seed=0)


def test_fold_out_of_range_is_refused():
    with pytest.raises(SplitError, match="fold 10 out of range"):
        make_split(CV10, 100, fold=10, seed=0)


def test_regression_targets_use_plain_kfold():
    splits = make_all_splits(CV10, 506, seed=0, y=None)
    times_tested = np.zeros(506, dtype=int)
    for split in splits:
        times_tested[split.test] += 1
    assert (times_tested == 1).all()


def test_saved_splits_round_trip_with_manifest_hashes(tmp_path):
    import json

    splits = make_all_splits(CV10, 200, seed=4, y=labels(200))
    manifest = save_splits(splits, tmp_path, {"dataset": "toy"})
    recorded = json.loads(manifest.read_text())
    for k, split in enumerate(splits):
        loaded = load_split(fold_path(tmp_path, k))
        assert (loaded.roles == split.roles).all()
        assert recorded["folds"][k]["sha256"] == loaded.sha256
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"fold{k}.npy" for k in range(10)] + ["splits.json"])


def test_load_split_rejects_other_arrays(tmp_path):
    path = tmp_path / "fold0.npy"
    np.save(path, np.arange(5, dtype=np.int64))
    with pytest.raises(SplitError, match="not a split file"):
        load_split(path)


def test_split_counts():
    split = Split(np.array([0, 0, 1, 2, -1], dtype=np.int8))
    assert split.counts() == {"train": 2, "val": 1, "test": 1, "unused": 1}


def test_a_subsampled_holdout_splits_only_its_drawn_rows():
    """subsample_rows: 300 rows drawn, then 70/9/21 % of them; the rest of the 569 unused."""
    counts = make_split(SUBSAMPLED, 569, fold=0, seed=3, y=labels(569)).counts()
    assert counts == {"train": 210, "val": 27, "test": 63, "unused": 269}
    assert make_split(SUBSAMPLED, 400, fold=0, seed=3).counts()["unused"] == 0  # 70 % of 400 < 300
