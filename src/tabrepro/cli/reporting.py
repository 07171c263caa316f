"""`tabrepro tables`, `scorecard`, `analyse`, `sparsity`, `sparsity-plot` and `report`: results
aggregated, judged against the papers, analysed and rendered."""

from __future__ import annotations

import argparse
from pathlib import Path

from tabrepro.bishop.feature_sparsity import plot_curves, run_curve
from tabrepro.cli.common import AddCommand, load_params, warn_missing_results
from tabrepro.config import Job, ParamsError
from tabrepro.npt.analysis.settings import EXPERIMENTS, SYNTHETIC
from tabrepro.provenance import reset_peak_memory


def cmd_tables(args: argparse.Namespace) -> None:
    from tabrepro.reporting.tables import build_tables, collect_current_results  # deferred: loads pandas, scipy

    params = load_params(args)
    results = collect_current_results(params, args.paper)
    warn_missing_results(params, [args.paper], len(results), "tables")
    written = build_tables(
        results,
        args.paper,
        params.paper(args.paper),
        params.tables_dir(args.paper),
        datasets_filter=params.selected_datasets(args.paper),
    )
    for path in written:
        print(path)


def cmd_scorecard(args: argparse.Namespace) -> None:
    """Judge every table cell against the paper; exit 0 even when cells differ (it is a report)."""
    from tabrepro.reporting.claims import judge_claims  # deferred: loads pandas, scipy
    from tabrepro.reporting.scorecard import build_scorecard, summary  # deferred: loads pandas, scipy
    from tabrepro.reporting.scorecard_markdown import write_scorecard  # deferred: loads pandas, scipy

    params = load_params(args)
    card = build_scorecard(params, args.paper, logs_dir=args.logs_dir)
    layout = params.layout
    out_dir = args.output_dir or (
        layout.scorecard_paper_dir.path(paper=args.paper) if args.paper else layout.scorecard_dir.path()
    )
    for path in write_scorecard(card, out_dir, judge_claims(params, card)):
        print(path)
    for paper, tables in summary(card)["papers"].items():
        for group, tally in tables["all"].items():
            if isinstance(tally, dict) and tally["cells"]:
                what = {"own": "own runs", "quoted": "quoted numbers", "capped": "capped runs"}[group]
                print(
                    f"{paper} ({what}): {tally['cells']} cells: {tally['reproduced']} reproduced, "
                    f"{tally['differs']} differ, {tally['shifted']} shifted, {tally['cannot_be_decided']} "
                    f"cannot be decided, {tally['inconclusive']} inconclusive, {tally['not_comparable']} "
                    f"not comparable, {tally['not_run']} not run"
                )


def cmd_analyse(args: argparse.Namespace) -> None:
    from tabrepro.npt.analysis.runner import run_experiment  # deferred: loads torch

    params = load_params(args)
    path = run_experiment(
        params,
        args.paper,
        args.dataset,
        args.experiment,
        fold=args.fold,
        out_dir=args.output_dir,
        threads=args.threads,
        metrics_path=args.metrics,
        weights_path=args.weights,
    )
    print(path)


def cmd_sparsity(args: argparse.Namespace) -> None:
    import torch  # deferred: loads torch

    torch.set_num_threads(args.threads)
    params = load_params(args)
    params.dataset_entry(args.paper, args.dataset)  # a clear error for an unknown dataset
    if len(args.fold) > 1 and (args.metrics or args.output):
        raise ParamsError("--metrics and --output name one fold's files: give one --fold with them")
    for fold in args.fold:  # several: one after another in this process (a sparsity_folds job)
        reset_peak_memory()  # each fold's result records its own peak
        path = run_curve(
            params,
            Job(args.paper, args.dataset, args.model, fold),
            metrics_path=args.metrics,
            out_path=args.output,
            n_jobs=args.threads,
            progress=not args.quiet,
        )
        print(path)


def cmd_sparsity_plot(args: argparse.Namespace) -> None:

    files = plot_curves(load_params(args), args.paper)
    print(files["png"])


def cmd_report(args: argparse.Namespace) -> None:
    from tabrepro.reporting.html import build_report  # deferred: loads matplotlib, pandas, scipy
    from tabrepro.reporting.tables import collect_current_results  # deferred: loads pandas, scipy

    params = load_params(args)
    papers = [paper for paper in params.papers if params.jobs([paper])]
    found = sum(len(collect_current_results(params, paper)) for paper in papers)
    warn_missing_results(params, papers, found, "report")
    out_dir = args.output_dir or params.layout.report_dir.path()
    print(build_report(params, Path(out_dir)))


def register_tables(add: AddCommand) -> None:
    """The `tables` subcommand (listed before `record`, whose snapshot includes the tables)."""
    p = add("tables", cmd_tables, "aggregate per-fold results into a paper's tables (Markdown, LaTeX, CSV)")
    p.add_argument("paper")


def register(add: AddCommand) -> None:
    """The `scorecard`, `analyse`, `sparsity`, `sparsity-plot` and `report` subcommands."""
    p = add(
        "scorecard",
        cmd_scorecard,
        "judge every table cell of the profile against the paper's value "
        "within a declared margin (reproduced / differs / inconclusive / not comparable / not run)",
    )
    p.add_argument("paper", nargs="?", help="only this paper (default: every paper the profile selects)")
    p.add_argument("--output-dir", type=Path, help="default: results/scorecard (results/scorecard/PAPER with PAPER)")
    p.add_argument("--logs-dir", type=Path, help="the workflow's logs (default: logs/ beside params.yaml)")

    p = add(
        "analyse",
        cmd_analyse,
        "run one of NPT's analysis experiments (corruption, deletion, attention on a trained "
        "fold; lookup trains its own NPT)",
    )
    p.add_argument("paper", help="paper whose results hold the trained NPT (npt)")
    p.add_argument("dataset", help=f"the paper's dataset name; for lookup also {SYNTHETIC!r}")
    p.add_argument("experiment", choices=EXPERIMENTS)
    p.add_argument("--fold", type=int, help="fold of the trained NPT (corruption, deletion, attention)")
    p.add_argument(
        "--output-dir",
        type=Path,
        help="where result.json and figures go (default: results/analysis/EXPERIMENT/DATASET[/foldK])",
    )
    p.add_argument("--metrics", type=Path, help="the fold's NPT metrics.json (default: from the results tree)")
    p.add_argument("--weights", type=Path, help="the fold's NPT weights.pt (default: beside metrics.json)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default: 1)")
    p = add(
        "sparsity",
        cmd_sparsity,
        "retrain a model with a growing fraction of the features removed (BiSHop Fig. 4.1, "
        "right): one dataset x model x fold, all orders and fractions of params.yaml",
    )
    p.add_argument("paper", help="paper whose main run selected the configuration")
    p.add_argument("dataset")
    p.add_argument("model", help="a model the profile runs on this dataset")
    p.add_argument("--fold", type=int, nargs="+", required=True, help="fold index, or several run one after another")
    p.add_argument("--metrics", type=Path, help="the main run's metrics.json (default: from the results tree)")
    p.add_argument(
        "--output", type=Path, help="result file (default: results/feature_sparsity/PAPER/DATASET/MODEL/foldK.json)"
    )
    p.add_argument("--threads", type=int, default=1, help="CPU threads for the models (default: 1)")
    p = add(
        "sparsity-plot",
        cmd_sparsity_plot,
        "average the feature-sparsity jobs over folds and datasets: curves.csv, curves.png",
    )
    p.add_argument("paper", nargs="?", help="default: the profile's feature_sparsity paper")
    p = add("report", cmd_report, "build the static HTML report (tables, figures, analysis, provenance)")
    p.add_argument("--output-dir", type=Path, help="report directory (default: results/report)")
