"""The commands the analysis, feature-sparsity and report rules call.

    tabrepro analyse PAPER DATASET EXPERIMENT [--fold K]   one of NPT's analysis experiments
    tabrepro sparsity PAPER DATASET MODEL --fold K         one feature-sparsity curve job
    tabrepro sparsity-plot [PAPER]                         average the curves: CSV, PNG, summary
    tabrepro report [--output-dir DIR]                     the static HTML report

`register(add)` receives tabrepro.cli's `add(name, func, help_text)` helper (which attaches the
shared --params/--profile/--quiet/--debug options) and adds the subcommands. Errors follow
tabrepro.cli's rule: bad input is one line and exit 2, a bug keeps its traceback. `report` without
results warns and says what to run, then builds the page with the papers' numbers (exit 0).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tabrepro.analysis.settings import EXPERIMENTS, SYNTHETIC

__all__ = ["register", "cmd_analyse", "cmd_sparsity", "cmd_sparsity_plot", "cmd_report"]

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


def cmd_sparsity(args: argparse.Namespace) -> None:
    import torch

    from tabrepro.analysis.feature_sparsity import run_curve
    from tabrepro.config import Job

    torch.set_num_threads(args.threads)
    params = _params(args)
    params.dataset_entry(args.paper, args.dataset)  # a clear error for an unknown dataset
    path = run_curve(params, Job(args.paper, args.dataset, args.model, args.fold),
                     metrics_path=args.metrics, out_path=args.output, n_jobs=args.threads,
                     progress=not args.quiet)
    print(path)


def cmd_sparsity_plot(args: argparse.Namespace) -> None:
    from tabrepro.analysis.feature_sparsity import plot_curves

    files = plot_curves(_params(args), args.paper)
    print(files["png"])


def cmd_report(args: argparse.Namespace) -> None:
    from tabrepro.reporting.html import build_report

    from tabrepro.cli import warn_missing_results
    from tabrepro.reporting.tables import collect_current_results

    params = _params(args)
    papers = [paper for paper in params.papers if params.jobs([paper])]
    found = sum(len(collect_current_results(params, paper)) for paper in papers)
    warn_missing_results(params, papers, found, "report")
    out_dir = args.output_dir or params.layout.report_dir.path()
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
    p = add("sparsity", cmd_sparsity,
            "retrain a model with a growing fraction of the features removed (BiSHop Fig. 4.1, "
            "right): one dataset x model x fold, all orders and fractions of params.yaml")
    p.add_argument("paper", help="paper whose main run selected the configuration")
    p.add_argument("dataset")
    p.add_argument("model", help="a model the profile runs on this dataset")
    p.add_argument("--fold", type=int, required=True)
    p.add_argument("--metrics", type=Path, help="the main run's metrics.json (default: from the results tree)")
    p.add_argument("--output", type=Path,
                   help="result file (default: results/feature_sparsity/PAPER/DATASET/MODEL/foldK.json)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for the models (default: 1)")
    p = add("sparsity-plot", cmd_sparsity_plot,
            "average the feature-sparsity jobs over folds and datasets: curves.csv, curves.png")
    p.add_argument("paper", nargs="?", help="default: the profile's feature_sparsity paper")
    p = add("report", cmd_report, "build the static HTML report (tables, figures, analysis, provenance)")
    p.add_argument("--output-dir", type=Path, help="report directory (default: results/report)")
