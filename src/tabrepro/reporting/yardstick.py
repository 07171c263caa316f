"""How far apart two AUCs measured on different random test sets of one dataset may fall.

The BiSHop thesis gives its Datasets I baselines without spread, from one split of its own, so
the scorecard's z uses our seed-to-seed SE alone, which says nothing about split-to-split
variation. This module supplies that missing yardstick for the audit: the Hanley-McNeil standard
error of an AUC on our test set (from its class counts), and the gap in units of the standard
error of a difference between two independent test sets of that size (sqrt(2) x that SE).

    TABREPRO_DATA_DIR=DATA python -m tabrepro.reporting.yardstick --profile reproduce \\
        --scorecard docs/records/reproduce/results/scorecard/scorecard.csv [--table fig4_1]

It needs the run's data directory (the splits and prepared tables; the same config gives the same
splits bit for bit, so `snakemake --until availability split` rebuilds it anywhere).
The training rows differ between the two splits too, which this leaves out; on the other side,
Hanley and McNeil's approximations are exact for exponentially distributed scores and overstate
the spread for binormal ones (by about a quarter at AUC 0.85, tests/test_yardstick.py), so the
yardstick is a rough one: a gap of many split SEs is not split noise, one of about two may be.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tabrepro.config import DEFAULT_PARAMS_FILE, Params
from tabrepro.errors import InputError

__all__ = ["hanley_mcneil_se", "SplitGap", "split_gaps", "format_gaps", "main"]

AUC_METRICS = ("auc_pct", "auroc")


def hanley_mcneil_se(auc: float, n_positive: int, n_negative: int) -> float:
    """Standard error of an AUC (as a fraction) on a test set with these class counts
    (Hanley & McNeil, Radiology 1982, eq. 2, with their exponential approximations of Q1, Q2)."""
    if not 0.0 <= auc <= 1.0 or n_positive < 1 or n_negative < 1:
        raise ValueError(f"need 0 <= auc <= 1 and both classes present, got {auc}, {n_positive}, {n_negative}")
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    variance = (auc * (1 - auc) + (n_positive - 1) * (q1 - auc * auc) + (n_negative - 1) * (q2 - auc * auc)) / (
        n_positive * n_negative
    )
    return math.sqrt(max(variance, 0.0))


@dataclass(frozen=True)
class SplitGap:
    """One scorecard cell measured against the split-to-split yardstick."""

    table: str
    dataset: str
    model: str
    ours: float  # in the metric's unit (percent for auc_pct)
    paper: float
    n_positive: int  # the minority class of our test set
    n_negative: int
    split_se: float  # Hanley-McNeil SE of our AUC, in the metric's unit

    @property
    def z_split(self) -> float:
        """The gap over the SE of a difference of two independent test sets of this size."""
        return (self.ours - self.paper) / (math.sqrt(2) * self.split_se)


def _test_class_counts(params: Params, paper: str, dataset: str) -> tuple[int, int]:
    from tabrepro.data.table import load_table
    from tabrepro.splits import fold_path, load_split

    layout = params.layout
    source = params.source_of(paper, dataset)
    table = load_table(layout.processed_dir.path(source=source))
    split = load_split(fold_path(layout.split_dir.path(paper=paper, dataset=dataset), 0))
    y = np.asarray(table.frame[table.schema.target])[split.test]
    _, counts = np.unique(y, return_counts=True)
    if len(counts) != 2:
        raise InputError(f"{paper}/{dataset}: the test set has {len(counts)} classes; AUC needs two")
    return int(counts.min()), int(counts.max())


def split_gaps(params: Params, scorecard_csv: Path, tables: Sequence[str] = ()) -> list[SplitGap]:
    """Every judged AUC cell of the scorecard (of `tables`, if given) whose paper value has no spread."""
    gaps: list[SplitGap] = []
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    with open(scorecard_csv, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["metric"] not in AUC_METRICS or row["verdict_class"] not in ("consistent", "differs"):
                continue
            if (tables and row["table"] not in tables) or row["paper_spread"]:
                continue
            key = (row["paper"], row["column"])
            if key not in counts:
                counts[key] = _test_class_counts(params, *key)
            scale = 100.0 if row["metric"].endswith("_pct") else 1.0
            ours, minority, majority = float(row["ours_mean"]), *counts[key]
            se = hanley_mcneil_se(min(max(ours / scale, 0.0), 1.0), minority, majority) * scale
            gaps.append(
                SplitGap(
                    row["table"], row["column"], row["model"], ours, float(row["paper_value"]), minority, majority, se
                )
            )
    return gaps


def format_gaps(gaps: list[SplitGap]) -> str:
    lines = [
        "| table | dataset | model | ours | paper | test set (minority / rest) | split SE | gap / (√2 · split SE) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in sorted(gaps, key=lambda g: (g.table, g.dataset, g.model)):
        lines.append(
            f"| {g.table} | {g.dataset} | {g.model} | {g.ours:.2f} | {g.paper:.2f} "
            f"| {g.n_positive:,} / {g.n_negative:,} | {g.split_se:.2f} | {g.z_split:+.1f} |"
        )
    within = sum(abs(g.z_split) <= 2 for g in gaps)
    lines += ["", f"{within} of {len(gaps)} cells within 2 split SEs of a difference."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tabrepro.reporting.yardstick",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS_FILE)
    parser.add_argument(
        "--profile", default="reproduce", help="the profile the scorecard's run used (default reproduce)"
    )
    parser.add_argument("--scorecard", type=Path, required=True, help="a scorecard.csv")
    parser.add_argument("--table", action="append", default=[], help="only these tables (repeatable), e.g. fig4_1")
    args = parser.parse_args(argv)
    try:
        params = Params.from_file(args.params, profile=args.profile)
        print(format_gaps(split_gaps(params, args.scorecard, args.table)))
    except (InputError, OSError) as error:
        print(f"yardstick: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
