"""What a result needs to be traced back: code version, package versions, resources used."""

from __future__ import annotations

import platform
import resource
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import tabrepro

TRACKED_PACKAGES = (
    "numpy", "pandas", "scikit-learn", "scipy", "torch", "xgboost-cpu", "catboost", "lightgbm",
)


def git_commit(repo: Path | None = None) -> str:
    """HEAD's hash, with '+dirty' when tracked files differ from it; 'unknown' outside git."""
    cwd = repo or Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "tabrepro": tabrepro.__version__}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def peak_memory_mb() -> float:
    """Peak resident memory of this process and its finished children (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0


def provenance() -> dict:
    return {
        "git_commit": git_commit(),
        "packages": package_versions(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
