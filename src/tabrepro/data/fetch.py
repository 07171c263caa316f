"""Download registry datasets into raw_dir/<name>/, verified and atomically.

Why it is built this way: a reproduction is only as good as its inputs, so every file is checked
(sha256 from the registry, OpenML's md5, or the hash recorded at first download) before it gets
its final name. Bytes stream into a temporary file beside the target and are renamed only after
the check passes, so an interrupted, truncated or wrong download never leaves a file that a later
step could mistake for data. Nothing downloaded is ever executed or unpickled: files are hashed,
renamed, and (for .zip archives) exactly one named member is copied out.

Trust on first use covers only bytes that passed every check: a file with no published checksum
is recorded in SHA256SUMS, but forgotten again (file and hash) when it cannot be extracted or
parsed, or when its end was never announced. Downloads go only where the registry and the
configured hosts say: redirects are followed to https only (to http only on the configured mirror
or API), and OpenML metadata is checked (integer ids, no local paths). An OpenML file's md5 comes
from the registry or from the OpenML API, never from the mirror that serves the bytes; a fetch
that had only the mirror to go by is reported as unverified, and so is one of a file that no
registry checksum pins (trust on first use checks only that the bytes do not change later).
A mirror copy of an unpinned file that fails to extract or parse is followed by the canonical URL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from tabrepro.data.availability import FetchStatus
from tabrepro.data.download import DEFAULT_DEADLINE_SECONDS, OPENML_DEFAULT_URL, FetchOptions, ensure_file
from tabrepro.data.fetch_errors import (
    ChecksumMismatchError,
    DeadlineExceededError,
    FetchError,
    NotFoundError,
    TruncatedDownloadError,
    UnprovenDownloadError,
    UnsafeArchiveError,
    UnsafeLocationError,
)
from tabrepro.data.openml import OPENML_URL_ENV, OpenMLMetadata, fetch_openml, read_openml_metadata
from tabrepro.data.registry import OPENML_FILES, DatasetSource, RemoteFile, get_source
from tabrepro.data.standin import MARKER_FILE, read_marker
from tabrepro.data.verify import (
    MANIFEST_NAME,
    Expectation,
    extract_member,
    forget_files,
    hash_file,
    read_manifest,
    record_hash,
    remove_if_empty,
)
from tabrepro.layout import FETCH_STATUS_FILE

log = logging.getLogger(__name__)

# The fetcher's public names, wherever they are defined (tabrepro.data.download, .verify, .openml,
# .fetch_errors): callers import them from here.
__all__ = [
    "DEFAULT_DEADLINE_SECONDS",
    "MANIFEST_NAME",
    "ChecksumMismatchError",
    "DeadlineExceededError",
    "FetchError",
    "FetchOptions",
    "NotFoundError",
    "OpenMLMetadata",
    "TruncatedDownloadError",
    "UnprovenDownloadError",
    "UnsafeArchiveError",
    "UnsafeLocationError",
    "extract_member",
    "fetch_dataset",
    "fetch_dataset_status",
    "fetch_source",
    "fetch_source_status",
    "forget_dataset",
    "refreshing",
    "read_openml_metadata",
]


def fetch_dataset(name: str, raw_dir: Path, **settings: Any) -> list[Path]:
    """Fetch registry dataset `name` into raw_dir/<name>/ and return the files that are there
    (the keywords of fetch_dataset_status)."""
    return [Path(p) for p in fetch_dataset_status(name, raw_dir, **settings).files]


def fetch_dataset_status(
    name: str,
    raw_dir: Path,
    *,
    mirror: str | None = None,
    retries: int = 4,
    backoff_seconds: float = 1.0,
    timeout_seconds: float = 60,
    progress: bool = True,
    openml_url: str | None = None,
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
) -> FetchStatus:
    """Fetch registry dataset `name` into raw_dir/<name>/; the outcome as the fetch record: its
    files and whether they are verified.

    `mirror` (an http(s) URL or a local directory) is tried before the canonical URL; files
    already present and still matching their checksum are not downloaded again.
    """
    options = FetchOptions(
        mirror=mirror,
        retries=retries,
        backoff_seconds=backoff_seconds,
        timeout_seconds=timeout_seconds,
        progress=progress,
        openml_url=openml_url or os.environ.get(OPENML_URL_ENV) or OPENML_DEFAULT_URL,
        deadline_seconds=deadline_seconds,
    )
    return fetch_source_status(get_source(name), Path(raw_dir), options)


def fetch_source(source: DatasetSource, raw_dir: Path, options: FetchOptions | None = None) -> list[Path]:
    """Fetch an already-resolved registry entry (also used by tests with fabricated entries)."""
    return [Path(p) for p in fetch_source_status(source, raw_dir, options).files]


def fetch_source_status(source: DatasetSource, raw_dir: Path, options: FetchOptions | None = None) -> FetchStatus:
    """Fetch an already-resolved registry entry; the record says whether its checks had a source
    independent of the mirror (see `verified` on FetchStatus)."""
    options = options or FetchOptions()
    target_dir = Path(raw_dir) / source.name
    created = not target_dir.exists()
    target_dir.mkdir(parents=True, exist_ok=True)
    try:
        if source.is_openml:
            paths, verified = fetch_openml(source, target_dir, options)
        else:
            paths = _fetch_url_source(source, target_dir, options)
            verified = all(remote.accepted_sha256 for remote in source.files)
    except BaseException:
        remove_if_empty(target_dir, created)
        raise
    return FetchStatus(source.name, ok=True, files=[str(p) for p in paths], verified=verified)


def _fetched_files(name: str, raw_dir: Path) -> list[Path]:
    """What fetching `name` left in raw_dir/<name>/: its files, their recorded hashes, the fetch
    record and a stand-in marker."""
    source = get_source(name)
    directory = Path(raw_dir) / source.name
    names = set(OPENML_FILES) if source.is_openml else {n for f in source.files for n in (f.name, f.member) if n}
    paths = [directory / n for n in sorted(names | {MANIFEST_NAME, FETCH_STATUS_FILE, MARKER_FILE})]
    return [p for p in paths if p.is_file() or p.is_symlink()]


def forget_dataset(name: str, raw_dir: Path) -> list[Path]:
    """Delete what fetching `name` left in raw_dir/<name>/ (see `_fetched_files`), so that the
    next fetch starts over; returns what was removed."""
    removed = _fetched_files(name, raw_dir)
    for path in removed:
        path.unlink()
    remove_if_empty(Path(raw_dir) / get_source(name).name, True)
    return removed


@contextlib.contextmanager
def refreshing(name: str, raw_dir: Path) -> Iterator[list[Path]]:
    """A fetch that starts over without losing the copy it replaces: what fetching `name` left
    (see `_fetched_files`) is moved aside for the block, deleted once the block ends normally,
    and put back when it fails, so that a bad mirror never leaves less than there was.
    Yields the paths set aside (to say what the refresh replaced)."""
    paths = _fetched_files(name, raw_dir)
    directory = Path(raw_dir) / get_source(name).name
    if not paths:
        yield []
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{directory.name}.refresh.", dir=directory.parent))
    moved: list[Path] = []
    try:
        for path in paths:
            os.replace(path, aside / path.name)
            moved.append(path)
        yield paths
    except BaseException:
        for path in moved:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(aside / path.name, path)  # over whatever the failed fetch left
        shutil.rmtree(aside, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _fetch_url_source(source: DatasetSource, target_dir: Path, options: FetchOptions) -> list[Path]:
    """The source's files; a mirror copy of an unpinned file that does not extract or parse is
    dropped and the canonical URL(s) tried instead (the only other copy anyone vouches for)."""
    try:
        return _fetch_url_files(source, target_dir, options)
    except _UnusableUnpinnedCopy as exc:
        if not options.mirror or not any(f.url for f in source.files if not f.accepted_sha256):
            raise exc.error from exc.error.__cause__
        log.warning("%s; trying the canonical URL(s) without the mirror", exc.error)
        try:
            return _fetch_url_files(source, target_dir, replace(options, mirror=None))
        except _UnusableUnpinnedCopy as again:
            raise again.error from again.error.__cause__
        except FetchError as canonical:  # the mirror's bad bytes explain the failure best
            raise type(exc.error)(f"{exc.error} (the canonical URL failed too: {canonical})") from exc.error


class _UnusableUnpinnedCopy(Exception):
    """Carries the FetchError of an unpinned copy that was dropped (see _fetch_url_source)."""

    def __init__(self, error: FetchError) -> None:
        super().__init__(str(error))
        self.error = error


def _fetch_url_files(source: DatasetSource, target_dir: Path, options: FetchOptions) -> list[Path]:
    paths: list[Path] = []
    fresh_unpinned = False
    for remote in source.files:
        files, fresh = _fetch_remote_file(source, remote, target_dir, options)
        paths += files
        fresh_unpinned |= fresh and not remote.accepted_sha256
    if fresh_unpinned:
        _check_parses(source, target_dir)
    return paths


def _unpinned_names(source: DatasetSource) -> list[str]:
    """Files (and extracted members) whose only check is the hash recorded at first download."""
    return [n for f in source.files if not f.accepted_sha256 for n in (f.name, f.member) if n]


def _check_parses(source: DatasetSource, target_dir: Path) -> None:
    """Parse what was fetched, so that bytes that do not parse are never trusted on first use."""
    from tabrepro.data.parse import ParseError, parse_source  # deferred: parsing loads pandas

    if read_marker(target_dir) is not None:
        return  # a stand-in directory: prepare decides about it
    try:
        parse_source(source, target_dir.parent)
    except ParseError as exc:
        names = _unpinned_names(source)
        forget_files(target_dir, names)
        error = FetchError(f"{exc}; unpinned {', '.join(names)} removed with their recorded hashes")
        error.__cause__ = exc
        raise _UnusableUnpinnedCopy(error) from exc


def _fetch_remote_file(
    source: DatasetSource, remote: RemoteFile, target_dir: Path, options: FetchOptions
) -> tuple[list[Path], bool]:
    """The file (and its extracted member) as paths, and whether anything was (re)written."""
    dest = target_dir / remote.name
    expectation = Expectation(remote.accepted_sha256, None, remote.size)
    fresh = ensure_file(source, dest, remote.mirror_path, [remote.url] if remote.url else [], expectation, options)
    if remote.member is None:
        return [dest], fresh
    member_path = target_dir / remote.member
    recorded = read_manifest(target_dir).get(remote.member)
    if fresh or recorded is None or not member_path.is_file() or hash_file(member_path).sha256 != recorded:
        try:
            member_path = extract_member(dest, remote.member, target_dir)
        except FetchError as exc:
            if expectation.pinned:
                raise
            forget_files(target_dir, [remote.name, remote.member])
            error = type(exc)(f"{exc}; unpinned {remote.name} removed with its recorded hash")
            error.__cause__ = exc
            raise _UnusableUnpinnedCopy(error) from exc
        record_hash(target_dir, remote.member, hash_file(member_path).sha256)
        fresh = True
    return [dest, member_path], fresh
