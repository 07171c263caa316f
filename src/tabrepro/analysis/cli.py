"""`tabrepro analyse` and `tabrepro report`: the commands the analysis and report rules call.

    tabrepro analyse PAPER DATASET EXPERIMENT [--fold K]   one analysis experiment
    tabrepro report [--output-dir DIR]                     the static HTML report

`register(add)` receives tabrepro.cli's `add(name, func, help_text)` helper (which attaches the
shared --params/--profile/--quiet options) and adds both subcommands.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tabrepro.analysis.settings import EXPERIMENTS, SYNTHETIC

__all__ = ["register", "cmd_analyse", "cmd_report"]

AddCommand = Callable[[str, Callable[[argparse.Namespace], None], str], argparse.ArgumentParser]


def _params(args: argparse.Namespace):
    from tabrepro.config import Params

    return Params.from_file(args.params, profile=args.profile)


def cmd_analyse(args: argparse.Namespace) -> None:
    from tabrepro.analysis.runner import run_experiment

    params = _params(args)
    path = run_experiment(params, args.paper, args.dataset, args.experiment, fold=args.fold,
                          out_dir=args.output_dir, threads=args.threads,
                          metrics_path=args.metrics, weights_path=args.weights)
    print(path)


def cmd_report(args: argparse.Namespace) -> None:
    from tabrepro.reporting.html import build_report

    params = _params(args)
    out_dir = args.output_dir or Path(params.results_dir) / "report"
    index = build_report(params, Path(out_dir))
    print(index)


def register(add: AddCommand) -> None:
    """Add `analyse` and `report` to the tabrepro command line."""
    p = add("analyse", cmd_analyse,
            "run one of NPT's analysis experiments (corruption, deletion, attention on a trained "
            "fold; lookup trains its own NPT)")
    p.add_argument("paper", help="paper whose results hold the trained NPT (npt)")
    p.add_argument("dataset", help=f"the paper's dataset name; for lookup also {SYNTHETIC!r}")
    p.add_argument("experiment", choices=EXPERIMENTS)
    p.add_argument("--fold", type=int, help="fold of the trained NPT (corruption, deletion, attention)")
    p.add_argument("--output-dir", type=Path,
                   help="where result.json and figures go (default: results/analysis/EXPERIMENT/DATASET[/foldK])")
    p.add_argument("--metrics", type=Path, help="the fold's NPT metrics.json (default: from the results tree)")
    p.add_argument("--weights", type=Path, help="the fold's NPT weights.pt (default: beside metrics.json)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default: 1)")
    p = add("report", cmd_report, "build the static HTML report (tables, figures, analysis, provenance)")
    p.add_argument("--output-dir", type=Path, help="report directory (default: results/report)")


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m tabrepro.analysis.cli`), same options as `tabrepro`."""
    import logging
    import sys

    from tabrepro.config import DEFAULT_PARAMS_FILE, ParamsError

    parser = argparse.ArgumentParser(prog="tabrepro-analysis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    # Before or after the command, as in `tabrepro`; the subcommand's copy must not reset them.
    for target, top in ((parser, True), (common, False)):
        target.add_argument("--params", type=Path, default=DEFAULT_PARAMS_FILE if top else argparse.SUPPRESS)
        target.add_argument("--profile", default=None if top else argparse.SUPPRESS)
        target.add_argument("-q", "--quiet", action="store_true", default=False if top else argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Callable[[argparse.Namespace], None], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    register(add)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        args.func(args)
    except (ParamsError, ValueError, FileNotFoundError, OSError) as exc:
        print(f"tabrepro {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
