"""`tabrepro validate`, `list`, `jobs` and `configs`: what params.yaml and the active profile hold,
what there is to run and what a job will run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tabrepro.cli.common import AddCommand, job_of, load_params
from tabrepro.config import ParamsError
from tabrepro.data.availability import unobtainable_datasets
from tabrepro.data.registry import get_source
from tabrepro.job_spec import resolve_job
from tabrepro.listing import list_datasets, list_models, list_profiles
from tabrepro.workflow_checks import check_workflow_settings


def cmd_validate(args: argparse.Namespace) -> None:

    params = load_params(args)
    check_workflow_settings(params)
    print(f"{params.source}: valid; profile {params.profile_name!r}: {params.profile['description']}")
    for paper in params.papers:
        datasets, models = params.selected_datasets(paper), params.selected_models(paper)
        n_jobs = len(params.jobs([paper]))
        print(f"  {paper}: {len(datasets)} dataset(s), {len(models)} model(s), {n_jobs} job(s)")


def cmd_list(args: argparse.Namespace) -> None:

    params = load_params(args)
    lister = {"datasets": list_datasets, "models": list_models, "profiles": list_profiles}[args.what]
    print(lister(params))


def cmd_jobs(args: argparse.Namespace) -> None:

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

    from tabrepro.tuning import job_configs, variant_names  # deferred: loads scipy

    params = load_params(args)
    job = job_of(params, argparse.Namespace(paper=args.paper, dataset=args.dataset, model=args.model, fold=0))
    if not params.runs_on(job.paper, job.model, job.dataset):
        raise ParamsError(
            f"model {job.model!r} does not run on {job.paper}/{job.dataset} (its tables cover another dataset group)"
        )
    spec = resolve_job(params, job)
    task = get_source(spec.source).task
    configs = job_configs(spec, task)
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
        f"selected on validation {spec.selection_metrics[task]}"
        + (f", categorical features {'/'.join(encodings)}" if encodings else "")
    )
    note = params.budget_note(job.paper, job.dataset, job.model)
    print(header + (f"; {note}" if note else ""))
    names = variant_names(spec.search_space)
    for index, config in enumerate(configs):
        label = f"{index} {names[index]}" if names else str(index)
        print(f"{label}\t{json.dumps(config)}")


def cmd_dvc_yaml(args: argparse.Namespace) -> None:
    """Rewrite dvc.yaml's per-paper blocks from params.yaml's papers (a paper added or removed)."""
    from tabrepro.dvc_blocks import update_dvc_yaml  # deferred: loads pandas

    params = load_params(args)
    changed = update_dvc_yaml(params.raw, args.dvc_file, check=args.check)
    if not changed:
        print(f"{args.dvc_file}: its paper blocks are current")
    elif args.check:
        print(f"{args.dvc_file}: stale blocks {', '.join(changed)}; run `tabrepro dvc-yaml`", file=sys.stderr)
        sys.exit(1)
    else:
        print(f"{args.dvc_file}: rewrote blocks {', '.join(changed)}")


def register(add: AddCommand) -> None:
    """The `validate`, `list`, `jobs`, `configs` and `dvc-yaml` subcommands and their options."""
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
    p = add("dvc-yaml", cmd_dvc_yaml, "rewrite dvc.yaml's per-paper lines from params.yaml's papers")
    p.add_argument("--check", action="store_true", help="only say whether they are current (exit 1 if not)")
    p.add_argument("--dvc-file", type=Path, default=Path("dvc.yaml"), help="the file to update (default: dvc.yaml)")
