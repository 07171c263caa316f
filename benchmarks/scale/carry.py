"""Carry a stopped stage's progress to a machine that shares only the repository.

A stage measured in parts (k-NN scoring HIGGS's 1.8 M rows: hours) keeps its progress in its
job's own files under the benchmark's work directory: saved prediction pieces, saved scores, a
training state, a prediction pass's finished batches. On a cluster or a workstation that directory
outlives the sitting; between machines that share nothing but a git checkout it does not. With
`--carry DIR` the benchmark copies those files into DIR (each up to a size limit; the larger ones
are named and stay behind) so that they can be committed, and a `--resume` run copies them back
before its stages run again.

Nothing carried is trusted for being there: each file is read only by the code that wrote it and
through its own checks (a k-NN piece is named by the digest of its rows, a training state carries
its data's fingerprint, a saved pass its key), so a copy that no longer matches the job is ignored.
Files are loaded without unpickling (numpy `allow_pickle=False`, torch `weights_only=True`).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tabrepro.errors import InputError
from tabrepro.io import atomic_path

# A git repository takes a k-NN piece (~1 MB), BiSHop's state or NPT's pass batches (~14.5 MB on
# HIGGS); NPT-Base's training state (~2.9 GB) stays behind and its steps are redone.
MAX_FILE_MB = 64.0


@dataclass
class Carried:
    """What one `mirror` did: files copied in, files removed (gone from the job), files too large."""

    copied: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    too_large: list[str] = field(default_factory=list)


def _files(root: Path) -> dict[str, Path]:
    """Regular files under `root` by their path relative to it; no links, and no hidden files (a
    writer's temporary file, `tabrepro.io.atomic_path`, is `.NAME.<random>`: never a finished one)."""
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and not p.name.startswith(".")
    }


def _same(a: Path, b: Path) -> bool:
    sa, sb = a.stat(), b.stat()
    return sa.st_size == sb.st_size and sa.st_mtime_ns == sb.st_mtime_ns


def _copy(source: Path, target: Path) -> None:
    """Copy with its modification time (so an unchanged file is not copied again), atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target, suffix=target.suffix) as temp:
        shutil.copyfile(source, temp)
        shutil.copystat(source, temp)


def mirror(work: Path, job_dirs: Iterable[Path], carry_dir: Path, *, max_file_mb: float = MAX_FILE_MB) -> Carried:
    """Make `carry_dir` hold the files of `job_dirs` (directories under `work`), by their paths
    relative to `work`: new and changed files copied, files no longer in a job removed, files above
    `max_file_mb` left out (and named)."""
    carried = Carried()
    wanted: set[str] = set()
    for job_dir in job_dirs:
        prefix = job_dir.relative_to(work).as_posix()
        for relative, path in _files(job_dir).items():
            name = f"{prefix}/{relative}"
            try:
                if path.stat().st_size > max_file_mb * 2**20:
                    carried.too_large.append(name)
                    continue
                wanted.add(name)
                target = carry_dir / name
                if not target.is_file() or not _same(path, target):
                    _copy(path, target)
                    carried.copied.append(name)
            except FileNotFoundError:  # the running job replaced or removed it meanwhile: next time
                continue
    for name, path in _files(carry_dir).items():
        if name not in wanted:
            path.unlink()
            carried.removed.append(name)
    for directory in sorted((p for p in carry_dir.rglob("*") if p.is_dir()), reverse=True):
        if not any(directory.iterdir()):
            directory.rmdir()
    return carried


def restore(carry_dir: Path, work: Path) -> list[str]:
    """Copy the carried files into `work` where it has none of that name; the names copied.

    A file already in `work` is the newer one (the same machine, which went on after the carry was
    made) and is kept.
    """
    work = work.resolve()
    copied = []
    for name, path in _files(carry_dir).items():
        target = (work / name).resolve()
        if not target.is_relative_to(work):  # a hand-edited carry directory, never one mirror wrote
            raise InputError(f"--carry: {path} would be copied outside the work directory {work}")
        if not target.exists():
            _copy(path, target)
            copied.append(name)
    return copied
