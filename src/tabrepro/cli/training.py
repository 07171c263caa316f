"""`tabrepro train`, `train-folds`, `train-config`, `train-batch`, `select` and `repeat`: one job,
or one configuration, batch or repeat of a per-configuration model, trained and scored."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tabrepro.cli.common import AddCommand, job_of, load_params, per_config, print_result, require_splits
from tabrepro.config import ParamsError
from tabrepro.job_spec import resolve_job
from tabrepro.resource_policy import config_batches, policy


def cmd_train(args: argparse.Namespace) -> None:
    from tabrepro.job_run import predictions_beside, write_result  # deferred: loads sklearn
    from tabrepro.training import run_job  # deferred: loads sklearn

    params = load_params(args)
    job = job_of(params, args)
    if per_config(job.model):
        raise ParamsError(
            f"{job.model} trains one job per configuration (or batch): use `tabrepro train-config` "
            f"or `train-batch`, then `tabrepro select` (the workflow does this)"
        )
    require_splits(params, job)
    spec = resolve_job(params, job)
    out = args.output or spec.metrics_path
    result = run_job(spec, n_jobs=args.threads, progress=not args.quiet, predictions_path=predictions_beside(Path(out)))
    write_result(result, Path(out))
    print_result(Path(out), result)


def cmd_train_folds(args: argparse.Namespace) -> None:
    from tabrepro.job_run import write_result  # deferred: loads sklearn
    from tabrepro.training import run_folds  # deferred: loads sklearn

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
    specs = [resolve_job(params, job) for job in jobs]
    for spec, result in run_folds(specs, n_jobs=args.threads, progress=not args.quiet):
        write_result(result, spec.metrics_path)  # each fold as it finishes: a crash keeps the folds done before it
        print_result(spec.metrics_path, result)


def cmd_train_config(args: argparse.Namespace) -> None:
    from tabrepro.config_jobs import run_config_job  # deferred: loads sklearn

    params = load_params(args)
    job = job_of(params, args)
    require_splits(params, job)
    spec = resolve_job(params, job)
    out_dir = args.output_dir or spec.config_dir(args.config)
    result = run_config_job(spec, args.config, Path(out_dir), n_jobs=args.threads, keep_state=args.keep_state)
    print_result(Path(out_dir), result, split="val")


def cmd_train_batch(args: argparse.Namespace) -> None:
    from tabrepro.config_jobs import run_config_batch  # deferred: loads sklearn
    from tabrepro.job_run import write_result  # deferred: loads sklearn

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
        resolve_job(params, job),
        batches[args.batch],
        n_jobs=args.threads,
        progress=not args.quiet,
        keep_state=args.keep_state,
    )
    out = Path(args.output or params.layout.config_batch.path(job, batch=args.batch))
    write_result(manifest, out)
    for entry in manifest["results"]:
        scores = ", ".join(f"{k}={v:.4g}" for k, v in sorted(entry["val"].items()))
        kept = " (kept from an earlier run)" if entry["reused"] else ""
        print(f"{entry['result']}: val {scores} ({entry['wall_time_s']:.1f} s){kept}")


def cmd_select(args: argparse.Namespace) -> None:
    from tabrepro.config_jobs import select_config  # deferred: loads sklearn
    from tabrepro.job_run import write_result  # deferred: loads sklearn

    params = load_params(args)
    job = job_of(params, args)
    if not per_config(job.model):
        raise ParamsError(f"{job.model} tunes inside one job: use `tabrepro train`")
    require_splits(params, job)
    spec = resolve_job(params, job)
    out = Path(args.output or spec.metrics_path)
    result = select_config(spec, out, n_jobs=args.threads)
    write_result(result, out)
    print_result(out, result)


def cmd_repeat(args: argparse.Namespace) -> None:
    from tabrepro.config_jobs import run_repeat  # deferred: loads sklearn

    params = load_params(args)
    job = job_of(params, args)
    if not per_config(job.model):
        raise ParamsError(f"{job.model} tunes inside one job: repeats belong to per-configuration models")
    require_splits(params, job)
    path = run_repeat(resolve_job(params, job), args.repeat, n_jobs=args.threads)
    test = json.loads(path.read_text())["test"]
    scores = ", ".join(f"{key} {value:.4f}" for key, value in sorted(test.items()))
    print(f"{path}: test {scores}")


def add_keep_state_argument(p: argparse.ArgumentParser) -> None:
    """--keep-state, for the commands that train configurations of a per-configuration model."""
    p.add_argument(
        "--keep-state",
        action="store_true",
        default=None,
        help="keep a finished configuration's resumable state (configC/state/: NPT's state.pt, "
        "tens of MB and more) instead of removing it once its result.json is written; "
        "TABREPRO_KEEP_STATE=1 in the environment does the same for every job of a run",
    )


def add_job_arguments(p: argparse.ArgumentParser) -> None:
    """PAPER DATASET MODEL FOLD, the job's positional arguments."""
    p.add_argument("paper", help="a key of params.yaml `papers`, e.g. npt")
    p.add_argument("dataset", help="the paper's dataset name, e.g. breast_cancer")
    p.add_argument("model", help="a model name, e.g. xgboost or npt")
    p.add_argument("fold", type=int, help="fold index (0 for single-split protocols)")


def register(add: AddCommand) -> None:
    """The training subcommands and their options."""
    p = add("train", cmd_train, "tune one model on one fold's validation split and score it on test")
    add_job_arguments(p)
    p.add_argument("--threads", type=int, default=1, help="threads the model may use (default: 1)")
    p.add_argument(
        "--output",
        type=Path,
        help="result file (default: results/PAPER/DATASET/MODEL/foldK/metrics.json); the test "
        "predictions go beside it (test_predictions.npz)",
    )
    p = add(
        "train-folds",
        cmd_train_folds,
        "`train` for several folds one after another in one process (the workflow's train_folds "
        "job for params.yaml `folds_in_one_job`): each fold's metrics.json and test predictions "
        "as its own job writes them",
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
    p.add_argument(
        "--output",
        type=Path,
        help="result file (default: results/PAPER/DATASET/MODEL/foldK/metrics.json); the chosen "
        "weights and the test predictions go beside it",
    )
    p = add(
        "repeat",
        cmd_repeat,
        "retrain the chosen configuration with one further seed of the protocol's repeats and keep "
        "its test metrics and outputs in two small files that `select` picks up: run repeats side "
        "by side (another core, or another machine with the repeat's directory copied back) "
        "instead of one after another",
    )
    add_job_arguments(p)
    p.add_argument(
        "repeat", type=int, help="repeat index, 1 to the protocol's repeats - 1 (run 0 is the configuration's own)"
    )
    p.add_argument("--threads", type=int, default=1, help="threads the model may use (default: 1)")
