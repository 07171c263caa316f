"""Download registry datasets into raw_dir/<name>/, verified and atomically.

Why it is built this way: a reproduction is only as good as its inputs, so every file is checked
(sha256 from the registry, OpenML's md5, or the hash recorded at first download) before it gets
its final name. Bytes stream into a temporary file beside the target and are renamed only after
the check passes, so an interrupted, truncated or wrong download never leaves a file that a later
step could mistake for data. Nothing downloaded is ever executed or unpickled: files are hashed,
renamed, and (for .zip archives) exactly one named member is copied out.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import logging
import os
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
from tabrepro.data.registry import DatasetSource, RemoteFile, get_source, safe_relative_path
from tabrepro.errors import InputError
from tabrepro.io import atomic_open, atomic_write

log = logging.getLogger(__name__)

OPENML_URL_ENV = "TABREPRO_OPENML_URL"
OPENML_DEFAULT_URL = "https://api.openml.org"
MANIFEST_NAME = "SHA256SUMS"  # hashes of everything fetched into raw_dir/<name>/
CHUNK_SIZE = 1 << 20
MAX_BACKOFF_SECONDS = 60.0
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


@dataclass(frozen=True)
class Expectation:
    """What a file must match; all empty means 'unpinned' (trust on first download)."""

    sha256: tuple[str, ...] = ()
    md5: str | None = None
    size: int | None = None

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
) -> list[Path]:
    """Fetch registry dataset `name` into raw_dir/<name>/ and return the files that are there.

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
    )
    return fetch_source(get_source(name), Path(raw_dir), options)


def fetch_source(source: DatasetSource, raw_dir: Path, options: FetchOptions | None = None) -> list[Path]:
    """Fetch an already-resolved registry entry (also used by tests with fabricated entries)."""
    options = options or FetchOptions()
    target_dir = Path(raw_dir) / source.name
    created = not target_dir.exists()
    target_dir.mkdir(parents=True, exist_ok=True)
    try:
        if source.is_openml:
            return _fetch_openml(source, target_dir, options)
        paths: list[Path] = []
        for remote in source.files:
            paths += _fetch_remote_file(source, remote, target_dir, options)
        return paths
    except BaseException:
        _remove_if_empty(target_dir, created)
        raise


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


def _fetch_remote_file(
    source: DatasetSource, remote: RemoteFile, target_dir: Path, options: FetchOptions
) -> list[Path]:
    dest = target_dir / remote.name
    expectation = Expectation(remote.accepted_sha256, None, remote.size)
    fresh = _ensure_file(source, dest, remote.mirror_path, [remote.url] if remote.url else [], expectation, options)
    if remote.member is None:
        return [dest]
    member_path = target_dir / remote.member
    recorded = _read_manifest(target_dir).get(remote.member)
    if fresh or recorded is None or not member_path.is_file() or _hash_file(member_path).sha256 != recorded:
        member_path = extract_member(dest, remote.member, target_dir)
        _record(target_dir, remote.member, _hash_file(member_path).sha256)
    return [dest, member_path]


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
    digest = _download_any(candidates, dest, expectation, label, options)
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


def _candidates(mirror_path: str, urls: list[str], mirror: str | None) -> list[str]:
    """Mirror location first (URL or local path), then the canonical URL(s)."""
    found: list[str] = []
    if mirror:
        if mirror.startswith(("http://", "https://")):
            found.append(mirror.rstrip("/") + "/" + urllib.parse.quote(mirror_path))
        else:
            root = mirror[len("file://") :] if mirror.startswith("file://") else mirror
            found.append(str(Path(root) / mirror_path))
    return found + [u for u in urls if u not in found]


# ----------------------------------------------------------------------------------------------
# downloading


def _download_any(
    candidates: list[str], dest: Path, expectation: Expectation, label: str, options: FetchOptions
) -> Digest:
    """Try each location in turn; raise the last failure, mentioning the earlier ones."""
    failures: list[FetchError] = []
    for location in candidates:
        try:
            return _download_with_retries(location, dest, expectation, label, options)
        except FetchError as exc:
            log.warning("%s", exc)
            failures.append(exc)
    main = max(failures, key=_severity)
    if len(failures) == 1:
        raise main
    others = "; ".join(str(f) for f in failures if f is not main)
    raise type(main)(f"{main} (also tried: {others})") from main


def _severity(error: FetchError) -> int:
    """Which failure best explains a fetch: wrong bytes beat a cut connection beat a missing file."""
    ranks = ((ChecksumMismatchError, 3), (TruncatedDownloadError, 2), (UnsafeArchiveError, 2), (NotFoundError, 0))
    return next((rank for kind, rank in ranks if isinstance(error, kind)), 1)  # 1: network/HTTP trouble


def _download_with_retries(
    location: str, dest: Path, expectation: Expectation, label: str, options: FetchOptions
) -> Digest:
    attempts = options.retries + 1
    for attempt in range(attempts):
        try:
            return _download_once(location, dest, expectation, label, options)
        except (_TransientError, TruncatedDownloadError) as exc:
            if attempt + 1 == attempts:
                final = FetchError if isinstance(exc, _TransientError) else type(exc)
                raise final(f"{exc} (gave up after {attempts} attempt(s))") from exc
            delay = min(options.backoff_seconds * 2**attempt, MAX_BACKOFF_SECONDS)
            log.warning("%s; retrying in %.1f s", exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _download_once(location: str, dest: Path, expectation: Expectation, label: str, options: FetchOptions) -> Digest:
    with _open_location(location, options.timeout_seconds, label) as (stream, length):
        return _stream_to_file(stream, length, dest, expectation, label, location, options.progress)


@contextlib.contextmanager
def _open_location(location: str, timeout: float, label: str) -> Iterator[tuple[IO[bytes], int | None]]:
    """Open a URL or a local mirror file as (byte stream, announced length)."""
    if not location.startswith(("http://", "https://")):
        path = Path(location)
        if not path.is_file():
            raise NotFoundError(f"{label}: not found in mirror: {path}")
        with path.open("rb") as handle:
            yield handle, path.stat().st_size
        return
    response = _urlopen(location, timeout, label)
    with response:
        length = response.headers.get("Content-Length")
        yield response, int(length) if length and length.isdigit() else None


def _urlopen(url: str, timeout: float, label: str) -> http.client.HTTPResponse:
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http(s) only)
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


def _read_chunk(stream: IO[bytes], label: str, location: str, received: int) -> bytes:
    try:
        return stream.read(CHUNK_SIZE)
    except http.client.IncompleteRead as exc:
        raise TruncatedDownloadError(
            f"{label}: download from {location} truncated after {received + len(exc.partial)} bytes"
        ) from exc
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        raise _TransientError(f"{label}: connection to {location} failed after {received} bytes: {exc}") from exc


def _progress_bar(total: int | None, name: str, enabled: bool) -> tqdm:
    visible = enabled and sys.stderr.isatty()
    return tqdm(total=total, desc=name, unit="B", unit_scale=True, unit_divisor=1024, disable=not visible, leave=False)


def _stream_to_file(
    stream: IO[bytes],
    length: int | None,
    dest: Path,
    expectation: Expectation,
    label: str,
    location: str,
    progress: bool,
) -> Digest:
    """Stream into a temp file beside dest, verify, then rename; the temp file never survives
    (a failed check raises inside `atomic_open`, which removes it)."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with atomic_open(dest, suffix=".part") as out:
        with _progress_bar(length, dest.name, progress) as bar:
            while chunk := _read_chunk(stream, label, location, size):
                out.write(chunk)
                sha.update(chunk)
                md5.update(chunk)
                size += len(chunk)
                bar.update(len(chunk))
        if length is not None and size != length:
            raise TruncatedDownloadError(
                f"{label}: download from {location} truncated: expected {length} bytes, got {size}"
            )
        digest = Digest(sha.hexdigest(), md5.hexdigest(), size)
        _verify(digest, expectation, label, location)
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


def _record(directory: Path, name: str, sha256: str) -> None:
    entries = _read_manifest(directory)
    entries[name] = sha256
    text = "".join(f"{digest}  {file}\n" for file, digest in sorted(entries.items()))
    atomic_write(directory / MANIFEST_NAME, text)


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


def openml_task_info(doc: dict[str, Any], task_id: int, label: str) -> tuple[int, str | None, str | None]:
    """(dataset id, target, task type) from an api/v1/json/task/{id} document."""
    task = doc.get("task")
    if not isinstance(task, dict) or str(task.get("task_id")) != str(task_id):
        raise FetchError(f"{label}: task.json does not describe OpenML task {task_id}")
    inputs = task.get("input") or []
    for entry in inputs if isinstance(inputs, list) else [inputs]:
        if isinstance(entry, dict) and entry.get("name") == "source_data":
            data_set = entry.get("data_set") or {}
            try:
                dataset_id = int(data_set["data_set_id"])
            except (KeyError, TypeError, ValueError) as exc:
                raise FetchError(f"{label}: task {task_id} names no data_set_id") from exc
            return dataset_id, data_set.get("target_feature") or None, task.get("task_type")
    raise FetchError(f"{label}: task {task_id} has no source_data input")


def _as_names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)


def openml_dataset_info(doc: dict[str, Any], dataset_id: int, label: str) -> dict[str, Any]:
    """The data_set_description of an api/v1/json/data/{id} document, checked for what we use."""
    desc = doc.get("data_set_description")
    if not isinstance(desc, dict) or str(desc.get("id")) != str(dataset_id):
        raise FetchError(f"{label}: dataset.json does not describe OpenML dataset {dataset_id}")
    missing = [k for k in ("file_id", "md5_checksum") if not desc.get(k)]
    if missing:
        raise FetchError(f"{label}: OpenML dataset {dataset_id} description lacks {', '.join(missing)}")
    if str(desc.get("format", "arff")).lower() != "arff":
        raise FetchError(f"{label}: OpenML dataset {dataset_id} is {desc.get('format')}, not dense ARFF")
    return desc


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
) -> Path:
    """Fetch one API description (mirror first), keeping it only if `check` accepts it."""
    dest = target_dir / name
    label = _label(source, name)
    if dest.is_file():
        try:
            check(_json_doc(dest, label))
            return dest
        except FetchError as exc:
            log.warning("%s; fetching it again", exc)
            dest.unlink()
    candidates = _candidates(f"{source.name}/{name}", [url], options.mirror)
    _download_any(candidates, dest, Expectation(), label, options)
    try:
        check(_json_doc(dest, label))
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return dest


def _check_task_type(source: DatasetSource, task_type: str | None) -> None:
    allowed = _OPENML_TASK_TYPES.get(task_type or "")
    if allowed is None:
        raise FetchError(f"dataset {source.name!r}: OpenML task type {task_type!r} is not supported")
    if source.task not in allowed:
        raise FetchError(f"dataset {source.name!r}: registry says {source.task} but the OpenML task is {task_type}")


def _fetch_openml(source: DatasetSource, target_dir: Path, options: FetchOptions) -> list[Path]:
    ref = source.openml
    assert ref is not None
    api = options.openml_url.rstrip("/")
    label = f"dataset {source.name!r}"
    paths: list[Path] = []
    dataset_id = ref.dataset_id
    if source.kind == "openml_task":
        task_id = ref.task_id or 0
        resolved: dict[str, Any] = {}

        def check_task(doc: dict[str, Any]) -> None:
            did, _, task_type = openml_task_info(doc, task_id, label)
            if ref.dataset_id is not None and did != ref.dataset_id:
                raise FetchError(f"{label}: OpenML task {task_id} uses dataset {did}, registry pins {ref.dataset_id}")
            _check_task_type(source, task_type)
            resolved["dataset_id"] = did

        paths.append(
            _fetch_openml_json(
                source, "task.json", f"{api}/api/v1/json/task/{task_id}", target_dir, options, check_task
            )
        )
        dataset_id = resolved["dataset_id"]
    assert dataset_id is not None
    info: dict[str, Any] = {}

    def check_data(doc: dict[str, Any]) -> None:
        info.update(openml_dataset_info(doc, dataset_id, label))
        if ref.md5 and info["md5_checksum"] != ref.md5:
            raise ChecksumMismatchError(
                f"{label}: OpenML dataset {dataset_id} now has md5 {info['md5_checksum']}, registry pins {ref.md5}"
            )

    paths.append(
        _fetch_openml_json(
            source, "dataset.json", f"{api}/api/v1/json/data/{dataset_id}", target_dir, options, check_data
        )
    )
    urls = [f"{api}/data/v1/download/{info['file_id']}"]
    if api == OPENML_DEFAULT_URL and info.get("url") and info["url"] not in urls:
        urls.append(str(info["url"]))  # the description's own link; not when the API is overridden
    arff = target_dir / "dataset.arff"
    _ensure_file(source, arff, f"{source.name}/dataset.arff", urls, Expectation(md5=info["md5_checksum"]), options)
    return paths + [arff]
