# Shared helpers for the rules: the validated parameters and the input functions.
import os
import re
import shlex
import sys

import yaml

from tabrepro.config import Job, Params, ParamsError
from tabrepro.models.registry import MODEL_NAMES, get_model_class

PARAMS_FILE = "params.yaml"


def _load_params(config):
    """The validated params.yaml with the profile chosen by `--config profile=...`.

    Only `profile` may be overridden on the command line: the CLI that the rules call reads
    params.yaml itself, so any other override would silently not reach the jobs.
    """
    with open(PARAMS_FILE) as handle:
        on_disk = yaml.safe_load(handle)
    extra = sorted(k for k in config if k != "profile" and config[k] != on_disk.get(k))
    if extra:
        raise ParamsError(f"--config may only set 'profile' (got {', '.join(extra)}); edit {PARAMS_FILE} instead")
    return Params(on_disk, source=PARAMS_FILE, profile=config.get("profile"))


PARAMS = _load_params(config)
PROFILE = PARAMS.profile_name
DATA = str(PARAMS.data_dir)
RESULTS = str(PARAMS.results_dir)
LOGS = "logs"
# The Python running Snakemake runs the jobs too, so an unactivated .venv/bin/snakemake works.
CLI = f"{shlex.quote(sys.executable)} -m tabrepro --params {PARAMS_FILE} --profile {PROFILE} --quiet"

SELECTED_PAPERS = [p for p in PARAMS.papers if PARAMS.jobs([p])]


def embedded_or_raw(source):
    """Prepare needs downloaded raw files, except for datasets with an embedded copy."""
    from tabrepro.data.registry import get_source

    if get_source(source).embedded:
        return []
    return [f"{DATA}/raw/{source}/fetched.txt"]


def split_files(wildcards):
    n = PARAMS.n_folds(wildcards.paper, wildcards.dataset)
    return [f"{DATA}/splits/{wildcards.paper}/{wildcards.dataset}/fold{k}.npy" for k in range(n)]


def processed_table(wildcards):
    source = PARAMS.source_of(wildcards.paper, wildcards.dataset)
    return f"{DATA}/processed/{source}/table.parquet"


def job_digest(wildcards):
    return PARAMS.job_digest(Job(wildcards.paper, wildcards.dataset, wildcards.model, int(wildcards.fold)))


def paper_results(paper):
    return [str(PARAMS.job_dir(job) / "metrics.json") for job in PARAMS.jobs([paper])]


def all_tables():
    tables = []
    for paper in SELECTED_PAPERS:
        tables.extend(f"{RESULTS}/tables/{paper}/{name}.md" for name in PARAMS.paper(paper)["tables"])
    return tables


# Models that tune inside one job (rule train) vs. one job per configuration (rules
# train_config + select_config, e.g. NPT's variants); see tabrepro.models.base.
PER_CONFIG_MODELS = [m for m in MODEL_NAMES if get_model_class(m).per_config_jobs]
IN_JOB_MODELS = [m for m in MODEL_NAMES if m not in PER_CONFIG_MODELS]


def one_of(names):
    """A wildcard regex matching exactly these names."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def gpus(wildcards):
    """1 for GPU models (the Slurm plugin then adds --gpus=1), 0 otherwise (no GPU request)."""
    return 1 if get_model_class(wildcards.model).accelerator == "gpu" else 0


def config_results(wildcards):
    job = Job(wildcards.paper, wildcards.dataset, wildcards.model, int(wildcards.fold))
    n = PARAMS.n_configs(job.paper, job.dataset, job.model)
    return [str(PARAMS.config_dir(job, c) / "result.json") for c in range(n)]


def retrains(wildcards):
    """Does the selection job retrain the chosen configuration (protocol `repeats` > 1)?"""
    return PARAMS.repeats(wildcards.paper, wildcards.dataset) > 1
