"""What several `tabrepro` commands share: the parameters they read, the job named on the command
line, the prepared inputs a step needs (or the command that makes them), and the result line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tabrepro.config import Job, Params, ParamsError
from tabrepro.errors import InputError
from tabrepro.models.registry import get_model_class

# `add(name, func, help_text)`: registers one subcommand and returns its parser (see build_parser).
AddCommand = Callable[[str, Callable[[argparse.Namespace], None], str], argparse.ArgumentParser]


def load_params(args: argparse.Namespace) -> Params:
    """params.yaml (or --params) under the profile of --profile (or the file's own)."""
    return Params.from_file(args.params, profile=args.profile)


def require_table(params: Params, source: str) -> None:
    """The prepared table of a registry source, or an error naming the command that makes it."""
    path = params.layout.processed_table.path(source=source)
    if not path.is_file():
        raise InputError(f"{path} does not exist: run `tabrepro prepare {source}` first")


def require_splits(params: Params, job: Job) -> None:
    """The job's prepared table and split file, or an error naming the command that makes them."""
    require_table(params, params.source_of(job.paper, job.dataset))
    path = params.layout.split_fold.path(job)
    if not path.is_file():
        raise InputError(f"{path} does not exist: run `tabrepro split {job.paper} {job.dataset}` first")


def job_of(params: Params, args: argparse.Namespace) -> Job:
    """The job named on the command line, checked against params.yaml."""
    job = Job(args.paper, args.dataset, args.model, args.fold)
    params.dataset_entry(job.paper, job.dataset)
    if job.model not in params.all_models(job.paper) and job.model not in params.selected_models(job.paper):
        # an extension (e.g. npt_isab) is a job of the paper only where the profile selects it
        raise ParamsError(f"model {job.model!r} is not evaluated in paper {job.paper!r}")
    if job.fold not in range(params.n_folds(job.paper, job.dataset)):
        raise ParamsError(
            f"fold {job.fold} out of range: {job.dataset} has {params.n_folds(job.paper, job.dataset)} fold(s)"
        )
    return job


def per_config(model: str) -> bool:
    """Does the model train one job per configuration (NPT, BiSHop) rather than tune in one?"""

    return get_model_class(model).per_config_jobs


def print_result(out: Path, result: dict, split: str = "test") -> None:
    """One line: where the result went, its scores on `split` and its wall time."""
    scores = ", ".join(f"{k}={v:.4g}" for k, v in sorted(result["metrics"][split].items()))
    print(f"{out}: {split} {scores} ({result['wall_time_s']:.1f} s)")


def warn_missing_results(params: Params, papers: list[str], n_found: int, command: str) -> None:
    """Say on stderr when results are missing, and what makes them (the output still goes out:
    a table or report with the paper's numbers only is useful, and it is not an error)."""
    expected = sum(len(params.jobs([paper])) for paper in papers)
    if n_found >= expected:
        return
    what = "no results yet" if n_found == 0 else f"results for {n_found} of {expected} jobs"
    print(
        f"tabrepro {command}: warning: {what} for {', '.join(papers) or 'any paper'} in "
        f"{params.results_dir}/ (profile {params.profile_name!r}); the rest shows the paper's numbers "
        f"only. Run `snakemake --cores N all` (or `tabrepro train ...` per job) first.",
        file=sys.stderr,
    )
