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
that had only the mirror to go by is reported as unverified.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import stat
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from tabrepro import __version__
from tabrepro.data.availability import FetchStatus
from tabrepro.data.registry import OPENML_FILES, DatasetSource, RemoteFile, get_source, safe_relative_path
from tabrepro.errors import InputError
from tabrepro.io import atomic_open, atomic_write
from tabrepro.layout import FETCH_STATUS_FILE

log = logging.getLogger(__name__)

OPENML_URL_ENV = "TABREPRO_OPENML_URL"
OPENML_DEFAULT_URL = "https://api.openml.org"
MANIFEST_NAME = "SHA256SUMS"  # hashes of everything fetched into raw_dir/<name>/
CHUNK_SIZE = 1 << 20
MAX_BACKOFF_SECONDS = 60.0
DEFAULT_DEADLINE_SECONDS = 3600.0  # one file from one location, retries included
OPENML_HOSTS = ("api.openml.org", "www.openml.org", "openml.org")  # where a description's url may point
USER_AGENT = f"tabrepro/{__version__} (dataset fetcher)"
_OPENML_TASK_TYPES = {
    "Supervised Classification": ("binary", "multiclass"),
    "Supervised Regression": ("regression",),
}


class FetchError(InputError, RuntimeError):
    """A dataset file could not be fetched; the message names the dataset, file and URL."""


class NotFoundError(FetchError):
    """The server (or mirror directory) does not have the file: not retried."""


class ChecksumMismatchError(FetchError):
    """The downloaded bytes are not the registered ones (checksum or size)."""


class TruncatedDownloadError(FetchError):
    """Fewer bytes arrived than the server announced."""


class UnsafeArchiveError(FetchError):
    """An archive member would land outside the dataset directory (absolute path, '..', link)."""


class UnsafeLocationError(FetchError):
    """A redirect or a metadata field points where downloads must not go (a local path, ftp, ...)."""


class DeadlineExceededError(FetchError):
    """One file's download from one location took longer than the configured deadline."""


class UnprovenDownloadError(FetchError):
    """An unpinned file whose end the server never announced: a cut-short body would look whole."""


class _TransientError(FetchError):
    """Network trouble worth retrying (timeouts, refused connections, HTTP 5xx/408/429)."""


@dataclass(frozen=True)
class FetchOptions:
    mirror: str | None = None
    retries: int = 4
    backoff_seconds: float = 1.0
    timeout_seconds: float = 60.0
    progress: bool = True
    openml_url: str = OPENML_DEFAULT_URL
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS

    @property
    def http_origins(self) -> frozenset[tuple[str, int | None]]:
        """(host, port) of the configured plain-http hosts: the only http a download may reach."""
        configured = (self.mirror or "", self.openml_url)
        return frozenset(_origin(u) for u in configured if u.startswith("http://"))


@dataclass(frozen=True)
class Location:
    """Where one copy of a file may be read: a URL, or a file in the configured mirror directory."""

    address: str
    local: bool = False  # a path in the configured mirror directory
    mirror: bool = False  # served by the configured mirror (URL or directory)


@dataclass(frozen=True)
class Expectation:
    """What a file must match; all empty means 'unpinned' (trust on first download)."""

    sha256: tuple[str, ...] = ()
    md5: str | None = None
    size: int | None = None
    checked_after: bool = False  # the content itself is checked once it is here (a JSON description)

    @property
    def pinned(self) -> bool:
        return bool(self.sha256) or self.md5 is not None


@dataclass(frozen=True)
class Digest:
    sha256: str
    md5: str
    size: int


# ----------------------------------------------------------------------------------------------
# public entry points


def fetch_dataset(
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
) -> list[Path]:
    """Fetch registry dataset `name` into raw_dir/<name>/ and return the files that are there.

    `mirror` (an http(s) URL or a local directory) is tried before the canonical URL; files
    already present and still matching their checksum are not downloaded again.
    """
    status = fetch_dataset_status(
        name,
        raw_dir,
        mirror=mirror,
        retries=retries,
        backoff_seconds=backoff_seconds,
        timeout_seconds=timeout_seconds,
        progress=progress,
        openml_url=openml_url,
        deadline_seconds=deadline_seconds,
    )
    return [Path(p) for p in status.files]


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
    """Like fetch_dataset, but the outcome as the fetch record: its files and whether they are verified."""
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
            paths, verified = _fetch_openml(source, target_dir, options)
        else:
            paths, verified = _fetch_url_source(source, target_dir, options), True
    except BaseException:
        _remove_if_empty(target_dir, created)
        raise
    return FetchStatus(source.name, ok=True, files=[str(p) for p in paths], verified=verified)


def forget_dataset(name: str, raw_dir: Path) -> list[Path]:
    """Delete what fetching `name` left in raw_dir/<name>/ (its files, their recorded hashes, the
    fetch record, a stand-in marker), so that the next fetch starts over; returns what was removed."""
    from tabrepro.data.standin import MARKER_FILE

    source = get_source(name)
    directory = Path(raw_dir) / source.name
    names = set(OPENML_FILES) if source.is_openml else {n for f in source.files for n in (f.name, f.member) if n}
    removed = []
    for file_name in sorted(names | {MANIFEST_NAME, FETCH_STATUS_FILE, MARKER_FILE}):
        path = directory / file_name
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(path)
    _remove_if_empty(directory, True)
    return removed


def extract_member(archive: Path, member: str, dest_dir: Path) -> Path:
    """Copy exactly one member out of a zip archive into dest_dir, refusing unsafe names."""
    if not safe_relative_path(member):
        raise UnsafeArchiveError(f"{archive.name}: refusing member {member!r}: absolute or '..' path")
    try:
        with zipfile.ZipFile(archive) as zf:
            return _extract_checked(zf, archive, member, dest_dir)
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{archive}: not a readable zip archive ({exc})") from exc


# ----------------------------------------------------------------------------------------------
# url sources


def _label(source: DatasetSource, file_name: str) -> str:
    return f"dataset {source.name!r}, file {file_name}"


def _fetch_url_source(source: DatasetSource, target_dir: Path, options: FetchOptions) -> list[Path]:
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
    from tabrepro.data.parse import ParseError, parse_source
    from tabrepro.data.standin import read_marker

    if read_marker(target_dir) is not None:
        return  # a stand-in directory: prepare decides about it
    try:
        parse_source(source, target_dir.parent)
    except ParseError as exc:
        names = _unpinned_names(source)
        _forget(target_dir, names)
        raise FetchError(f"{exc}; unpinned {', '.join(names)} removed with their recorded hashes") from exc


def _fetch_remote_file(
    source: DatasetSource, remote: RemoteFile, target_dir: Path, options: FetchOptions
) -> tuple[list[Path], bool]:
    """The file (and its extracted member) as paths, and whether anything was (re)written."""
    dest = target_dir / remote.name
    expectation = Expectation(remote.accepted_sha256, None, remote.size)
    fresh = _ensure_file(source, dest, remote.mirror_path, [remote.url] if remote.url else [], expectation, options)
    if remote.member is None:
        return [dest], fresh
    member_path = target_dir / remote.member
    recorded = _read_manifest(target_dir).get(remote.member)
    if fresh or recorded is None or not member_path.is_file() or _hash_file(member_path).sha256 != recorded:
        try:
            member_path = extract_member(dest, remote.member, target_dir)
        except FetchError as exc:
            if expectation.pinned:
                raise
            _forget(target_dir, [remote.name, remote.member])
            raise type(exc)(f"{exc}; unpinned {remote.name} removed with its recorded hash") from exc
        _record(target_dir, remote.member, _hash_file(member_path).sha256)
        fresh = True
    return [dest, member_path], fresh


def _ensure_file(
    source: DatasetSource,
    dest: Path,
    mirror_path: str,
    urls: list[str],
    expectation: Expectation,
    options: FetchOptions,
) -> bool:
    """Make dest a verified copy; True when it was (re)downloaded, False when already good."""
    label = _label(source, dest.name)
    recorded = _read_manifest(dest.parent).get(dest.name)
    present = dest.is_file()
    if present and _still_valid(dest, expectation, recorded, label):
        log.info("%s: already present and verified", label)
        return False
    candidates = _candidates(mirror_path, urls, options.mirror)
    if not candidates:
        where = f" ({source.homepage})" if source.homepage else ""
        problem = f"{dest} fails verification and there is" if present else "there is"
        raise FetchError(
            f"{label}: {problem} no public download URL{where}; pass a mirror that holds "
            f"{mirror_path} or put the right file at {dest}"
        )
    # A present but failing file is only replaced once a verified copy has arrived.
    digest, _ = _download_any(candidates, dest, expectation, label, options)
    if not expectation.pinned:
        log.warning("%s: no published checksum; recorded sha256 %s", label, digest.sha256)
    _record(dest.parent, dest.name, digest.sha256)
    return True


def _still_valid(path: Path, expectation: Expectation, recorded: str | None, label: str) -> bool:
    """Re-verify a file that is already there (it is left in place either way)."""
    digest = _hash_file(path)
    if expectation.sha256:
        ok = digest.sha256 in expectation.sha256
    elif expectation.md5:
        ok = digest.md5 == expectation.md5
    elif recorded:
        ok = digest.sha256 == recorded
    else:
        log.warning("%s: present but unpinned and unrecorded; trusting it", label)
        _record(path.parent, path.name, digest.sha256)
        ok = True
    if ok and expectation.size is not None:
        ok = digest.size == expectation.size
    if not ok:
        log.warning("%s: existing file fails verification; downloading it again", label)
    return ok


def _candidates(mirror_path: str, urls: list[str], mirror: str | None) -> list[Location]:
    """Mirror location first (URL or local path), then the canonical URL(s)."""
    found: list[Location] = []
    if mirror:
        if mirror.startswith(("http://", "https://")):
            found.append(Location(mirror.rstrip("/") + "/" + urllib.parse.quote(mirror_path), mirror=True))
        else:
            root = mirror[len("file://") :] if mirror.startswith("file://") else mirror
            found.append(Location(str(Path(root) / mirror_path), local=True, mirror=True))
    taken = {f.address for f in found}
    return found + [Location(u) for u in urls if u not in taken]


# ----------------------------------------------------------------------------------------------
# downloading


def _download_any(
    candidates: list[Location],
    dest: Path,
    expectation: Expectation,
    label: str,
    options: FetchOptions,
    accept: Callable[[Path], None] | None = None,
) -> tuple[Digest, Location]:
    """Try each location in turn (a copy that `accept` refuses is removed and counts as a failure);
    raise the last failure, mentioning the earlier ones."""
    failures: list[FetchError] = []
    for location in candidates:
        try:
            digest = _download_with_retries(location, dest, expectation, label, options)
            if accept is not None:
                _accept_or_remove(dest, accept)
            return digest, location
        except FetchError as exc:
            log.warning("%s", exc)
            failures.append(exc)
    raise _combined(failures)


def _accept_or_remove(path: Path, accept: Callable[[Path], None]) -> None:
    try:
        accept(path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _combined(failures: list[FetchError]) -> FetchError:
    main = max(failures, key=_severity)
    if len(failures) == 1:
        return main
    others = "; ".join(str(f) for f in failures if f is not main)
    combined = type(main)(f"{main} (also tried: {others})")
    combined.__cause__ = main
    return combined


def _severity(error: FetchError) -> int:
    """Which failure best explains a fetch: wrong bytes beat a cut connection beat a missing file."""
    ranks = (
        (ChecksumMismatchError, 3),
        (TruncatedDownloadError, 2),
        (UnsafeArchiveError, 2),
        (UnsafeLocationError, 2),
        (UnprovenDownloadError, 2),
        (DeadlineExceededError, 2),
        (NotFoundError, 0),
    )
    return next((rank for kind, rank in ranks if isinstance(error, kind)), 1)  # 1: network/HTTP trouble


def _download_with_retries(
    location: Location, dest: Path, expectation: Expectation, label: str, options: FetchOptions
) -> Digest:
    """Retry network trouble with backoff; the deadline covers all attempts at this location."""
    deadline = time.monotonic() + options.deadline_seconds
    attempts = options.retries + 1
    for attempt in range(attempts):
        try:
            return _download_once(location, dest, expectation, label, options, deadline)
        except (_TransientError, TruncatedDownloadError) as exc:
            delay = min(options.backoff_seconds * 2**attempt, MAX_BACKOFF_SECONDS)
            if attempt + 1 == attempts or time.monotonic() + delay > deadline:
                final = FetchError if isinstance(exc, _TransientError) else type(exc)
                raise final(f"{exc} (gave up after {attempt + 1} attempt(s))") from exc
            log.warning("%s; retrying in %.1f s", exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _download_once(
    location: Location, dest: Path, expectation: Expectation, label: str, options: FetchOptions, deadline: float
) -> Digest:
    with _open_location(location, options, label) as (stream, length, bounded):
        body = _Body(stream, length, bounded, location.address, deadline, options.deadline_seconds)
        return _stream_to_file(body, dest, expectation, label, options.progress)


@dataclass(frozen=True)
class _Body:
    """An open response body and what is known about where it ends."""

    stream: IO[bytes]
    length: int | None  # announced length (Content-Length, or a local file's size)
    bounded: bool  # its end is announced (a length, or chunked encoding): a cut shows
    location: str
    deadline: float  # time.monotonic() by which the whole file must have arrived
    deadline_seconds: float


@contextlib.contextmanager
def _open_location(
    location: Location, options: FetchOptions, label: str
) -> Iterator[tuple[IO[bytes], int | None, bool]]:
    """Open a URL or a local mirror file as (byte stream, announced length, end announced)."""
    if location.local:
        path = Path(location.address)
        if not path.is_file():
            raise NotFoundError(f"{label}: not found in mirror: {path}")
        with path.open("rb") as handle:
            yield handle, path.stat().st_size, True
        return
    response = _urlopen(location.address, options, label)
    with response:
        length = response.headers.get("Content-Length")
        announced = int(length) if length and length.isdigit() else None
        yield response, announced, announced is not None or bool(getattr(response, "chunked", False))


def _origin(url: str) -> tuple[str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return (parts.hostname or "", parts.port)


def _followable(url: str, http_origins: frozenset[tuple[str, int | None]]) -> bool:
    """https anywhere; plain http only to a configured host."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    return scheme == "https" or (scheme == "http" and _origin(url) in http_origins)


class _RedirectGuard(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to https (or to plain http on a configured host): never to ftp://,
    file:// or another plain-http host."""

    def __init__(self, http_origins: frozenset[tuple[str, int | None]], label: str) -> None:
        super().__init__()
        self.http_origins = http_origins
        self.label = label

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if not _followable(newurl, self.http_origins):
            fp.close()
            raise UnsafeLocationError(
                f"{self.label}: {req.full_url} redirects to {newurl!r}; only https (or http on the "
                "configured mirror) is followed"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _urlopen(url: str, options: FetchOptions, label: str) -> http.client.HTTPResponse:
    """Open a URL from the registry or a configured host; a redirect may leave it for https only
    (or for plain http on a configured host, or on the URL's own host when the registry says http)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    own = {_origin(url)} if url.startswith("http://") else set()
    opener = urllib.request.build_opener(_RedirectGuard(options.http_origins | own, label))
    try:
        return opener.open(request, timeout=options.timeout_seconds)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            raise NotFoundError(f"{label}: not found (HTTP {exc.code}) at {url}") from exc
        if exc.code in (408, 429) or exc.code >= 500:
            raise _TransientError(f"{label}: HTTP {exc.code} {exc.reason} from {url}") from exc
        raise FetchError(f"{label}: HTTP {exc.code} {exc.reason} from {url}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise _TransientError(f"{label}: cannot reach {url}: {reason}") from exc


def _read_chunk(body: _Body, label: str, received: int) -> bytes:
    """What one read of the socket (or file) gives, so that a trickle still meets the deadline."""
    if time.monotonic() > body.deadline:
        raise DeadlineExceededError(
            f"{label}: download from {body.location} not finished within {body.deadline_seconds:g} s "
            f"(fetch.deadline_seconds) after {received} bytes; giving up on it"
        )
    try:
        return body.stream.read1(CHUNK_SIZE)  # type: ignore[attr-defined]
    except http.client.IncompleteRead as exc:
        raise TruncatedDownloadError(
            f"{label}: download from {body.location} truncated after {received + len(exc.partial)} bytes"
        ) from exc
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        raise _TransientError(f"{label}: connection to {body.location} failed after {received} bytes: {exc}") from exc


def _progress_bar(total: int | None, name: str, enabled: bool) -> tqdm:
    visible = enabled and sys.stderr.isatty()
    return tqdm(total=total, desc=name, unit="B", unit_scale=True, unit_divisor=1024, disable=not visible, leave=False)


def _stream_to_file(body: _Body, dest: Path, expectation: Expectation, label: str, progress: bool) -> Digest:
    """Stream into a temp file beside dest, verify, then rename; the temp file never survives
    (a failed check raises inside `atomic_open`, which removes it)."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with atomic_open(dest, suffix=".part") as out:
        with _progress_bar(body.length, dest.name, progress) as bar:
            while chunk := _read_chunk(body, label, size):
                out.write(chunk)
                sha.update(chunk)
                md5.update(chunk)
                size += len(chunk)
                bar.update(len(chunk))
        if body.length is not None and size != body.length:
            raise TruncatedDownloadError(
                f"{label}: download from {body.location} truncated: expected {body.length} bytes, got {size}"
            )
        digest = Digest(sha.hexdigest(), md5.hexdigest(), size)
        _verify(digest, expectation, label, body.location)
        if not (body.bounded or expectation.pinned or expectation.size is not None or expectation.checked_after):
            raise UnprovenDownloadError(
                f"{label}: {body.location} sent {size} bytes without a Content-Length, so a body cut "
                "short cannot be told from a whole one, and no checksum is published; not kept"
            )
    return digest


def _verify(digest: Digest, expectation: Expectation, label: str, location: str) -> None:
    if expectation.size is not None and digest.size != expectation.size:
        raise ChecksumMismatchError(
            f"{label}: size mismatch for {location}: expected {expectation.size} bytes, got {digest.size}"
        )
    if expectation.sha256 and digest.sha256 not in expectation.sha256:
        wanted = " or ".join(expectation.sha256)
        raise ChecksumMismatchError(
            f"{label}: checksum mismatch for {location}: expected sha256 {wanted}, got {digest.sha256}"
        )
    if expectation.md5 and digest.md5 != expectation.md5:
        raise ChecksumMismatchError(
            f"{label}: checksum mismatch for {location}: expected md5 {expectation.md5}, got {digest.md5}"
        )


def _hash_file(path: Path) -> Digest:
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return Digest(sha.hexdigest(), md5.hexdigest(), size)


# ----------------------------------------------------------------------------------------------
# manifest and clean-up


def _read_manifest(directory: Path) -> dict[str, str]:
    path = directory / MANIFEST_NAME
    if not path.is_file():
        return {}
    entries: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name:
            entries[name] = digest
    return entries


def _record(directory: Path, name: str, sha256: str | None) -> None:
    """Record (or, with None, drop) the trusted hash of `name`."""
    entries = _read_manifest(directory)
    if sha256 is None and name not in entries:
        return
    if sha256 is None:
        del entries[name]
    else:
        entries[name] = sha256
    path = directory / MANIFEST_NAME
    if not entries:
        path.unlink(missing_ok=True)
        return
    atomic_write(path, "".join(f"{digest}  {file}\n" for file, digest in sorted(entries.items())))


def _forget(directory: Path, names: list[str]) -> None:
    """Delete files that failed a check, with their recorded hashes, so the next fetch downloads them."""
    for name in names:
        (directory / name).unlink(missing_ok=True)
        _record(directory, name, None)


def _remove_if_empty(directory: Path, created: bool) -> None:
    if created and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()


# ----------------------------------------------------------------------------------------------
# zip members


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _extract_checked(zf: zipfile.ZipFile, archive: Path, member: str, dest_dir: Path) -> Path:
    try:
        info = zf.getinfo(member)
    except KeyError:
        held = ", ".join(zf.namelist()[:20])
        raise FetchError(f"{archive.name}: has no member {member!r} (it holds: {held})") from None
    if info.is_dir() or _is_link(info):
        raise UnsafeArchiveError(f"{archive.name}: member {member!r} is a directory or link")
    root = dest_dir.resolve()
    target = (dest_dir / member).resolve()
    if not target.is_relative_to(root):
        raise UnsafeArchiveError(f"{archive.name}: member {member!r} would land outside {dest_dir}")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with zf.open(info) as src, atomic_open(target, suffix=".part") as out:
            shutil.copyfileobj(src, out, CHUNK_SIZE)
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{archive.name}: member {member!r} is corrupt ({exc})") from exc
    return target


# ----------------------------------------------------------------------------------------------
# OpenML


@dataclass(frozen=True)
class OpenMLMetadata:
    """What parse.py needs from the stored OpenML descriptions."""

    dataset_id: int
    target: str | None
    ignore: tuple[str, ...]
    row_id: str | None
    task_type: str | None


def _json_doc(path: Path, label: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FetchError(f"{label}: {path.name} is not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise FetchError(f"{label}: {path.name} is not a JSON object")
    return doc


def _integer_id(value: Any, what: str, label: str) -> int:
    """An OpenML id as the API writes it (a JSON number or a string of ASCII digits), else refused."""
    text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
    if not re.fullmatch(r"[0-9]{1,12}", text) or int(text) < 1:
        raise FetchError(f"{label}: {what} {value!r} is not a positive integer id")
    return int(text)


def openml_task_info(doc: dict[str, Any], task_id: int, label: str) -> tuple[int, str | None, str | None]:
    """(dataset id, target, task type) from an api/v1/json/task/{id} document."""
    task = doc.get("task")
    if not isinstance(task, dict) or str(task.get("task_id")) != str(task_id):
        raise FetchError(f"{label}: task.json does not describe OpenML task {task_id}")
    inputs = task.get("input") or []
    for entry in inputs if isinstance(inputs, list) else [inputs]:
        if isinstance(entry, dict) and entry.get("name") == "source_data":
            data_set = entry.get("data_set")
            if not isinstance(data_set, dict) or "data_set_id" not in data_set:
                raise FetchError(f"{label}: task {task_id} names no data_set_id")
            dataset_id = _integer_id(data_set["data_set_id"], f"task {task_id}'s data_set_id", label)
            return dataset_id, data_set.get("target_feature") or None, task.get("task_type")
    raise FetchError(f"{label}: task {task_id} has no source_data input")


def _as_names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)


def openml_dataset_info(doc: dict[str, Any], dataset_id: int, label: str) -> dict[str, Any]:
    """The data_set_description of an api/v1/json/data/{id} document, checked for what we use:
    integer ids, an md5 digest, and a download url that is https (never a path or another scheme)."""
    desc = doc.get("data_set_description")
    if not isinstance(desc, dict) or str(desc.get("id")) != str(dataset_id):
        raise FetchError(f"{label}: dataset.json does not describe OpenML dataset {dataset_id}")
    missing = [k for k in ("file_id", "md5_checksum") if not desc.get(k)]
    if missing:
        raise FetchError(f"{label}: OpenML dataset {dataset_id} description lacks {', '.join(missing)}")
    _integer_id(desc["file_id"], f"OpenML dataset {dataset_id}'s file_id", label)
    if not isinstance(desc["md5_checksum"], str) or not re.fullmatch(r"[0-9a-f]{32}", desc["md5_checksum"]):
        raise FetchError(f"{label}: OpenML dataset {dataset_id}'s md5_checksum {desc['md5_checksum']!r} is not an md5")
    url = desc.get("url")
    if url is not None and (not isinstance(url, str) or not _is_https_url(url)):
        raise UnsafeLocationError(
            f"{label}: OpenML dataset {dataset_id}'s description names download url {url!r}; only an "
            "https address is accepted"
        )
    if str(desc.get("format", "arff")).lower() != "arff":
        raise FetchError(f"{label}: OpenML dataset {dataset_id} is {desc.get('format')}, not dense ARFF")
    return desc


def _is_https_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme == "https" and bool(parts.hostname) and not parts.username


def read_openml_metadata(source: DatasetSource, dataset_dir: Path) -> OpenMLMetadata:
    """Target, ignored columns and row-id column from the stored task/dataset descriptions."""
    label = f"dataset {source.name!r}"
    assert source.openml is not None
    task_target = task_type = None
    dataset_id = source.openml.dataset_id
    if source.kind == "openml_task":
        task_doc = _json_doc(dataset_dir / "task.json", label)
        dataset_id, task_target, task_type = openml_task_info(task_doc, source.openml.task_id or 0, label)
    desc = openml_dataset_info(_json_doc(dataset_dir / "dataset.json", label), dataset_id or 0, label)
    return OpenMLMetadata(
        dataset_id=int(desc["id"]),
        target=source.target or task_target or desc.get("default_target_attribute"),
        ignore=_as_names(desc.get("ignore_attribute")),
        row_id=desc.get("row_id_attribute") or None,
        task_type=task_type,
    )


def _fetch_openml_json(
    source: DatasetSource,
    name: str,
    url: str,
    target_dir: Path,
    options: FetchOptions,
    check: Callable[[dict[str, Any]], Any],
) -> tuple[Path, bool]:
    """Fetch one API description, keeping it only if `check` accepts it; True when it came from
    the API. The API is asked first and the mirror second, and only the API's copy is recorded in
    SHA256SUMS: a copy from the mirror is asked for again next time, so that it gets verified once
    the API can be reached."""
    dest = target_dir / name
    label = _label(source, name)
    recorded = _read_manifest(target_dir).get(name)
    if dest.is_file() and recorded is not None and _hash_file(dest).sha256 == recorded:
        try:
            check(_json_doc(dest, label))
            return dest, True
        except FetchError as exc:
            log.warning("%s; fetching it again", exc)
    mirror = _candidates(f"{source.name}/{name}", [], options.mirror)
    # With a mirror to fall back on, an unreachable API costs one attempt, not a round of backoff.
    api_options = dataclasses.replace(options, retries=0) if mirror else options

    def accept(path: Path) -> None:
        check(_json_doc(path, label))

    try:
        digest, location = _download_any(
            [Location(url)], dest, Expectation(checked_after=True), label, api_options, accept
        )
    except FetchError as api_failure:
        if not mirror:
            return _fallback_to_present(dest, check, label, api_failure)
        try:
            digest, location = _download_any(mirror, dest, Expectation(checked_after=True), label, options, accept)
        except FetchError as mirror_failure:
            return _fallback_to_present(dest, check, label, _combined([api_failure, mirror_failure]))
    _record(target_dir, name, None if location.mirror else digest.sha256)
    return dest, not location.mirror


def _fallback_to_present(
    dest: Path, check: Callable[[dict[str, Any]], Any], label: str, failure: FetchError
) -> tuple[Path, bool]:
    """Neither the API nor the mirror answered: keep a copy already here (unverified) if it passes."""
    if not dest.is_file():
        raise failure
    try:
        check(_json_doc(dest, label))
    except FetchError:
        raise failure from None
    log.warning("%s; using the copy already here, unverified", failure)
    return dest, False


def _check_task_type(source: DatasetSource, task_type: str | None) -> None:
    allowed = _OPENML_TASK_TYPES.get(task_type or "")
    if allowed is None:
        raise FetchError(f"dataset {source.name!r}: OpenML task type {task_type!r} is not supported")
    if source.task not in allowed:
        raise FetchError(f"dataset {source.name!r}: registry says {source.task} but the OpenML task is {task_type}")


def _arff_urls(api: str, desc: dict[str, Any]) -> list[str]:
    """The API's download address for the description's file id, then the description's own
    link when it points at OpenML itself (not when the API is overridden)."""
    urls = [f"{api}/data/v1/download/{int(desc['file_id'])}"]
    link = desc.get("url")
    if api == OPENML_DEFAULT_URL and link and urllib.parse.urlsplit(link).hostname in OPENML_HOSTS:
        urls += [link] if link not in urls else []
    return urls


def _fetch_openml(source: DatasetSource, target_dir: Path, options: FetchOptions) -> tuple[list[Path], bool]:
    """Fetch task.json, dataset.json and the ARFF; True when the ARFF's dataset id and md5 came
    from the registry or the API, False when only the mirror vouched for them."""
    ref = source.openml
    assert ref is not None
    api = options.openml_url.rstrip("/")
    label = f"dataset {source.name!r}"
    paths: list[Path] = []
    dataset_id = ref.dataset_id
    id_trusted = True
    if source.kind == "openml_task":
        task_id = ref.task_id or 0
        resolved: dict[str, Any] = {}

        def check_task(doc: dict[str, Any]) -> None:
            did, _, task_type = openml_task_info(doc, task_id, label)
            if ref.dataset_id is not None and did != ref.dataset_id:
                raise FetchError(f"{label}: OpenML task {task_id} uses dataset {did}, registry pins {ref.dataset_id}")
            _check_task_type(source, task_type)
            resolved["dataset_id"] = did

        task_path, from_api = _fetch_openml_json(
            source, "task.json", f"{api}/api/v1/json/task/{task_id}", target_dir, options, check_task
        )
        paths.append(task_path)
        dataset_id = resolved["dataset_id"]
        id_trusted = ref.dataset_id is not None or from_api
    assert dataset_id is not None
    info: dict[str, Any] = {}

    def check_data(doc: dict[str, Any]) -> None:
        info.update(openml_dataset_info(doc, dataset_id, label))
        if ref.md5 and info["md5_checksum"] != ref.md5:
            raise ChecksumMismatchError(
                f"{label}: OpenML dataset {dataset_id} now has md5 {info['md5_checksum']}, registry pins {ref.md5}"
            )

    data_path, from_api = _fetch_openml_json(
        source, "dataset.json", f"{api}/api/v1/json/data/{dataset_id}", target_dir, options, check_data
    )
    paths.append(data_path)
    arff = target_dir / "dataset.arff"
    md5 = ref.md5 or info["md5_checksum"]
    _ensure_file(source, arff, f"{source.name}/dataset.arff", _arff_urls(api, info), Expectation(md5=md5), options)
    verified = id_trusted and (ref.md5 is not None or from_api)
    if not verified:
        log.warning("%s: unverified: the OpenML API could not be reached and only the mirror vouches for it", label)
    return paths + [arff], verified
