"""What a fetched file must match and how it is checked: sha256/md5/size against the registry or
the OpenML API, the hashes recorded at first download (SHA256SUMS), and the one zip member copied
out of an archive, refusing names that would land outside the dataset directory."""

from __future__ import annotations

import hashlib
import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tabrepro.data.fetch_errors import ChecksumMismatchError, FetchError, UnsafeArchiveError
from tabrepro.data.registry import safe_relative_path
from tabrepro.io import atomic_open, atomic_write

MANIFEST_NAME = "SHA256SUMS"  # hashes of everything fetched into raw_dir/<name>/
CHUNK_SIZE = 1 << 20


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


class Hasher:
    """sha256, md5 and size of bytes that arrive in chunks, so that one pass over a file (on disk
    or still arriving) gives every check it may need."""

    def __init__(self) -> None:
        self._sha256 = hashlib.sha256()
        self._md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0

    def update(self, chunk: bytes) -> None:
        self._sha256.update(chunk)
        self._md5.update(chunk)
        self.size += len(chunk)

    def digest(self) -> Digest:
        return Digest(self._sha256.hexdigest(), self._md5.hexdigest(), self.size)


def verify_digest(digest: Digest, expectation: Expectation, label: str, location: str) -> None:
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


def hash_file(path: Path) -> Digest:
    hasher = Hasher()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            hasher.update(chunk)
    return hasher.digest()


def read_manifest(directory: Path) -> dict[str, str]:
    path = directory / MANIFEST_NAME
    if not path.is_file():
        return {}
    entries: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name:
            entries[name] = digest
    return entries


def record_hash(directory: Path, name: str, sha256: str | None) -> None:
    """Record (or, with None, drop) the trusted hash of `name`."""
    entries = read_manifest(directory)
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


def forget_files(directory: Path, names: list[str]) -> None:
    """Delete files that failed a check, with their recorded hashes, so the next fetch downloads them."""
    for name in names:
        (directory / name).unlink(missing_ok=True)
        record_hash(directory, name, None)


def remove_if_empty(directory: Path, created: bool) -> None:
    if created and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()


def extract_member(archive: Path, member: str, dest_dir: Path) -> Path:
    """Copy exactly one member out of a zip archive into dest_dir, refusing unsafe names."""
    if not safe_relative_path(member):
        raise UnsafeArchiveError(f"{archive.name}: refusing member {member!r}: absolute or '..' path")
    try:
        with zipfile.ZipFile(archive) as zf:
            return _extract_checked(zf, archive, member, dest_dir)
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{archive}: not a readable zip archive ({exc})") from exc


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
