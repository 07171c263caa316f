"""scripts/compare_outputs.py compare: two output trees, file by file, provenance and timing aside."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("compare_outputs")


def _run(tmp_path: Path, name: str, split_file: str, *, auroc: float = 0.99) -> Path:
    """A run directory with one result whose split path is `split_file` ({run} for the run's own)."""
    run = tmp_path / name
    job = run / "results" / "npt" / "breast_cancer" / "knn" / "fold0"
    job.mkdir(parents=True)
    metrics = {
        "test": {"auroc": auroc},
        "split": {"file": split_file.format(run=run), "sha256": "ab"},
        "wall_time_s": float(len(name)),  # timing differs between runs and is not compared
    }
    (job / "metrics.json").write_text(json.dumps(metrics))
    np.savez(job / "predictions.npz", outputs=np.arange(3, dtype=np.float32))
    return run


def test_a_path_recorded_absolute_in_one_run_and_relative_in_the_other_needs_the_run_dirs(script, tmp_path, capsys):
    old = _run(tmp_path, "old", "{run}/data/splits/npt/breast_cancer/fold0.npy")
    new = _run(tmp_path, "newer", "data/splits/npt/breast_cancer/fold0.npy")
    assert script.compare_trees(old / "results", new / "results") == 1
    assert "split.file" in capsys.readouterr().out
    record = tmp_path / "check.json"
    assert script.compare_trees(old / "results", new / "results", record, (old, new), ("612e64c", "e5b58d1")) == 0
    written = json.loads(record.read_text())
    assert written["code"] == {"a": "612e64c", "b": "e5b58d1"} and not written["differs"]
    assert str(tmp_path) not in record.read_text()


def test_the_run_dirs_hide_no_change_of_a_result(script, tmp_path, capsys):
    old = _run(tmp_path, "old", "{run}/data/splits/npt/breast_cancer/fold0.npy")
    new = _run(tmp_path, "newer", "data/splits/npt/breast_cancer/fold1.npy", auroc=0.98)
    assert script.compare_trees(old / "results", new / "results", run_dirs=(old, new)) == 1
    out = capsys.readouterr().out
    assert "split.file" in out and "test.auroc: 0.99 vs 0.98" in out
