"""`tabrepro` command line: the steps the workflow rules call, usable by hand too.

    tabrepro validate                            check params.yaml (names, types, every model's
                                                 hyperparameters) and summarise the active profile
    tabrepro list datasets|models|profiles       what there is: registry datasets and where they
                                                 come from, models, profiles with their job counts
    tabrepro jobs                                list every job of the active profile
    tabrepro configs PAPER DATASET MODEL [--json]   the candidate configurations a job will run
    tabrepro dvc-yaml [--check]                  dvc.yaml's per-paper lines rewritten from params.yaml
    tabrepro fetch DATASET [--mirror M] [--refresh]   download + verify a registry dataset into data/raw/
    tabrepro prepare DATASET                     parse raw files (or the embedded copy) into a table
    tabrepro split PAPER DATASET                 write the paper's fixed splits for a dataset
    tabrepro train PAPER DATASET MODEL FOLD      tune on validation, score on test, write metrics.json
    tabrepro train-folds PAPER DATASET MODEL     the same for the profile's folds, one after another
    tabrepro train-config PAPER DATASET MODEL FOLD C   one configuration of a per-config model (NPT, BiSHop)
    tabrepro train-batch PAPER DATASET MODEL FOLD B    batch B of its configurations (params.yaml configs_per_job)
    tabrepro select PAPER DATASET MODEL FOLD     choose a per-config model's configuration, score it on test
    tabrepro repeat PAPER DATASET MODEL FOLD R   one further seed of it (repeats side by side; select reads it)
    tabrepro tables PAPER                        aggregate per-fold results into the paper's tables
    tabrepro scorecard [PAPER]                   judge every table cell against the paper's value
    tabrepro analyse PAPER DATASET EXPERIMENT [--fold K]   one of NPT's analysis experiments
    tabrepro sparsity PAPER DATASET MODEL --fold K [K ...]   feature-sparsity curves (BiSHop Fig. 4.1)
    tabrepro sparsity-plot [PAPER]               average the feature-sparsity curves: CSV, PNG, summary
    tabrepro report [--output-dir DIR]           the static HTML report of the whole run
    tabrepro record [NAME] [--wall-time S]       copy the run into records/runs/NAME; regenerate the
                                                 README's summary, docs/results/records.md and
                                                 docs/reproduction.md's table
    tabrepro record --check                      are both current, do the records match their manifests,
                                                 and has every differing cell a cause?
    tabrepro record NAME --restore               put record NAME's results back into the run (to continue it)
    tabrepro plan [--compare]                    the profile's compute plan: configurations, fits, CPU-/GPU-
                                                 hours and peak memory per paper x dataset x model, totals
    tabrepro calibrate RECORDS_DIR               rewrite the plan's shipped cost calibration from the records

Errors in inputs (params.yaml, dataset and model names, downloads, missing prepared data, a
configuration a library refuses, files that cannot be read or written) end the command with one
line naming the bad input and exit status 2; `--debug` adds the traceback. Anything else is a bug:
it keeps its traceback and exits with status 1. `tables` and `report` without any results yet
warn, say what to run, and still write the paper's numbers (exit 0).
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from pathlib import Path

from tabrepro import __version__
from tabrepro.cli import data, overview, plan, record, reporting, training
from tabrepro.cli.common import job_of
from tabrepro.cli.data import cmd_fetch, cmd_prepare, cmd_split
from tabrepro.cli.overview import cmd_configs, cmd_jobs, cmd_list, cmd_validate
from tabrepro.cli.plan import cmd_plan
from tabrepro.cli.reporting import cmd_analyse, cmd_report, cmd_scorecard, cmd_sparsity, cmd_sparsity_plot, cmd_tables
from tabrepro.cli.training import cmd_select, cmd_train, cmd_train_batch, cmd_train_config, cmd_train_folds
from tabrepro.config import DEFAULT_PARAMS_FILE
from tabrepro.errors import InputError, one_line
from tabrepro.nn.session import retain_freed_memory

__all__ = [
    "TABLE_COMMANDS",
    "build_parser",
    "cmd_analyse",
    "cmd_configs",
    "cmd_fetch",
    "cmd_jobs",
    "cmd_list",
    "cmd_plan",
    "cmd_prepare",
    "cmd_report",
    "cmd_scorecard",
    "cmd_select",
    "cmd_sparsity",
    "cmd_sparsity_plot",
    "cmd_split",
    "cmd_tables",
    "cmd_train",
    "cmd_train_batch",
    "cmd_train_config",
    "cmd_train_folds",
    "cmd_validate",
    "is_input_error",
    "main",
    "one_line",
]

_job = job_of  # the name tests/unit/test_config.py imports

# One pass over a whole table, nothing allocated again and again: the heap settings that spare a
# training loop its page faults would only keep the table's freed copies resident (HIGGS's
# prepare peaked at 6.3 GiB with them, 5.9 GiB without).
TABLE_COMMANDS = ("fetch", "prepare", "split")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tabrepro", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"tabrepro {__version__}")

    # The shared options work before or after the command (`tabrepro --profile paper validate`
    # and `tabrepro validate --profile paper`); the subcommand's copy must not reset the value.
    def add_shared(target: argparse.ArgumentParser, top_level: bool) -> None:
        default = (lambda value: value) if top_level else (lambda value: argparse.SUPPRESS)
        target.add_argument(
            "--params", type=Path, default=default(DEFAULT_PARAMS_FILE), help="parameters file (default: params.yaml)"
        )
        target.add_argument(
            "--profile", default=default(None), help="profile of params.yaml to use (default: its `profile` key)"
        )
        target.add_argument("-q", "--quiet", action="store_true", default=default(False), help="no progress bars")
        target.add_argument(
            "--debug", action="store_true", default=default(False), help="show the traceback of an input error too"
        )

    add_shared(parser, top_level=True)
    common = argparse.ArgumentParser(add_help=False)
    add_shared(common, top_level=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    overview.register(add)
    data.register(add)
    training.register(add)
    reporting.register_tables(add)
    record.register(add)
    reporting.register(add)
    plan.register(add)
    return parser


# Exception classes that mean bad input rather than a bug, by module (imported only when an
# error happened, so that a command does not pay for importing them).
def is_input_error(error: BaseException) -> bool:
    """Bad input (one line, exit 2) or a bug (traceback, exit 1)?

    Input: every tabrepro.errors.InputError, and OSError (a file that is missing, unreadable or
    unwritable, a full disk, a network failure: the message names the file or host). A bare
    ValueError, TypeError, KeyError, ... is a bug and keeps its traceback.
    """
    return isinstance(error, (InputError, OSError))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in TABLE_COMMANDS:
        retain_freed_memory()  # training loops reallocate the same tensors every step (see there)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        args.func(args)
    except Exception as exc:
        if not is_input_error(exc):
            raise  # a bug: Python prints the traceback and exits with status 1
        if args.debug:
            traceback.print_exc()
        print(f"tabrepro {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    return 0
