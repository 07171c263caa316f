"""`tabrepro` command line: the steps the workflow rules call, usable by hand too.

    tabrepro validate                            check params.yaml (names, types, every model's
                                                 hyperparameters) and summarise the active profile
    tabrepro list datasets|models|profiles       what there is: registry datasets and where they
                                                 come from, models, profiles with their job counts
    tabrepro jobs                                list every job of the active profile
    tabrepro configs PAPER DATASET MODEL [--json]   the candidate configurations a job will run
    tabrepro fetch DATASET [--mirror M] [--refresh]   download + verify a registry dataset into data/raw/
    tabrepro prepare DATASET                     parse raw files (or the embedded copy) into a table
    tabrepro split PAPER DATASET                 write the paper's fixed splits for a dataset
    tabrepro train PAPER DATASET MODEL FOLD      tune on validation, score on test, write metrics.json
    tabrepro train-folds PAPER DATASET MODEL     the same for the profile's folds, one after another
    tabrepro train-config PAPER DATASET MODEL FOLD C   one configuration of a per-config model (NPT, BiSHop)
    tabrepro train-batch PAPER DATASET MODEL FOLD B    batch B of its configurations (params.yaml configs_per_job)
    tabrepro select PAPER DATASET MODEL FOLD     choose a per-config model's configuration, score it on test
    tabrepro tables PAPER                        aggregate per-fold results into the paper's tables
    tabrepro scorecard [PAPER]                   judge every table cell against the paper's value
    tabrepro analyse PAPER DATASET EXPERIMENT [--fold K]   one of NPT's analysis experiments
    tabrepro sparsity PAPER DATASET MODEL --fold K [K ...]   feature-sparsity curves (BiSHop Fig. 4.1)
    tabrepro sparsity-plot [PAPER]               average the feature-sparsity curves: CSV, PNG, summary
    tabrepro report [--output-dir DIR]           the static HTML report of the whole run
    tabrepro record [NAME] [--wall-time S]       copy the run into docs/records/NAME; regenerate the
                                                 README's records block and docs/reproduction.md's table
    tabrepro record --check                      are both current, and has every differing cell a cause?
    tabrepro record NAME --restore               put record NAME's results back into the run (to continue it)
    tabrepro plan [--compare]                    the profile's compute plan: configurations, fits, CPU-/GPU-
                                                 hours and peak memory per paper x dataset x model, totals

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
from tabrepro.cli import record
from tabrepro.cli.common import (
    job_of,
    load_params,
    per_config,
    print_result,
    require_splits,
    require_table,
    warn_missing_results,
)
from tabrepro.config import DEFAULT_PARAMS_FILE, Job, ParamsError
from tabrepro.errors import InputError
from tabrepro.nn.session import retain_freed_memory

_job = job_of  # the name tests/test_config.py imports

# One pass over a whole table, nothing allocated again and again: the heap settings that spare a
# training loop its page faults would only keep the table's freed copies resident (HIGGS's
# prepare peaked at 6.3 GiB with them, 5.9 GiB without).
TABLE_COMMANDS = ("fetch", "prepare", "split")


def cmd_validate(args: argparse.Namespace) -> None:
    params = load_params(args)
    print(f"{params.source}: valid; profile {params.profile_name!r}: {params.profile['description']}")
    for paper in params.papers:
        datasets, models = params.selected_datasets(paper), params.selected_models(paper)
        n_jobs = len(params.jobs([paper]))
        print(f"  {paper}: {len(datasets)} dataset(s), {len(models)} model(s), {n_jobs} job(s)")


def cmd_jobs(args: argparse.Namespace) -> None:
    from tabrepro.data.availability import unobtainable_datasets

    params = load_params(args)
    unobtainable = {
        (paper, dataset): error
        for paper in params.papers
        for dataset, error in unobtainable_datasets(params, paper).items()
    }
    for paper, dataset in unobtainable:
        print(
            f"tabrepro jobs: leaving out {paper}/{dataset}: its download failed ({unobtainable[paper, dataset]})",
            file=sys.stderr,
        )
    for job in params.jobs():
        if (job.paper, job.dataset) not in unobtainable:
            print(params.layout.job_metrics.path(job))


def cmd_configs(args: argparse.Namespace) -> None:
    """The resolved candidate list of a dataset x model (every fold runs the same one)."""
    import json

    from tabrepro.data.registry import get_source
    from tabrepro.training import selection_metric
    from tabrepro.tuning import job_configs, variant_names

    params = load_params(args)
    job = job_of(params, argparse.Namespace(paper=args.paper, dataset=args.dataset, model=args.model, fold=0))
    if not params.runs_on(job.paper, job.model, job.dataset):
        raise ParamsError(
            f"model {job.model!r} does not run on {job.paper}/{job.dataset} (its tables cover another dataset group)"
        )
    task = get_source(params.source_of(job.paper, job.dataset)).task
    configs = job_configs(params, job, task)
    if args.json:
        print(json.dumps(configs, indent=1))
        return
    selected = job.dataset in params.selected_datasets(job.paper) and job.model in params.selected_models(job.paper)
    if not selected:
        reason = params.not_run_reason(job.model)
        print(
            f"tabrepro configs: note: profile {params.profile_name!r} does not run this job"
            + (f" ({reason})" if reason else ""),
            file=sys.stderr,
        )
    space = params.dataset_entry(job.paper, job.dataset)["search_space"]
    encodings = sorted({str(config["cat_encoding"]) for config in configs if "cat_encoding" in config})
    header = (
        f"# {job.paper}/{job.dataset}/{job.model}, profile {params.profile_name!r}: {len(configs)} "
        f"configuration(s) from search space {space!r}, task {task}, "
        f"selected on validation {selection_metric(params, job.paper, task)}"
        + (f", categorical features {'/'.join(encodings)}" if encodings else "")
    )
    note = params.budget_note(job.paper, job.dataset, job.model)
    print(header + (f"; {note}" if note else ""))
    names = variant_names(params.search_space(job.paper, job.dataset, job.model))
    for index, config in enumerate(configs):
        label = f"{index} {names[index]}" if names else str(index)
        print(f"{label}\t{json.dumps(config)}")


def cmd_fetch(args: argparse.Namespace) -> None:
    from tabrepro.data.availability import FetchStatus, write_fetch_status
    from tabrepro.data.fetch import DEFAULT_DEADLINE_SECONDS, FetchError, fetch_dataset_status, forget_dataset

    params = load_params(args)
    fetch = params.raw["fetch"]
    if args.refresh:
        for path in forget_dataset(args.dataset, params.raw_dir()):
            print(f"tabrepro fetch: removed {path}", file=sys.stderr)
    try:
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
    except FetchError as error:
        if not args.record:
            raise
        # The workflow goes on without this dataset; the scorecard shows why it is missing.
        path = write_fetch_status(params.raw_dir(), FetchStatus(args.dataset, ok=False, error=str(error)))
        print(f"tabrepro fetch: {args.dataset} not obtainable, recorded in {path}: {error}", file=sys.stderr)
        return
    if args.record:
        write_fetch_status(params.raw_dir(), status)
    if not status.verified:
        print(f"tabrepro fetch: {args.dataset}: unverified (only the mirror vouches for its checksum)", file=sys.stderr)
    for path in status.files:
        print(path)


def cmd_prepare(args: argparse.Namespace) -> None:
    from tabrepro.data.availability import read_fetch_status
    from tabrepro.data.parse import load_or_build_table
    from tabrepro.data.registry import get_source
    from tabrepro.data.table import save_table

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
    import numpy as np

    from tabrepro.data.table import load_table
    from tabrepro.seeding import derive_seed
    from tabrepro.splits import make_all_splits, save_splits

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


def cmd_train(args: argparse.Namespace) -> None:
    from tabrepro.training import run_job, write_result

    params = load_params(args)
    job = job_of(params, args)
    if per_config(job.model):
        raise ParamsError(
            f"{job.model} trains one job per configuration (or batch): use `tabrepro train-config` "
            f"or `train-batch`, then `tabrepro select` (the workflow does this)"
        )
    require_splits(params, job)
    result = run_job(params, job, n_jobs=args.threads, progress=not args.quiet)
    out = args.output or params.layout.job_metrics.path(job)
    write_result(result, Path(out))
    print_result(Path(out), result)


def cmd_train_folds(args: argparse.Namespace) -> None:
    from tabrepro.training import run_folds, write_result

    params = load_params(args)
    folds = args.folds
    if folds is None:  # the profile's folds of this dataset (the workflow's train_folds job)
        folds = list(dict.fromkeys(j.fold for j in params.jobs([args.paper]) if j.dataset == args.dataset))
        if not folds:
            raise ParamsError(f"profile {params.profile_name!r} runs no fold of {args.paper}/{args.dataset}")
    jobs = [job_of(params, argparse.Namespace(**{**vars(args), "fold": fold})) for fold in folds]
    if per_config(args.model):
        raise ParamsError(f"{args.model} trains one job per configuration (or batch): use `tabrepro train-batch`")
    for job in jobs:
        require_splits(params, job)
    for job, result in run_folds(params, jobs, n_jobs=args.threads, progress=not args.quiet):
        out = params.layout.job_metrics.path(job)
        write_result(result, out)  # each fold as it finishes: a crash keeps the folds done before it
        print_result(out, result)


def cmd_train_config(args: argparse.Namespace) -> None:
    from tabrepro.training import run_config_job

    params = load_params(args)
    job = job_of(params, args)
    require_splits(params, job)
    out_dir = args.output_dir or params.config_dir(job, args.config)
    result = run_config_job(params, job, args.config, Path(out_dir), n_jobs=args.threads, keep_state=args.keep_state)
    print_result(Path(out_dir), result, split="val")


def cmd_train_batch(args: argparse.Namespace) -> None:
    from tabrepro.resources import config_batches, policy
    from tabrepro.training import run_config_batch, write_result

    params = load_params(args)
    job = job_of(params, args)
    if not per_config(job.model):
        raise ParamsError(f"{job.model} tunes inside one job: use `tabrepro train`")
    batches = config_batches(params, policy(params), job.paper, job.dataset, job.model)
    if not 0 <= args.batch < len(batches):
        raise ParamsError(
            f"batch {args.batch} out of range: {job.model} has {len(batches)} batch(es) of configurations "
            f"for {job.paper}/{job.dataset} in profile {params.profile_name!r}"
        )
    require_splits(params, job)
    manifest = run_config_batch(
        params, job, batches[args.batch], n_jobs=args.threads, progress=not args.quiet, keep_state=args.keep_state
    )
    out = Path(args.output or params.layout.config_batch.path(job, batch=args.batch))
    write_result(manifest, out)
    for entry in manifest["results"]:
        scores = ", ".join(f"{k}={v:.4g}" for k, v in sorted(entry["val"].items()))
        kept = " (kept from an earlier run)" if entry["reused"] else ""
        print(f"{entry['result']}: val {scores} ({entry['wall_time_s']:.1f} s){kept}")


def cmd_select(args: argparse.Namespace) -> None:
    from tabrepro.training import select_config, write_result

    params = load_params(args)
    job = job_of(params, args)
    if not per_config(job.model):
        raise ParamsError(f"{job.model} tunes inside one job: use `tabrepro train`")
    require_splits(params, job)
    out = Path(args.output or params.layout.job_metrics.path(job))
    result = select_config(params, job, out, n_jobs=args.threads)
    write_result(result, out)
    print_result(out, result)


def cmd_tables(args: argparse.Namespace) -> None:
    from tabrepro.reporting.tables import build_tables, collect_current_results

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


def cmd_plan(args: argparse.Namespace) -> None:
    """The compute plan of the active profile (tabrepro.plan), from the calibrated cost model."""
    from tabrepro.plan import run_plan

    print(
        run_plan(
            load_params(args),
            args.params,
            measured_dirs=args.measured,
            data_dirs=args.data_dir,
            gpu_tflops=args.gpu_tflops,
            compare_only=args.compare,
            show_calibration=args.calibration,
        )
    )


def cmd_scorecard(args: argparse.Namespace) -> None:
    """Judge every table cell against the paper; exit 0 even when cells differ (it is a report)."""
    from tabrepro.reporting.claims import judge_claims
    from tabrepro.reporting.scorecard import build_scorecard, summary
    from tabrepro.reporting.scorecard_markdown import write_scorecard

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
                print(
                    f"{paper} ({'own runs' if group == 'own' else 'quoted numbers'}): {tally['cells']} cells: "
                    f"{tally['reproduced']} reproduced, {tally['differs']} differ, {tally['inconclusive']} "
                    f"inconclusive, {tally['not_comparable']} not comparable, {tally['not_run']} not run"
                )


def cmd_analyse(args: argparse.Namespace) -> None:
    from tabrepro.analysis.runner import run_experiment

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
    import torch

    from tabrepro.feature_sparsity import run_curve
    from tabrepro.provenance import reset_peak_memory

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
    from tabrepro.feature_sparsity import plot_curves

    files = plot_curves(load_params(args), args.paper)
    print(files["png"])


def cmd_report(args: argparse.Namespace) -> None:
    from tabrepro.reporting.html import build_report
    from tabrepro.reporting.tables import collect_current_results

    params = load_params(args)
    papers = [paper for paper in params.papers if params.jobs([paper])]
    found = sum(len(collect_current_results(params, paper)) for paper in papers)
    warn_missing_results(params, papers, found, "report")
    out_dir = args.output_dir or params.layout.report_dir.path()
    print(build_report(params, Path(out_dir)))


def cmd_list(args: argparse.Namespace) -> None:
    from tabrepro.listing import list_datasets, list_models, list_profiles

    params = load_params(args)
    lister = {"datasets": list_datasets, "models": list_models, "profiles": list_profiles}[args.what]
    print(lister(params))


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

    add("validate", cmd_validate, "check params.yaml and summarise the active profile")
    p = add(
        "list",
        cmd_list,
        "list the registry's datasets (papers, task, rows, availability), the models "
        "(accelerator, job layout, papers) or the profiles (description, job counts)",
    )
    p.add_argument("what", choices=("datasets", "models", "profiles"))
    add("jobs", cmd_jobs, "list the result file of every job in the active profile")
    p = add(
        "configs",
        cmd_configs,
        "print the candidate configurations a dataset x model's jobs run "
        "(search space resolved, profile caps and overrides applied; the same for every fold)",
    )
    p.add_argument("paper", help="a key of params.yaml `papers`, e.g. npt")
    p.add_argument("dataset", help="the paper's dataset name, e.g. breast_cancer")
    p.add_argument("model", help="a model name, e.g. xgboost or npt")
    p.add_argument("--json", action="store_true", help="one JSON list of the configurations, nothing else")
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
        help="start over: first delete the dataset's files, their recorded hashes (SHA256SUMS) "
        "and fetch_status.json, then download everything again",
    )
    p = add("prepare", cmd_prepare, "parse a dataset's raw files (or embedded copy) into a canonical table")
    p.add_argument("dataset", help="registry name")
    p = add("split", cmd_split, "write a paper's fixed splits for one of its datasets")
    p.add_argument("paper")
    p.add_argument("dataset", help="the paper's dataset name")

    def add_keep_state_argument(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--keep-state",
            action="store_true",
            default=None,
            help="keep a finished configuration's resumable state (configC/state/: NPT's state.pt, "
            "tens of MB and more) instead of removing it once its result.json is written; "
            "TABREPRO_KEEP_STATE=1 in the environment does the same for every job of a run",
        )

    def add_job_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("paper", help="a key of params.yaml `papers`, e.g. npt")
        p.add_argument("dataset", help="the paper's dataset name, e.g. breast_cancer")
        p.add_argument("model", help="a model name, e.g. xgboost or npt")
        p.add_argument("fold", type=int, help="fold index (0 for single-split protocols)")

    p = add("train", cmd_train, "tune one model on one fold's validation split and score it on test")
    add_job_arguments(p)
    p.add_argument("--threads", type=int, default=1, help="threads the model may use (default: 1)")
    p.add_argument("--output", type=Path, help="result file (default: results/PAPER/DATASET/MODEL/foldK/metrics.json)")
    p = add(
        "train-folds",
        cmd_train_folds,
        "`train` for several folds one after another in one process (the workflow's train_folds "
        "job for params.yaml `folds_in_one_job`): each fold's metrics.json as its own job writes it",
    )
    p.add_argument("paper", help="a key of params.yaml `papers`, e.g. npt")
    p.add_argument("dataset", help="the paper's dataset name, e.g. breast_cancer")
    p.add_argument("model", help="a model that tunes inside one job, e.g. xgboost")
    p.add_argument("--folds", type=int, nargs="+", help="fold indices (default: the profile's folds of the dataset)")
    p.add_argument("--threads", type=int, default=1, help="threads the model may use (default: 1)")
    p = add(
        "train-config",
        cmd_train_config,
        "train one configuration of a per-configuration model (e.g. one NPT variant); resumes "
        "from its state file after a crash or preemption",
    )
    add_job_arguments(p)
    p.add_argument("config", type=int, help="configuration (variant) index")
    p.add_argument("--threads", type=int, default=1, help="threads the model may use (default: 1)")
    add_keep_state_argument(p)
    p.add_argument("--output-dir", type=Path, help="default: results/PAPER/DATASET/MODEL/foldK/configC")
    p = add(
        "train-batch",
        cmd_train_batch,
        "train one batch of a per-configuration model's configurations, one after another (the "
        "workflow's train_batch job); keeps configurations already finished under the same "
        "parameters, resumes an interrupted one from its state file",
    )
    add_job_arguments(p)
    p.add_argument("batch", type=int, help="batch index (configs_per_job configurations each)")
    p.add_argument("--threads", type=int, default=1, help="threads the model may use (default: 1)")
    add_keep_state_argument(p)
    p.add_argument("--output", type=Path, help="manifest (default: results/PAPER/DATASET/MODEL/foldK/batchB.json)")
    p = add(
        "select",
        cmd_select,
        "choose a per-configuration model's configuration on validation; score it on "
        "test (retraining it with further seeds when the protocol has `repeats`)",
    )
    add_job_arguments(p)
    p.add_argument("--threads", type=int, default=1, help="threads for retraining on repeats (default: 1)")
    p.add_argument("--output", type=Path, help="result file (default: results/PAPER/DATASET/MODEL/foldK/metrics.json)")
    p = add("tables", cmd_tables, "aggregate per-fold results into a paper's tables (Markdown, LaTeX, CSV)")
    p.add_argument("paper")
    record.register(add)
    p = add(
        "scorecard",
        cmd_scorecard,
        "judge every table cell of the profile against the paper's value "
        "within a declared margin (reproduced / differs / inconclusive / not comparable / not run)",
    )
    p.add_argument("paper", nargs="?", help="only this paper (default: every paper the profile selects)")
    p.add_argument("--output-dir", type=Path, help="default: results/scorecard (results/scorecard/PAPER with PAPER)")
    p.add_argument("--logs-dir", type=Path, help="the workflow's logs (default: logs/ beside params.yaml)")

    from tabrepro.analysis.settings import EXPERIMENTS, SYNTHETIC

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
    p = add(
        "plan",
        cmd_plan,
        "the active profile's compute plan (e.g. --profile paper): per paper x dataset x model the "
        "configurations, fits, CPU-hours, GPU-hours and peak memory, and totals, from a cost model "
        "calibrated on the committed run records and scale benchmarks",
    )
    p.add_argument(
        "--measured", type=Path, action="append", default=[], help="a further run's results/ to calibrate on"
    )
    p.add_argument("--data-dir", type=Path, action="append", default=[], help="a data/ whose prepared shapes to use")
    p.add_argument("--gpu-tflops", type=float, help="assumed sustained GPU TFLOP/s (default: the cost model's)")
    p.add_argument("--compare", action="store_true", help="predicted vs measured time for every measured job")
    p.add_argument("--calibration", action="store_true", help="print the calibrated weights first")
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


def one_line(error: BaseException) -> str:
    """The error's message on a single line."""
    text = str(error) or type(error).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


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
