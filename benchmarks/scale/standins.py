"""Write synthetic full-size stand-ins of the large datasets into a raw-data directory.

    python -m benchmarks.scale.standins --dataset higgs --out data/raw            # 11,000,000 rows
    python -m benchmarks.scale.standins --dataset all --rows-scale 0.01 --out /tmp/scale/data/raw

Why: nothing had pushed a table the size of HIGGS (11 M rows), Poker Hand (1 M test rows),
Forest Cover or Census-Income KDD through prepare -> split -> train here, and downloading
gigabytes for a memory test is neither possible offline nor necessary. The stand-ins have the
registry files' names, columns, types, categorical levels, missing-value markers, label
spellings, line ends and compression (see benchmarks.scale.generators for what each keeps), and
labels that depend on the features, so the models have something to learn.

The scale path starts at `tabrepro prepare`: a stand-in's checksum can never match the
registry's, so `tabrepro fetch` would (rightly) refuse it. Every stand-in directory gets a marker
file, STANDIN.json, and prepare refuses a marked directory unless $TABREPRO_ALLOW_STANDINS=1
(tabrepro.data.standin); the marker also carries the row counts of a reduced stand-in, against
which the parser then checks the shape. The generator refuses to write into a directory that
holds real (unmarked) data.

Files are written chunk by chunk (bounded memory; about 10 minutes for the 11 M HIGGS rows on
one core), into a temporary file renamed at the end, with gzip's timestamp fixed: the same seed
gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from benchmarks.scale.generators import GENERATORS, FilePart
from tabrepro.data.registry import DatasetSource, get_source
from tabrepro.data.standin import ALLOW_ENV, MARKER_FILE, StandinMarker, read_marker, write_marker
from tabrepro.errors import InputError
from tabrepro.io import atomic_open
from tabrepro.seeding import derive_seed

__all__ = ["STANDIN_DATASETS", "FilePlan", "plan_files", "write_standin", "main"]

STANDIN_DATASETS: tuple[str, ...] = tuple(GENERATORS)
CHUNK_ROWS = 50_000  # fixed, not an option: the chunking is part of what the seed determines
MIN_ROWS = 20
GZIP_LEVEL = 1  # speed over size: the stand-in is a load test, not an archive


class StandinRequestError(InputError, ValueError):
    """A stand-in that cannot be written as asked (unknown dataset, too few rows, real data there)."""


@dataclass(frozen=True)
class FilePlan:
    """One file to write: its name in the raw directory, its role and its data rows."""

    name: str
    role: str
    rows: int


def plan_files(source: DatasetSource, rows: int | None) -> tuple[list[FilePlan], int]:
    """The files of `source` with their row counts, and the fixed test tail, for `rows` rows in all.

    None: the registry's sizes. Fewer rows scale every file (and the test tail) in proportion;
    the last file takes the rounding remainder so the files add up to `rows` exactly.
    """
    files = [f for f in source.table_files]
    full = source.expected.rows or sum(f.rows or 0 for f in files)
    if not full or any(f.rows is None for f in files):
        raise StandinRequestError(f"dataset {source.name!r}: the registry gives no row counts to imitate")
    rows = full if rows is None else rows
    if rows < MIN_ROWS:
        raise StandinRequestError(f"a stand-in needs at least {MIN_ROWS} rows, got {rows}")
    scale = rows / full
    counts = [max(1, round((f.rows or 0) * scale)) for f in files]
    counts[-1] = rows - sum(counts[:-1])
    if counts[-1] < 1:
        raise StandinRequestError(f"{rows} rows are too few to give every file of {source.name!r} a row")
    tail = source.fixed_test_tail_rows
    if tail:
        tail = min(max(1, round(tail * scale)), rows - 1)
    return [FilePlan(f.parsed_name, f.role, n) for f, n in zip(files, counts)], tail


def _check_target_dir(dataset_dir: Path, names: list[str], force: bool) -> None:
    """Refuse to overwrite real data: only an empty directory or earlier stand-ins are written over."""
    if not dataset_dir.is_dir() or force:
        return
    present = [n for n in names if (dataset_dir / n).exists()]
    if present and read_marker(dataset_dir) is None:
        raise StandinRequestError(
            f"{dataset_dir} already holds {', '.join(present)} without a stand-in marker (real data?); "
            f"choose another --out or pass --force to overwrite"
        )


def _output_stream(raw: BinaryIO, path: Path) -> BinaryIO:
    """What the rows are written to: `raw` itself, or a gzip stream over it when the name ends
    in .gz (fixed mtime and name, so the bytes depend on the rows only)."""
    if path.name.endswith(".gz"):
        return gzip.GzipFile(filename=path.name[:-3], mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0)
    return raw


def _write_file(dataset: str, plan: FilePlan, index: int, dataset_dir: Path, seed: int, progress: bool) -> int:
    """Generate one file chunk by chunk; returns its size in bytes."""
    generator = GENERATORS[dataset]
    rng = np.random.default_rng(derive_seed(seed, "standin", dataset, plan.name))
    target = dataset_dir / plan.name
    started = time.perf_counter()
    with atomic_open(target) as raw:
        stream = _output_stream(raw, target)
        for start in range(0, plan.rows, CHUNK_ROWS):
            n = min(CHUNK_ROWS, plan.rows - start)
            stream.write(generator(rng, n, FilePart(index, plan.rows, start)).encode("utf-8"))
            if progress and start and start % (20 * CHUNK_ROWS) == 0:
                print(
                    f"  {plan.name}: {start:,} of {plan.rows:,} rows ({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        if stream is not raw:
            stream.close()  # writes the gzip trailer; `raw` stays open for atomic_open
    return target.stat().st_size


def write_standin(
    dataset: str, raw_dir: Path, *, rows: int | None = None, seed: int = 0, force: bool = False, progress: bool = False
) -> StandinMarker:
    """Write the stand-in files of `dataset` into raw_dir/<dataset>/ and mark them (STANDIN.json)."""
    if dataset not in GENERATORS:
        raise StandinRequestError(f"no stand-in for {dataset!r}; stand-ins exist for {', '.join(STANDIN_DATASETS)}")
    source = get_source(dataset)
    plans, tail = plan_files(source, rows)
    dataset_dir = Path(raw_dir) / dataset
    _check_target_dir(dataset_dir, [p.name for p in plans], force)
    created = not dataset_dir.exists()
    dataset_dir.mkdir(parents=True, exist_ok=True)
    (dataset_dir / MARKER_FILE).unlink(missing_ok=True)  # no marker describes half-written files
    sizes: dict[str, int] = {}
    try:
        for index, plan in enumerate(plans):
            sizes[plan.name] = _write_file(dataset, plan, index, dataset_dir, seed, progress)
    except BaseException:
        for name in sizes:  # a stand-in is written whole or not at all
            (dataset_dir / name).unlink(missing_ok=True)
        if created and not any(dataset_dir.iterdir()):
            dataset_dir.rmdir()
        raise
    marker = StandinMarker(
        dataset=dataset,
        seed=seed,
        rows=sum(p.rows for p in plans),
        file_rows={p.name: p.rows for p in plans},
        file_bytes=sizes,
        fixed_test_tail_rows=tail,
    )
    write_marker(dataset_dir, marker)
    return marker


def _row_count(source: DatasetSource, rows: int | None, scale: float | None) -> int | None:
    if rows is not None and scale is not None:
        raise StandinRequestError("give --rows or --rows-scale, not both")
    if scale is None:
        return rows
    if not 0 < scale <= 1:
        raise StandinRequestError(f"--rows-scale must be in (0, 1], got {scale}")
    return max(MIN_ROWS, round((source.expected.rows or 0) * scale))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale.standins",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dataset",
        required=True,
        choices=(*STANDIN_DATASETS, "all"),
        help="registry name of the dataset to imitate, or all four",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="raw-data directory (files go to OUT/DATASET/), e.g. DATA_DIR/raw"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--rows", type=int, help="rows in all (default: the registry's full size)")
    size.add_argument("--rows-scale", type=float, help="fraction of the full size, e.g. 0.01")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    parser.add_argument("--force", action="store_true", help="overwrite files that carry no stand-in marker")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    datasets = STANDIN_DATASETS if args.dataset == "all" else (args.dataset,)
    try:
        for dataset in datasets:
            started = time.perf_counter()
            rows = _row_count(get_source(dataset), args.rows, args.rows_scale)
            marker = write_standin(dataset, args.out, rows=rows, seed=args.seed, force=args.force, progress=True)
            sizes = ", ".join(
                f"{name} {marker.file_rows[name]:,} rows {marker.file_bytes[name] / 2**20:.1f} MiB"
                for name in marker.file_rows
            )
            print(
                f"{args.out / dataset}: SYNTHETIC stand-in of {dataset} ({sizes}) in "
                f"{time.perf_counter() - started:.1f} s"
            )
    except InputError as error:
        print(f"benchmarks.scale.standins: error: {error}", file=sys.stderr)
        return 2
    data_dir = args.out.parent if args.out.name == "raw" else None
    if data_dir is not None:
        print(f"prepare with: {ALLOW_ENV}=1 TABREPRO_DATA_DIR={data_dir} tabrepro prepare DATASET")
    else:
        print(
            f"prepare with {ALLOW_ENV}=1 and TABREPRO_DATA_DIR set to the directory above {args.out} "
            f"(prepare reads DATA_DIR/raw/DATASET)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
