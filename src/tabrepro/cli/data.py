"""`tabrepro fetch`, `prepare` and `split`: a registry dataset downloaded and verified, parsed into
its canonical table, and cut into a paper's fixed splits."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import numpy as np

from tabrepro.cli.common import AddCommand, load_params, require_table
from tabrepro.config import ParamsError
from tabrepro.data.availability import FetchStatus, read_fetch_status, write_fetch_status
from tabrepro.data.fetch import DEFAULT_DEADLINE_SECONDS, FetchError, fetch_dataset_status, refreshing
from tabrepro.data.registry import get_source, source_line
from tabrepro.seeding import derive_seed


def cmd_fetch(args: argparse.Namespace) -> None:

    params = load_params(args)
    fetch = params.raw["fetch"]
    print(f"tabrepro fetch: {source_line(get_source(args.dataset))}", file=sys.stderr)
    try:
        # --refresh: the earlier copy is set aside, and comes back unless the new one verifies.
        replacing: contextlib.AbstractContextManager[list[Path]] = (
            refreshing(args.dataset, params.raw_dir()) if args.refresh else contextlib.nullcontext([])
        )
        with replacing as replaced:
            status = fetch_dataset_status(
                args.dataset,
                params.raw_dir(),
                mirror=args.mirror or params.mirror,
                retries=fetch["retries"],
                backoff_seconds=fetch["backoff_seconds"],
                timeout_seconds=fetch["timeout_seconds"],
                deadline_seconds=fetch.get("deadline_seconds", DEFAULT_DEADLINE_SECONDS),
                progress=not args.quiet,
            )
        for path in replaced:
            print(f"tabrepro fetch: removed {path}", file=sys.stderr)
    except FetchError as error:
        if args.refresh:
            raise FetchError(f"{error}; the earlier copy is kept") from error
        if not args.record:
            raise
        # The workflow goes on without this dataset; the scorecard shows why it is missing.
        path = write_fetch_status(params.raw_dir(), FetchStatus(args.dataset, ok=False, error=str(error)))
        print(f"tabrepro fetch: {args.dataset} not obtainable, recorded in {path}: {error}", file=sys.stderr)
        return
    if args.record:
        write_fetch_status(params.raw_dir(), status)
    if not status.verified:
        print(
            f"tabrepro fetch: {args.dataset}: unverified (no pinned checksum or OpenML API md5 confirmed its bytes)",
            file=sys.stderr,
        )
    for name in status.files:
        print(name)


def cmd_prepare(args: argparse.Namespace) -> None:
    from tabrepro.data.parse import load_or_build_table  # deferred: loads pandas
    from tabrepro.data.table import save_table  # deferred: loads pandas

    params = load_params(args)
    get_source(args.dataset)  # a clear error for an unknown name before touching the disk
    status = read_fetch_status(params.raw_dir(), args.dataset)
    if status is not None and not status.ok:
        raise ParamsError(
            f"dataset {args.dataset!r} could not be obtained: {status.error} (delete "
            f"{params.layout.fetch_status.path(source=args.dataset)} and fetch again)"
        )
    table = load_or_build_table(args.dataset, params.raw_dir())
    out = params.processed_dir(args.dataset)
    save_table(table, out)
    schema = table.schema
    print(f"{out}: {schema.n_rows} rows, {len(schema.features)} features, task {schema.task}")


def cmd_split(args: argparse.Namespace) -> None:

    from tabrepro.data.table import load_table  # deferred: loads pandas
    from tabrepro.splits import make_all_splits, save_splits  # deferred: loads pandas, sklearn

    params = load_params(args)
    entry = params.dataset_entry(args.paper, args.dataset)
    require_table(params, entry["source"])
    table = load_table(params.processed_dir(entry["source"]))
    schema = table.schema
    y = None if schema.task == "regression" else table.frame[schema.target].astype(str).to_numpy()
    seed = derive_seed(params.seed, args.paper, args.dataset, "split")
    protocol = params.protocol(args.paper, args.dataset)
    splits = make_all_splits(protocol, schema.n_rows, seed=seed, y=y, n_fixed_test_rows=schema.n_fixed_test_rows)
    manifest = save_splits(
        splits,
        params.split_dir(args.paper, args.dataset),
        {
            "paper": args.paper,
            "dataset": args.dataset,
            "source": entry["source"],
            "protocol_name": entry["protocol"],
            "protocol": protocol,
            "seed": seed,
            "n_rows": schema.n_rows,
        },
    )
    tested = np.zeros(schema.n_rows, dtype=int)
    for split in splits:
        tested[split.test] += 1
    print(
        f"{manifest}: {len(splits)} fold(s); train/val/test rows: {_role_counts(splits)}; "
        f"rows tested once: {(tested == 1).sum()}/{schema.n_rows}"
    )


def _role_counts(splits: list) -> str:
    """Train/val/test row counts, e.g. 738/211/106; a count that differs between folds as a range."""
    parts = []
    for role in ("train", "val", "test"):
        counts = sorted({split.counts()[role] for split in splits})
        parts.append(str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}")
    return "/".join(parts)


def register(add: AddCommand) -> None:
    """The `fetch`, `prepare` and `split` subcommands and their options."""
    p = add("fetch", cmd_fetch, "download and verify a registry dataset into <data>/raw/DATASET")
    p.add_argument("dataset", help="registry name, e.g. protein")
    p.add_argument("--mirror", help="URL or directory tried first (also $TABREPRO_DATA_MIRROR)")
    p.add_argument(
        "--record",
        action="store_true",
        help="write <data>/raw/DATASET/fetch_status.json; a download that fails is recorded "
        "there (exit 0) instead of stopping, so a workflow run goes on without it",
    )
    p.add_argument(
        "--refresh",
        action="store_true",
        help="start over: download everything again, then replace the dataset's files, their recorded "
        "hashes (SHA256SUMS) and fetch_status.json; when the new copy fails, the earlier one is kept",
    )
    p = add("prepare", cmd_prepare, "parse a dataset's raw files (or embedded copy) into a canonical table")
    p.add_argument("dataset", help="registry name")
    p = add("split", cmd_split, "write a paper's fixed splits for one of its datasets")
    p.add_argument("paper")
    p.add_argument("dataset", help="the paper's dataset name")
