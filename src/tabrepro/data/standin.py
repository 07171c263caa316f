"""Synthetic stand-ins in a raw-data directory: how they are labelled, and when prepare accepts them.

The scale benchmark and the slow scale test need tables as large as HIGGS or Poker Hand without
downloading gigabytes, so `benchmarks.scale.standins` writes synthetic files with the registry
file's exact name and format. Their checksums cannot match the registry's, so a stand-in never
passes `tabrepro fetch`; the scale path starts at `tabrepro prepare`. To keep a stand-in from
ever being mistaken for the real data, the generator leaves a marker file (STANDIN.json) beside
it, and `prepare` refuses a marked directory unless the environment says, explicitly, that
stand-ins are wanted ($TABREPRO_ALLOW_STANDINS=1). A directory without a marker is parsed
exactly as before.

A reduced stand-in (fewer rows than the registry says) also needs the registry's row counts and
its fixed test tail scaled; the marker records them, and `source_for_directory` hands the parser
an entry with those counts, so the real parser's shape checks still run, against the stand-in's
own numbers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabrepro.data.registry import DatasetSource, Expected
from tabrepro.errors import InputError
from tabrepro.io import atomic_write

log = logging.getLogger(__name__)

MARKER_FILE = "STANDIN.json"
ALLOW_ENV = "TABREPRO_ALLOW_STANDINS"
GENERATOR = "benchmarks.scale.standins"


class StandinError(InputError, ValueError):
    """A stand-in directory that prepare must not (or cannot) parse; the message says why."""


@dataclass(frozen=True)
class StandinMarker:
    """What the generator wrote: per-file row counts and sizes, and the fixed test tail."""

    dataset: str
    seed: int
    rows: int  # all table rows (data files + official test files)
    file_rows: dict[str, int]  # parsed file name -> data rows
    file_bytes: dict[str, int]  # parsed file name -> size on disk, to notice a replaced file
    fixed_test_tail_rows: int = 0
    generator: str = GENERATOR
    synthetic: bool = True

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> StandinMarker:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})


def allowed() -> bool:
    """Whether this process was told to accept stand-ins ($TABREPRO_ALLOW_STANDINS=1)."""
    return os.environ.get(ALLOW_ENV, "") == "1"


def write_marker(dataset_dir: Path, marker: StandinMarker) -> Path:
    path = Path(dataset_dir) / MARKER_FILE
    atomic_write(path, marker.to_json())
    return path


def read_marker(dataset_dir: Path) -> StandinMarker | None:
    """The directory's marker, or None when it holds no stand-in."""
    path = Path(dataset_dir) / MARKER_FILE
    if not path.is_file():
        return None
    try:
        return StandinMarker.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise StandinError(
            f"{path}: unreadable stand-in marker ({exc}); delete the directory and regenerate or fetch the dataset"
        ) from exc


def source_for_directory(source: DatasetSource, dataset_dir: Path) -> DatasetSource:
    """The registry entry the parser should check `dataset_dir` against.

    No marker: `source` unchanged. A marker: refused unless stand-ins are allowed; then the entry
    with the stand-in's row counts, after checking the files are still the ones it describes.
    """
    marker = read_marker(dataset_dir)
    if marker is None:
        return source
    where = Path(dataset_dir) / MARKER_FILE
    if not allowed():
        raise StandinError(
            f"dataset {source.name!r}: {dataset_dir} holds synthetic stand-ins ({where}, written by "
            f"{marker.generator}), not the registry's data; set {ALLOW_ENV}=1 to prepare them for a "
            f"scale test, or delete the directory and run `tabrepro fetch {source.name}`"
        )
    if marker.dataset != source.name:
        raise StandinError(f"{where}: describes dataset {marker.dataset!r}, not {source.name!r}")
    files = []
    for remote in source.files:
        if remote.role == "doc":
            files.append(remote)
            continue
        name = remote.parsed_name
        if name not in marker.file_rows:
            raise StandinError(f"{where}: has no row count for {name}")
        path = Path(dataset_dir) / name
        size = path.stat().st_size if path.is_file() else None
        if size != marker.file_bytes.get(name):
            raise StandinError(
                f"{where}: {name} is not the file the generator wrote (size {size}, "
                f"marker says {marker.file_bytes.get(name)}); regenerate or fetch it"
            )
        files.append(dataclasses.replace(remote, rows=marker.file_rows[name]))
    log.warning(
        "dataset %r: preparing SYNTHETIC stand-in files (%s, %d rows), not the registry's data",
        source.name,
        where,
        marker.rows,
    )
    return dataclasses.replace(
        source,
        title=f"{source.title} [synthetic stand-in]",
        files=tuple(files),
        fixed_test_tail_rows=marker.fixed_test_tail_rows,
        expected=Expected(rows=marker.rows, features=source.expected.features),
    )
