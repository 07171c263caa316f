"""Download one file from the first of its locations that serves it whole and verified.

Locations are tried in order (the configured mirror, then the canonical URLs); each gets retries
with backoff for transient trouble under one deadline. Bytes stream into a temporary file beside
the target, hashed as they arrive, and get the final name only once every check has passed.
Redirects are followed to https only (to plain http only on a configured host)."""

from __future__ import annotations

import contextlib
import http.client
import logging
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tqdm import tqdm

from tabrepro import __version__
from tabrepro.data.fetch_errors import (
    ChecksumMismatchError,
    DeadlineExceededError,
    FetchError,
    NotFoundError,
    TransientError,
    TruncatedDownloadError,
    UnprovenDownloadError,
    UnsafeArchiveError,
    UnsafeLocationError,
)
from tabrepro.data.registry import DatasetSource
from tabrepro.data.verify import (
    CHUNK_SIZE,
    Digest,
    Expectation,
    Hasher,
    hash_file,
    read_manifest,
    record_hash,
    verify_digest,
)
from tabrepro.io import atomic_open

log = logging.getLogger(__name__)

OPENML_DEFAULT_URL = "https://api.openml.org"
MAX_BACKOFF_SECONDS = 60.0
DEFAULT_DEADLINE_SECONDS = 3600.0  # one file from one location, retries included
USER_AGENT = f"tabrepro/{__version__} (dataset fetcher)"


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


def file_label(source: DatasetSource, file_name: str) -> str:
    return f"dataset {source.name!r}, file {file_name}"


def ensure_file(
    source: DatasetSource,
    dest: Path,
    mirror_path: str,
    urls: list[str],
    expectation: Expectation,
    options: FetchOptions,
) -> bool:
    """Make dest a verified copy; True when it was (re)downloaded, False when already good."""
    label = file_label(source, dest.name)
    recorded = read_manifest(dest.parent).get(dest.name)
    present = dest.is_file()
    if present and _still_valid(dest, expectation, recorded, label):
        log.info("%s: already present and verified", label)
        return False
    candidates = locations_for(mirror_path, urls, options.mirror)
    if not candidates:
        where = f" ({source.homepage})" if source.homepage else ""
        problem = f"{dest} fails verification and there is" if present else "there is"
        raise FetchError(
            f"{label}: {problem} no public download URL{where}; pass a mirror that holds "
            f"{mirror_path} or put the right file at {dest}"
        )
    # A present but failing file is only replaced once a verified copy has arrived.
    digest, _ = download_any(candidates, dest, expectation, label, options)
    if not expectation.pinned:
        log.warning("%s: no published checksum; recorded sha256 %s", label, digest.sha256)
    record_hash(dest.parent, dest.name, digest.sha256)
    return True


def _still_valid(path: Path, expectation: Expectation, recorded: str | None, label: str) -> bool:
    """Re-verify a file that is already there (it is left in place either way)."""
    digest = hash_file(path)
    if expectation.sha256:
        ok = digest.sha256 in expectation.sha256
    elif expectation.md5:
        ok = digest.md5 == expectation.md5
    elif recorded:
        ok = digest.sha256 == recorded
    else:
        log.warning("%s: present but unpinned and unrecorded; trusting it", label)
        record_hash(path.parent, path.name, digest.sha256)
        ok = True
    if ok and expectation.size is not None:
        ok = digest.size == expectation.size
    if not ok:
        log.warning("%s: existing file fails verification; downloading it again", label)
    return ok


def locations_for(mirror_path: str, urls: list[str], mirror: str | None) -> list[Location]:
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


def download_any(
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
    raise combined_failure(failures)


def _accept_or_remove(path: Path, accept: Callable[[Path], None]) -> None:
    try:
        accept(path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def combined_failure(failures: list[FetchError]) -> FetchError:
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
        except (TransientError, TruncatedDownloadError) as exc:
            delay = min(options.backoff_seconds * 2**attempt, MAX_BACKOFF_SECONDS)
            if attempt + 1 == attempts or time.monotonic() + delay > deadline:
                final = FetchError if isinstance(exc, TransientError) else type(exc)
                raise final(f"{exc} (gave up after {attempt + 1} attempt(s))") from exc
            log.warning("%s; retrying in %.1f s", exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _download_once(
    location: Location, dest: Path, expectation: Expectation, label: str, options: FetchOptions, deadline: float
) -> Digest:
    watchdog = _Watchdog(deadline)
    try:
        with watchdog, _open_location(location, options, label, watchdog) as (stream, length, bounded):
            body = _Body(stream, length, bounded, location.address, deadline, options.deadline_seconds)
            return _stream_to_file(body, dest, expectation, label, options.progress)
    except FetchError as exc:
        if watchdog.fired and not isinstance(exc, DeadlineExceededError):  # the cut made it look short or wrong
            raise _deadline_error(label, location.address, options.deadline_seconds) from exc
        raise


def _deadline_error(label: str, location: str, seconds: float, received: int | None = None) -> DeadlineExceededError:
    after = "" if received is None else f" after {received} bytes"
    return DeadlineExceededError(
        f"{label}: download from {location} not finished within {seconds:g} s "
        f"(fetch.deadline_seconds){after}; giving up on it"
    )


class _Watchdog:
    """Shuts the sockets of a download's connections at its deadline, so that no phase of it
    (connecting, headers sent a byte at a time, a trickling body) outlives fetch.deadline_seconds:
    a per-read timeout alone lets a server that sends one byte per timeout hold a fetch forever."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def __enter__(self) -> _Watchdog:
        self._timer = threading.Timer(max(self.deadline - time.monotonic(), 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._timer is not None
        self._timer.cancel()

    def remaining(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    def watch(self, connection: http.client.HTTPConnection) -> http.client.HTTPConnection:
        with self._lock:
            self._connections.append(connection)
            if self.fired:
                self._shut(connection)
        return connection

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for connection in self._connections:
                self._shut(connection)

    @staticmethod
    def _shut(connection: http.client.HTTPConnection) -> None:
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _WatchedHTTPHandler(urllib.request.HTTPHandler):
    """Plain-http connections that the download's watchdog can shut, each opened with a timeout no
    longer than what is left of the deadline."""

    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self.watchdog = watchdog

    def http_open(self, req):
        return self.do_open(_watched(http.client.HTTPConnection, self.watchdog), req)


class _WatchedHTTPSHandler(urllib.request.HTTPSHandler):
    """The https counterpart of _WatchedHTTPHandler (the default certificate checks)."""

    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self.watchdog = watchdog

    def https_open(self, req):
        return self.do_open(_watched(http.client.HTTPSConnection, self.watchdog), req, context=self._context)


def _watched(connection_class: type, watchdog: _Watchdog) -> Callable[..., http.client.HTTPConnection]:
    def connect(host: str, timeout: object = None, **settings: object) -> http.client.HTTPConnection:
        left = watchdog.remaining()
        timeout = min(timeout, left) if isinstance(timeout, (int, float)) else left
        return watchdog.watch(connection_class(host, timeout=timeout, **settings))

    return connect


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
    location: Location, options: FetchOptions, label: str, watchdog: _Watchdog | None = None
) -> Iterator[tuple[IO[bytes], int | None, bool]]:
    """Open a URL or a local mirror file as (byte stream, announced length, end announced)."""
    if location.local:
        path = Path(location.address)
        if not path.is_file():
            raise NotFoundError(f"{label}: not found in mirror: {path}")
        with path.open("rb") as handle:
            yield handle, path.stat().st_size, True
        return
    response = _urlopen(location.address, options, label, watchdog)
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

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not _followable(newurl, self.http_origins):
            fp.close()
            raise UnsafeLocationError(
                f"{self.label}: {req.full_url} redirects to {newurl!r}; only https (or http on the "
                "configured mirror) is followed"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _urlopen(
    url: str, options: FetchOptions, label: str, watchdog: _Watchdog | None = None
) -> http.client.HTTPResponse:
    """Open a URL from the registry or a configured host; a redirect may leave it for https only
    (or for plain http on a configured host, or on the URL's own host when the registry says http)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    own = {_origin(url)} if url.startswith("http://") else set()
    handlers: list[urllib.request.BaseHandler] = [_RedirectGuard(options.http_origins | own, label)]
    if watchdog is not None:
        handlers += [_WatchedHTTPHandler(watchdog), _WatchedHTTPSHandler(watchdog)]
    opener = urllib.request.build_opener(*handlers)
    try:
        return opener.open(request, timeout=options.timeout_seconds)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            raise NotFoundError(f"{label}: not found (HTTP {exc.code}) at {url}") from exc
        if exc.code in (408, 429) or exc.code >= 500:
            raise TransientError(f"{label}: HTTP {exc.code} {exc.reason} from {url}") from exc
        raise FetchError(f"{label}: HTTP {exc.code} {exc.reason} from {url}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise TransientError(f"{label}: cannot reach {url}: {reason}") from exc


def _read_chunk(body: _Body, label: str, received: int) -> bytes:
    """What one read of the socket (or file) gives, so that a trickle still meets the deadline."""
    if time.monotonic() > body.deadline:
        raise _deadline_error(label, body.location, body.deadline_seconds, received)
    try:
        return body.stream.read1(CHUNK_SIZE)  # type: ignore[attr-defined]
    except http.client.IncompleteRead as exc:
        raise TruncatedDownloadError(
            f"{label}: download from {body.location} truncated after {received + len(exc.partial)} bytes"
        ) from exc
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        raise TransientError(f"{label}: connection to {body.location} failed after {received} bytes: {exc}") from exc


def _progress_bar(total: int | None, name: str, enabled: bool) -> tqdm:
    visible = enabled and sys.stderr.isatty()
    return tqdm(total=total, desc=name, unit="B", unit_scale=True, unit_divisor=1024, disable=not visible, leave=False)


def _stream_to_file(body: _Body, dest: Path, expectation: Expectation, label: str, progress: bool) -> Digest:
    """Stream into a temp file beside dest, verify, then rename; the temp file never survives
    (a failed check raises inside `atomic_open`, which removes it)."""
    hasher = Hasher()
    with atomic_open(dest, suffix=".part") as out:
        with _progress_bar(body.length, dest.name, progress) as bar:
            while chunk := _read_chunk(body, label, hasher.size):
                out.write(chunk)
                hasher.update(chunk)
                bar.update(len(chunk))
        digest = hasher.digest()
        if body.length is not None and digest.size != body.length:
            raise TruncatedDownloadError(
                f"{label}: download from {body.location} truncated: expected {body.length} bytes, got {digest.size}"
            )
        verify_digest(digest, expectation, label, body.location)
        if not (body.bounded or expectation.pinned or expectation.size is not None or expectation.checked_after):
            raise UnprovenDownloadError(
                f"{label}: {body.location} sent {digest.size} bytes without a Content-Length, so a body cut "
                "short cannot be told from a whole one, and no checksum is published; not kept"
            )
    return digest
