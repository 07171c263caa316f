"""Where the benchmarks' inputs and outputs live, and how a child process finds this package.

The benchmarks are not installed: `python -m benchmarks.X` finds them because the repository root
is the working directory. A child process started elsewhere (a scratch directory, the authors'
checkout) needs the root on its PYTHONPATH, and the stages of the scale benchmark also need the
`tabrepro` package of this checkout ahead of any other copy the interpreter has installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import tabrepro

__all__ = ["REPO_ROOT", "RECORDS", "RESULTS_PAGES", "pythonpath"]

REPO_ROOT = Path(__file__).resolve().parents[1]
RECORDS = REPO_ROOT / "records"  # committed run files (records/speed, records/scale, ...)
RESULTS_PAGES = REPO_ROOT / "docs" / "results"  # the pages generated from them


def pythonpath(existing: str | None = None) -> str:
    """A PYTHONPATH for a child process: this checkout's tabrepro, then `benchmarks`, then `existing`."""
    entries = [str(Path(tabrepro.__file__).resolve().parents[1]), str(REPO_ROOT)]
    if existing:
        entries.append(existing)
    return os.pathsep.join(dict.fromkeys(entries))
