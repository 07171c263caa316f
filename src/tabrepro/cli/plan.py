"""`tabrepro plan`: the active profile's compute plan from the calibrated cost model;
`tabrepro calibrate`: rewrite the calibration it ships with from a records directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from tabrepro.cli.common import AddCommand, load_params
from tabrepro.errors import InputError
from tabrepro.plan import run_plan, write_calibration
from tabrepro.plan_inputs import CALIBRATION_FILE


def cmd_plan(args: argparse.Namespace) -> None:
    """The compute plan of the active profile (tabrepro.plan), from the calibrated cost model."""

    print(
        run_plan(
            load_params(args),
            args.params,
            measured_dirs=args.measured,
            data_dirs=args.data_dir,
            gpu_tflops=args.gpu_tflops,
            compare_only=args.compare,
            show_calibration=args.calibration,
            to_decide=args.to_decide,
        )
    )


def cmd_calibrate(args: argparse.Namespace) -> None:
    """Rewrite (or with --check, compare) the shipped cost calibration from a records directory."""

    output = args.output or CALIBRATION_FILE
    if not write_calibration(args.records_dir, args.params, output, check=args.check):
        raise InputError(f"{output}: stale against {args.records_dir}; rerun `tabrepro calibrate` without --check")
    print(f"{output}: {'current' if args.check else 'written'} (from {args.records_dir})")


def register(add: AddCommand) -> None:
    """The `plan` and `calibrate` subcommands and their options."""
    c = add(
        "calibrate",
        cmd_calibrate,
        "rewrite the cost calibration the package ships with (every measured job of a records "
        "directory's runs, GPU measurements and scale benchmarks, with its dataset shapes)",
    )
    c.add_argument("records_dir", type=Path, metavar="RECORDS_DIR", help="the records directory (e.g. records)")
    c.add_argument("--output", type=Path, help="where to write it (default: the package's data/cost_calibration.json)")
    c.add_argument("--check", action="store_true", help="only compare: exit 2 when the file differs")
    p = add(
        "plan",
        cmd_plan,
        "the active profile's compute plan (e.g. --profile paper): per paper x dataset x model the "
        "configurations, fits, CPU-hours, GPU-hours and peak memory, and totals, from a cost model "
        "calibrated on the measured jobs shipped with the package (`tabrepro calibrate` rewrites them)",
    )
    p.add_argument(
        "--measured", type=Path, action="append", default=[], help="a further run's results/ to calibrate on"
    )
    p.add_argument("--data-dir", type=Path, action="append", default=[], help="a data/ whose prepared shapes to use")
    p.add_argument("--gpu-tflops", type=float, help="assumed sustained GPU TFLOP/s (default: the cost model's)")
    p.add_argument("--compare", action="store_true", help="predicted vs measured time for every measured job")
    p.add_argument("--calibration", action="store_true", help="print the calibrated weights first")
    p.add_argument(
        "--to-decide",
        type=Path,
        metavar="SCORECARD_CSV",
        help="price the runs that would decide this scorecard's undecided cells (e.g. "
        "records/runs/reproduce/results/scorecard/scorecard.csv, with the record's --profile)",
    )
