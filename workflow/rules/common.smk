# Shared helpers for the rules: the validated parameters, the run's layout and every input function
# (the rule files hold rules only).
import functools
import hashlib
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from tabrepro.bishop.feature_sparsity import plan_jobs, sparsity_settings
from tabrepro.config import Job, Params, ParamsError, read_params_file
from tabrepro.models.registry import MODEL_NAMES, get_model_class
from tabrepro.npt.analysis.jobs import active_settings, lookup_input_files
from tabrepro.npt.analysis.settings import FOLD_EXPERIMENTS, experiment_digest
from tabrepro.resource_policy import fold_groups
from tabrepro.resources import JobSizer

PARAMS_FILE = "params.yaml"


def _load_params(config):
    """The validated params.yaml with the profile chosen by `--config profile=...`.

    Only `profile` may be overridden on the command line: the CLI that the rules call reads
    params.yaml itself, so any other override would silently not reach the jobs.
    """
    on_disk = read_params_file(PARAMS_FILE)
    as_read = read_params_file(PARAMS_FILE, profile_files=False)  # what `configfile:` read (no profiles/*.yaml)
    extra = sorted(k for k in config if k != "profile" and config[k] != as_read.get(k))
    if extra:
        raise ParamsError(f"--config may only set 'profile' (got {', '.join(extra)}); edit {PARAMS_FILE} instead")
    return Params(on_disk, source=PARAMS_FILE, profile=config.get("profile"))


try:
    PARAMS = _load_params(config)
except ParamsError as error:  # one line naming the bad key, not Snakemake's stack of frames
    print(f"tabrepro: error: {error}", file=sys.stderr)
    sys.exit(2)
PROFILE = PARAMS.profile_name
# Every path of the run, as patterns with wildcards (tabrepro.layout): the one place they are spelt.
LAYOUT = PARAMS.layout
# The Python running Snakemake runs the jobs too, so an unactivated .venv/bin/snakemake works.
CLI = f"{shlex.quote(sys.executable)} -m tabrepro --params {PARAMS_FILE} --profile {PROFILE} --quiet"

SELECTED_PAPERS = [p for p in PARAMS.papers if PARAMS.jobs([p])]
# Threads, memory and run time of every rule's jobs (params.yaml `resources`; tabrepro.resources),
# kept in .snakemake/ between runs while what they depend on is unchanged.
SIZER = JobSizer(PARAMS, cache_dir=Path(".snakemake/tabrepro-sizes"))


@functools.cache  # fixed for this run's parameters; asked once per fetch-status lookup
def downloaded_sources():
    """The registry sources of the profile's datasets that need a download (not embedded)."""
    from tabrepro.data.registry import get_source

    sources = {PARAMS.source_of(p, d) for p in SELECTED_PAPERS for d in PARAMS.selected_datasets(p)}
    return tuple(sorted(s for s in sources if not get_source(s).embedded))


def fetch_statuses(wildcards=None):
    """Every downloaded source's fetch record (one `fetch` job each, run in parallel)."""
    return [str(LAYOUT.fetch_status.path(source=source)) for source in downloaded_sources()]


# The checkpoint `availability` (data.smk) runs once every fetch has been tried; its file name
# carries a digest of the source list, so a profile asking for other datasets gets a fresh one.
AVAILABILITY = str(
    LAYOUT.availability.path(digest=hashlib.sha256(" ".join(downloaded_sources()).encode()).hexdigest()[:12])
)


def fetch_status(source):
    """A source's recorded fetch outcome (tabrepro.data.availability), once fetches have run.

    A download that fails is recorded, not fatal: the rest of the profile runs without that
    dataset and the scorecard names the error.
    """
    from tabrepro.data.availability import FetchStatus, read_fetch_status

    status = read_fetch_status(PARAMS.raw_dir(), source)
    if status is None and source in downloaded_sources():
        if workflow.dryrun:  # a dry run lists the jobs that a successful download would bring
            return FetchStatus(source, ok=True)
        checkpoints.availability.get()  # until it has run, Snakemake schedules it and asks again
        status = read_fetch_status(PARAMS.raw_dir(), source)
    # Still None: a source outside the profile, asked for by hand; its fetch runs before
    # `prepare`, which then stops with the recorded error if the download failed.
    return status or FetchStatus(source, ok=True)


def obtainable(paper, dataset):
    return fetch_status(PARAMS.source_of(paper, dataset)).ok


def embedded_or_raw(source):
    """Prepare needs the fetched raw files, except for datasets with an embedded copy."""
    from tabrepro.data.registry import get_source

    if get_source(source).embedded:
        return []
    status = fetch_status(source)
    if not status.ok:
        raise WorkflowError(
            f"dataset {source!r} could not be obtained: {status.error} "
            f"(delete {LAYOUT.fetch_status.path(source=source)} to try again)"
        )
    return [str(LAYOUT.fetch_status.path(source=source))]


def processed_table(wildcards):
    return str(LAYOUT.processed_table.path(source=PARAMS.source_of(wildcards.paper, wildcards.dataset)))


def job_digest(wildcards):
    return PARAMS.job_digest(Job(wildcards.paper, wildcards.dataset, wildcards.model, int(wildcards.fold)))


def fold_pattern(pattern, fold):
    """`pattern` with its {fold} wildcard filled and the others kept (a train_folds output)."""
    return pattern.replace("{fold}", str(fold))


# The paper x dataset fold groups that train_folds jobs train (params.yaml `folds_in_one_job`).
FOLD_GROUPS = list(SIZER.fold_groups.values())


def folds_digest(wildcards):
    """Reruns a train_folds job when a parameter of any of its folds' results changes."""
    group = SIZER.fold_groups[wildcards.paper, wildcards.dataset]
    jobs = [Job(wildcards.paper, wildcards.dataset, wildcards.model, fold) for fold in group.folds]
    return hashlib.sha256(" ".join(PARAMS.job_digest(job) for job in jobs).encode()).hexdigest()[:16]


def paper_results(paper):
    """Result files of the paper's jobs whose dataset could be obtained (see `fetch_status`)."""
    jobs = PARAMS.jobs([paper])
    usable = {d: obtainable(paper, d) for d in dict.fromkeys(job.dataset for job in jobs)}
    return [str(LAYOUT.job_metrics.path(job)) for job in jobs if usable[job.dataset]]


def all_results(wildcards=None):
    return [path for paper in SELECTED_PAPERS for path in paper_results(paper)]


def all_tables():
    tables = []
    for paper in SELECTED_PAPERS:
        tables.extend(
            str(LAYOUT.table.path(paper=paper, table=name, ext="md")) for name in PARAMS.paper(paper)["tables"]
        )
    return tables


# Models that tune inside one job (rule train) vs. one job per configuration or batch of them
# (rules train_batch + select_config, e.g. NPT's variants); see tabrepro.models.base.
PER_CONFIG_MODELS = [m for m in MODEL_NAMES if get_model_class(m).per_config_jobs]
IN_JOB_MODELS = [m for m in MODEL_NAMES if m not in PER_CONFIG_MODELS]


def one_of(names):
    """A wildcard regex matching exactly these names."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def gpus(wildcards):
    """1 for GPU models (the Slurm plugin then adds --gpus=1), 0 otherwise (no GPU request)."""
    return 1 if get_model_class(wildcards.model).accelerator == "gpu" else 0


def config_batches(wildcards):
    """The manifests of the job's train_batch jobs (params.yaml `configs_per_job` configurations each)."""
    job = Job(wildcards.paper, wildcards.dataset, wildcards.model, int(wildcards.fold))
    n = len(SIZER.config_batches(job.paper, job.dataset, job.model))
    return [str(LAYOUT.config_batch.path(job, batch=b)) for b in range(n)]


def retrains(wildcards):
    """Does the selection job retrain the chosen configuration (protocol `repeats` > 1)?"""
    return PARAMS.repeats(wildcards.paper, wildcards.dataset, wildcards.model) > 1


# ------------------------------------------------------------------------ NPT's analysis experiments
ANALYSIS = active_settings(PARAMS)
ANALYSIS_PAPER = (ANALYSIS or active_settings(PARAMS, required=True)).paper


def analysis_targets(wildcards=None):
    """Every analysis result file of the active profile whose dataset could be obtained."""
    from tabrepro.npt.analysis.jobs import plan_fold_jobs, result_path
    from tabrepro.npt.analysis.settings import SYNTHETIC

    if ANALYSIS is None:
        return []
    targets = [
        str(result_path(PARAMS, experiment, dataset, fold))
        for experiment, dataset, fold in plan_fold_jobs(PARAMS, ANALYSIS)
        if obtainable(ANALYSIS_PAPER, dataset)
    ]
    lookup = ANALYSIS.lookup.dataset
    if "lookup" in ANALYSIS.experiments and (lookup == SYNTHETIC or obtainable(ANALYSIS_PAPER, lookup)):
        targets.append(str(result_path(PARAMS, "lookup", lookup)))
    return targets


def analysis_digest(wildcards):
    """Reruns an experiment when its settings (or the root seed) change."""
    settings = ANALYSIS or active_settings(PARAMS, required=True)
    experiment = getattr(wildcards, "experiment", "lookup")
    return experiment_digest(settings, experiment, PARAMS.seed)


def trained_npt(wildcards):
    job = Job(ANALYSIS_PAPER, wildcards.dataset, "npt", int(wildcards.fold))
    source = PARAMS.source_of(ANALYSIS_PAPER, wildcards.dataset)
    return {
        "metrics": str(LAYOUT.job_metrics.path(job)),
        "weights": str(LAYOUT.job_weights.path(job)),
        "table": str(LAYOUT.processed_table.path(source=source)),
        "splits": str(LAYOUT.split_manifest.path(paper=ANALYSIS_PAPER, dataset=wildcards.dataset)),
    }


# ------------------------------------------------------------------------ feature-sparsity curves
SPARSITY = sparsity_settings(PARAMS)
SPARSITY_JOBS = plan_jobs(PARAMS, SPARSITY)


def sparsity_targets():
    """The averaged curves of the active profile (empty if it runs none)."""
    if SPARSITY is None:
        return []
    return [
        str(LAYOUT.sparsity_curves_png.path(paper=SPARSITY.paper)),
        str(LAYOUT.sparsity_curves_csv.path(paper=SPARSITY.paper)),
    ]


def sparsity_main_run(wildcards):
    job = Job(wildcards.paper, wildcards.dataset, wildcards.model, int(wildcards.fold))
    source = PARAMS.source_of(job.paper, job.dataset)
    return {
        "metrics": str(LAYOUT.job_metrics.path(job)),
        "table": str(LAYOUT.processed_table.path(source=source)),
        "splits": str(LAYOUT.split_manifest.path(paper=job.paper, dataset=job.dataset)),
    }


def sparsity_main_runs(wildcards, folds):
    """The main runs of a dataset x model's folds (a feature_sparsity_folds job), by name."""
    job = Job(wildcards.paper, wildcards.dataset, wildcards.model, folds[0])
    source = PARAMS.source_of(job.paper, job.dataset)
    return {
        **{f"metrics{k}": str(LAYOUT.job_metrics.path(job, fold=k)) for k in folds},
        "table": str(LAYOUT.processed_table.path(source=source)),
        "splits": str(LAYOUT.split_manifest.path(paper=job.paper, dataset=job.dataset)),
    }


# The paper x dataset fold groups of the curves (params.yaml `folds_in_one_job`, as for training).
SPARSITY_GROUPS = fold_groups(PARAMS, SIZER.policy, SPARSITY_JOBS)


def sparsity_results(wildcards=None):
    """The curve jobs whose dataset could be obtained (a partial run plots what it has)."""
    return [str(LAYOUT.sparsity_result.path(job)) for job in SPARSITY_JOBS if obtainable(job.paper, job.dataset)]
