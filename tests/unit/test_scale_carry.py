"""benchmarks.scale.carry: a stopped stage's saved progress copied out for git and back in."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.scale.carry import mirror, restore
from tabrepro.errors import InputError


def _job(work: Path) -> Path:
    job = work / "results" / "npt" / "higgs" / "knn" / "fold0"
    pieces = job / "state" / "tuning" / "ab12" / "config0" / "predictions"
    pieces.mkdir(parents=True)
    (pieces / "proba-1.npy").write_bytes(b"a piece")
    (pieces / ".proba-2.npy.0a1b2c3d.npy").write_bytes(b"a piece being written")
    (job / "state.pt").write_bytes(b"x" * 3 * 2**20)
    return job


def test_mirror_copies_the_small_finished_files_and_names_the_large_ones(tmp_path):
    work, carry = tmp_path / "work", tmp_path / "carry"
    job = _job(work)
    done = mirror(work, [job], carry, max_file_mb=2)
    piece = "results/npt/higgs/knn/fold0/state/tuning/ab12/config0/predictions/proba-1.npy"
    assert done.copied == [piece] and done.too_large == ["results/npt/higgs/knn/fold0/state.pt"]
    assert sorted(p.relative_to(carry).as_posix() for p in carry.rglob("*") if p.is_file()) == [piece]
    assert mirror(work, [job], carry, max_file_mb=2).copied == []  # unchanged: nothing copied again

    (job / "state" / "tuning" / "ab12" / "config0" / "predictions" / "proba-1.npy").write_bytes(b"rewritten")
    assert mirror(work, [job], carry, max_file_mb=2).copied == [piece]
    assert (carry / piece).read_bytes() == b"rewritten"


def test_mirror_removes_what_the_job_no_longer_has(tmp_path):
    work, carry = tmp_path / "work", tmp_path / "carry"
    job = _job(work)
    mirror(work, [job], carry, max_file_mb=2)
    (job / "state").joinpath("tuning", "ab12", "config0", "predictions", "proba-1.npy").unlink()
    done = mirror(work, [job], carry, max_file_mb=2)
    assert len(done.removed) == 1 and not any(carry.rglob("*"))  # emptied folders go too


def test_restore_fills_a_fresh_work_directory_and_keeps_newer_files(tmp_path):
    work, carry = tmp_path / "work", tmp_path / "carry"
    job = _job(work)
    mirror(work, [job], carry, max_file_mb=2)
    other = tmp_path / "other-machine"
    assert restore(carry, other) == ["results/npt/higgs/knn/fold0/state/tuning/ab12/config0/predictions/proba-1.npy"]
    restored = other / "results/npt/higgs/knn/fold0/state/tuning/ab12/config0/predictions/proba-1.npy"
    assert restored.read_bytes() == b"a piece"
    restored.write_bytes(b"went on meanwhile")
    assert restore(carry, other) == [] and restored.read_bytes() == b"went on meanwhile"


def test_restore_refuses_a_link_out_of_the_work_directory(tmp_path):
    carry = tmp_path / "carry"
    carry.mkdir()
    (carry / "results").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "results").symlink_to(outside)  # the work directory's own link
    (carry / "results" / "f.npy").write_bytes(b"x")
    with pytest.raises(InputError, match="outside the work directory"):
        restore(carry, tmp_path / "work")
    assert not any(outside.iterdir())
