"""Writing files so that no reader, and no killed job, ever sees half of one.

Every file tabrepro writes (tables, splits, results, checkpoints, reports, downloads) goes through
`atomic_open`: the bytes go to a temporary file beside the target (same directory, hence same
file system, so the final rename is atomic), are flushed and fsync'ed, and the temporary file is
renamed onto the target with os.replace. A failure or a kill before the rename leaves the previous
file (or none) in place, and the temporary file is removed on any exception. The temporary file is
created like any `open(path, "w")` would create the target (mode 0o666 less the umask), so every
written file gets the same permissions whichever writer made it.

`atomic_write` (bytes or text) and `write_json` cover the common cases; `atomic_path` serves
writers that insist on a file name of their own (parquet, matplotlib). The torch checkpoint
writer is `tabrepro.nn.checkpoint.atomic_torch_save`, built on `atomic_open`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_path", "atomic_write", "write_json"]


def _create_temp(path: Path, suffix: str) -> tuple[int, Path]:
    """An exclusive new file `.NAME.<random><suffix>` beside `path` (mode 0o666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{suffix}")
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temp
        except FileExistsError:  # another writer's temp file: draw another name
            continue


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary file name beside `path` for a writer that opens the file itself; on a normal
    exit the file is fsync'ed and renamed onto `path`, on an exception it is removed."""
    path = Path(path)
    fd, temp = _create_temp(path, suffix)
    os.close(fd)
    try:
        yield temp
        _fsync_file(temp)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_open(
    path: str | Path, mode: str = "wb", *, suffix: str = ".tmp", encoding: str | None = None
) -> Iterator[IO[Any]]:
    """A stream into a temporary file beside `path` ("wb", or "w" for text: UTF-8 unless told,
    no newline translation); on a normal exit flushed, fsync'ed and renamed onto `path`, on an
    exception closed and removed, leaving `path` as it was."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open writes a whole new file: mode 'wb' or 'w', not {mode!r}")
    path = Path(path)
    fd, temp = _create_temp(path, suffix)
    try:
        if mode == "w":
            handle: IO[Any] = os.fdopen(fd, "w", encoding=encoding or "utf-8", newline="")
        else:
            handle = os.fdopen(fd, "wb")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


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
