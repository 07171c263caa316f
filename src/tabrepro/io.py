"""Writing files so that no reader, and no killed job, ever sees half of one.

Every file tabrepro writes (tables, splits, results, checkpoints, reports, downloads) goes through
`atomic_open`: the bytes go to a temporary file beside the target (same directory, hence same
file system, so the final rename is atomic), are flushed and fsync'ed, and the temporary file is
renamed onto the target with os.replace. A failure or a kill before the rename leaves the previous
file (or none) in place, and the temporary file is removed on any exception. The temporary file is
created like any `open(path, "w")` would create the target (mode 0o666 less the umask), so every
written file gets the same permissions whichever writer made it.

`atomic_write` (bytes or text) and `write_json` cover the common cases; `atomic_path` serves
writers that insist on a file name of their own (parquet, matplotlib), `atomic_files` files that
belong together (a table and its schema). The torch checkpoint writer is
`tabrepro.nn.checkpoint.atomic_torch_save`, built on `atomic_open`.

A temporary file is locked (flock) while its writer lives. A kill -9 leaves it behind unlocked:
the next writer of the same file, and `remove_stale_temps` at a job's start, delete such files
and never one a live writer holds. A write that fails for want of space (or any OSError that names
no file) is re-raised naming the file that could not be written. A resume file that cannot be
read (empty, truncated, garbage) is moved aside by `set_aside`, never left to fail every retry.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from tabrepro.errors import one_line

__all__ = [
    "AtomicFiles",
    "atomic_files",
    "atomic_open",
    "atomic_path",
    "atomic_write",
    "read_state",
    "remove_stale_temps",
    "set_aside",
    "write_json",
]


CORRUPT_SUFFIX = ".corrupt"  # a resume file that could not be read, kept beside it for a look

log = logging.getLogger(__name__)

# What follows `.NAME.` in a temporary file's name: the random tag, then the writer's suffix.
_TEMP_TAG = r"[0-9a-f]{8}(\.[^/]*)?"


def _create_temp(path: Path, suffix: str) -> tuple[int, Path]:
    """An exclusive new file `.NAME.<random><suffix>` beside `path` (mode 0o666 less the umask),
    locked until the descriptor is closed; stale temporary files of `path` are removed first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent, path.name)
    while True:
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{suffix}")
        try:
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # another writer's temp file: draw another name
            continue
        with contextlib.suppress(OSError):  # a file system without locks: nothing is ever swept
            fcntl.flock(fd, fcntl.LOCK_EX)
        if _still_named(fd, temp):
            return fd, temp
        os.close(fd)  # swept in the instant before the lock: draw another name


def _still_named(fd: int, temp: Path) -> bool:
    try:
        return os.stat(temp).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def remove_stale_temps(directory: str | Path, name: str | None = None) -> list[Path]:
    """Delete the temporary files killed writers left in `directory` (those of file `name` only,
    when given): the ones no live writer holds locked. Returns what was removed."""
    directory = Path(directory)
    target = re.escape(name) if name is not None else ".+"
    pattern = re.compile(rf"\.{target}\.{_TEMP_TAG}")
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for entry in names:
        if entry.startswith(".") and pattern.fullmatch(entry) and _remove_if_unheld(directory / entry):
            removed.append(directory / entry)
    return removed


def _remove_if_unheld(temp: Path) -> bool:
    try:
        fd = os.open(temp, os.O_RDWR)
    except OSError:  # gone already, a directory, or not ours to write
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held by a live writer (or locks unsupported here)
        os.close(fd)
        return False
    try:
        temp.unlink(missing_ok=True)
    finally:
        os.close(fd)
    return True


def set_aside(path: str | Path, problem: str, instead: str) -> Path:
    """Move an unreadable resume file to NAME.corrupt and say so on one line: the file, what is
    wrong with it and what the job does `instead` (starts from scratch, or from older state)."""
    path = Path(path)
    aside = path.with_name(path.name + CORRUPT_SUFFIX)
    os.replace(path, aside)
    log.warning("%s: %s; moved aside to %s; %s", path, problem, aside.name, instead)
    return aside


def read_state(path: str | Path, what: str, instead: str) -> dict | None:
    """A resume file's JSON object, or None: when there is none, or when it is not one (empty,
    truncated, garbage, not UTF-8, not an object): that file is moved aside by `set_aside`, saying
    it is not `what` and that the job does `instead`."""
    path = Path(path)
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as error:  # not JSON, or not UTF-8
        set_aside(path, f"not {what} ({one_line(error, 200)})", instead)
        return None
    if not isinstance(state, dict):
        set_aside(path, f"not {what} (not a JSON object)", instead)
        return None
    return state


def _named(error: BaseException, path: Path, temp: Path) -> BaseException:
    """A plain OSError that names no file, or only the temporary one (a full disk, a quota), as
    one that names `path`; anything else as it is."""
    if type(error) is not OSError or error.filename not in (None, str(temp)):
        return error
    if error.errno is not None and error.strerror:
        return OSError(error.errno, error.strerror, str(path))
    return OSError(f"{path}: {error}")


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class AtomicFiles:
    """Files that appear together or not at all (a table and its schema), from `atomic_files`.

    Each is written to its own temporary file (`path` or `open`); when the block ends without an
    error all are renamed into place, the last one written last, after it was removed first: it
    marks a complete set, so even a kill between the renames never leaves it beside files it does
    not describe. An error anywhere removes every temporary file and leaves the old files as they
    were.
    """

    def __init__(self) -> None:
        self._temps: list[tuple[int, Path, Path]] = []  # lock descriptor, temporary file, target

    @contextlib.contextmanager
    def path(self, target: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
        """A temporary name for `target`, for a writer that opens the file itself."""
        target = Path(target)
        fd, temp = _create_temp(target, suffix)
        self._temps.append((fd, temp, target))
        try:
            yield temp
            _fsync_file(temp)
        except BaseException as error:
            named = _named(error, target, temp)
            if named is error:
                raise
            raise named from error

    @contextlib.contextmanager
    def open(
        self, target: str | Path, mode: str = "wb", *, suffix: str = ".tmp", encoding: str | None = None
    ) -> Iterator[IO[Any]]:
        """A stream into a temporary file for `target` ("wb", or "w" for text: UTF-8 unless told,
        no newline translation)."""
        if mode not in ("wb", "w"):
            raise ValueError(f"atomic_open writes a whole new file: mode 'wb' or 'w', not {mode!r}")
        target = Path(target)
        fd, temp = _create_temp(target, suffix)
        self._temps.append((fd, temp, target))
        try:
            # a duplicate descriptor for the stream: `fd` keeps the lock until the rename
            stream: IO[Any] = (
                os.fdopen(os.dup(fd), mode, encoding=encoding or "utf-8", newline="")
                if mode == "w"
                else os.fdopen(os.dup(fd), mode)
            )
            with stream as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException as error:
            named = _named(error, target, temp)
            if named is error:
                raise
            raise named from error

    def _commit(self) -> None:
        if len(self._temps) > 1:
            self._temps[-1][2].unlink(missing_ok=True)
        while self._temps:
            fd, temp, target = self._temps[0]
            try:
                os.replace(temp, target)
            except OSError as error:
                raise _named(error, target, temp) from error
            os.close(fd)
            self._temps.pop(0)

    def _discard(self) -> None:
        for fd, temp, _ in self._temps:
            temp.unlink(missing_ok=True)
            os.close(fd)
        self._temps.clear()


@contextlib.contextmanager
def atomic_files() -> Iterator[AtomicFiles]:
    """Write several files that belong together: see `AtomicFiles`."""
    files = AtomicFiles()
    try:
        yield files
        files._commit()
    finally:
        files._discard()


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary file name beside `path` for a writer that opens the file itself; on a normal
    exit the file is fsync'ed and renamed onto `path`, on an exception it is removed."""
    with atomic_files() as files, files.path(path, suffix=suffix) as temp:
        yield temp


@contextlib.contextmanager
def atomic_open(
    path: str | Path, mode: str = "wb", *, suffix: str = ".tmp", encoding: str | None = None
) -> Iterator[IO[Any]]:
    """A stream into a temporary file beside `path` ("wb", or "w" for text: UTF-8 unless told,
    no newline translation); on a normal exit flushed, fsync'ed and renamed onto `path`, on an
    exception closed and removed, leaving `path` as it was."""
    with atomic_files() as files, files.open(path, mode, suffix=suffix, encoding=encoding) as handle:
        yield handle


def atomic_write(path: str | Path, data: bytes | str, *, encoding: str = "utf-8") -> None:
    """Write `data` (text is encoded with `encoding`, newlines as given) to `path` atomically."""
    payload = data.encode(encoding) if isinstance(data, str) else data
    with atomic_open(path, "wb") as handle:
        handle.write(payload)


def write_json(
    path: str | Path,
    payload: Any,
    *,
    indent: int | None = 2,
    sort_keys: bool = True,
    ensure_ascii: bool = True,
    allow_nan: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> None:
    """`payload` as JSON plus a final newline, written atomically (UTF-8). The options are
    json.dumps's; the defaults (indent 2, sorted keys) are what most of tabrepro's files use."""
    text = json.dumps(
        payload, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=allow_nan, default=default
    )
    atomic_write(path, text + "\n")


def recorded_path(path: Path | str, data_dir: Path | str) -> str:
    """A data file's path as a result or fetch record names it: as the run names it when
    relative; when absolute, relative to the data directory's parent (`data/raw/...`,
    `data/splits/...`), so that a record names no place on the machine that wrote it."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.relative_to(Path(data_dir).absolute().parent))
    except ValueError:
        return path.name
