"""Whether a dataset could be obtained: the record a fetch leaves, read by the workflow and scorecard.

A paper-scale run must survive a dataset it cannot download (no network, a dead URL, no mirror
copy): the fetch step records the failure in `<data>/raw/<source>/fetch_status.json` instead of
stopping the run, the workflow then leaves that dataset's jobs out, and the scorecard lists the
dataset with the recorded error. Deleting the status file makes the next run try the download
again (a failed fetch leaves no file or recorded hash behind to stop it); `tabrepro fetch --refresh`
also replaces the files and hashes of a fetch that succeeded. `verified` is True only where a
registry checksum or the OpenML API's md5 confirmed every file's bytes: it is False for a file no
checksum pins (trusted on first use) and for an OpenML fetch that had only the mirror to go by.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tabrepro.data.registry import get_source
from tabrepro.io import recorded_path, write_json
from tabrepro.layout import FETCH_STATUS_FILE


@dataclass(frozen=True)
class FetchStatus:
    """The outcome of fetching one registry source: its verified files, or why there are none."""

    source: str
    ok: bool
    error: str | None = None
    files: list[str] = field(default_factory=list)
    verified: bool = True  # bytes confirmed by a pinned checksum or OpenML's API md5 (records without the field: True)


def status_path(raw_dir: Path, source: str) -> Path:
    return Path(raw_dir) / source / FETCH_STATUS_FILE


def write_fetch_status(raw_dir: Path, status: FetchStatus) -> Path:
    """Write the status atomically (a crash never leaves half a file) and return its path. Files
    are named from the data directory's parent (raw_dir is <data>/raw), as results name splits:
    the record names no place on the machine that fetched them."""
    path = status_path(raw_dir, status.source)
    path.parent.mkdir(parents=True, exist_ok=True)
    named = replace(status, files=[recorded_path(name, Path(raw_dir).parent) for name in status.files])
    write_json(path, asdict(named), sort_keys=False)
    return path


def read_fetch_status(raw_dir: Path, source: str) -> FetchStatus | None:
    """The recorded outcome, or None when the source has not been fetched yet.

    An embedded source (shipped inside a library, e.g. scikit-learn's WDBC) needs no fetch and is
    always available.
    """

    if get_source(source).embedded:
        return FetchStatus(source=source, ok=True)
    path = status_path(raw_dir, source)
    if not path.is_file():
        return None
    raw = json.loads(path.read_text(encoding="utf-8"))
    return FetchStatus(
        source=raw["source"],
        ok=bool(raw["ok"]),
        error=raw.get("error"),
        files=list(raw.get("files") or []),
        verified=bool(raw.get("verified", True)),
    )


def unobtainable_datasets(params, paper: str) -> dict[str, str]:
    """The paper's selected datasets whose fetch was recorded as failed, each with its error.

    `params` is a tabrepro.config.Params. Datasets not fetched yet are not listed: only a recorded
    failure makes a dataset unobtainable.
    """
    failed = {}
    for dataset in params.selected_datasets(paper):
        status = read_fetch_status(params.raw_dir(), params.source_of(paper, dataset))
        if status is not None and not status.ok:
            failed[dataset] = status.error or "unknown error"
    return failed
