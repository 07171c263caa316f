"""A training job resolved once from params.yaml: the settings and paths its commands need.

Params answers each question by walking params.yaml again (profile, overrides, `extends`).
`resolve_job` asks it once per job, and the training modules (tabrepro.training,
tabrepro.config_jobs, tabrepro.tuning's `job_configs`) take the resulting `JobSpec`, so no step of
a job can see settings other than those it started with.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tabrepro.config import Job, Params
from tabrepro.layout import PathPattern
from tabrepro.tasks import TASKS

__all__ = ["SELECTION_METRIC", "JobSpec", "resolve_job", "selection_metric"]

# The deep models' criterion (validation target loss) serves every model: it is smooth, unlike
# AUROC or accuracy on a few dozen validation rows. A paper's `selection_metric` (params.yaml)
# replaces it where the paper's tables were selected otherwise (BiSHop: validation AUROC, R²).
SELECTION_METRIC = {"binary": "nll", "multiclass": "nll", "regression": "mse"}


def selection_metric(params: Params, paper: str, task: str) -> str:
    """The validation metric a paper's configurations are chosen on for a task."""
    return (params.paper(paper).get("selection_metric") or {}).get(task, SELECTION_METRIC[task])


@dataclass(frozen=True)
class JobSpec:
    """One job's resolved settings: what training reads from params.yaml, and nothing more.

    Frozen, and the two mappings are read-only views (MappingProxyType) over the spec's own deep
    copy: nothing Params hands out later, nor any caller, can change them. The values nested in
    the search space stay the plain YAML data Params gave (dicts, lists), treated read-only, so
    that tabrepro.tuning draws exactly the candidates it drew from Params itself.
    """

    job: Job
    seed: int  # params.yaml's root seed: every seed of the job derives from it and the job's names
    profile: str
    source: str  # the registry source the job reads (the profile's substitute, if any)
    protocol: str  # the protocol's name, as the result's `split` records it
    search_space: Mapping[str, Any]  # the model's entry, `extends` resolved, the profile's `forced` in
    n_configs: int  # the budget: the paper's count, capped by the profile
    repeats: int  # runs of the chosen configuration (seeds) whose test metrics are averaged
    # Per task: the task is the prepared table's, known once the fold is loaded.
    selection_metrics: Mapping[str, str]
    params_digest: str  # Params.job_digest: results and saved state are matched by it
    data_dir: Path  # recorded split paths are named relative to its parent
    processed_dir: Path
    split_file: Path
    job_dir: Path
    metrics_path: Path
    test_predictions_path: Path
    config_dir_pattern: PathPattern

    def config_dir(self, index: int) -> Path:
        """Where configuration `index` of a per-configuration model writes (Params.config_dir)."""
        return self.config_dir_pattern.path(self.job, config=index)


def resolve_job(params: Params, job: Job) -> JobSpec:
    """`job` under `params`: every setting and path of it, asked of Params once."""
    layout = params.layout
    source = params.source_of(job.paper, job.dataset)
    space = params.search_space(job.paper, job.dataset, job.model)
    return JobSpec(
        job=job,
        seed=params.seed,
        profile=params.profile_name,
        source=source,
        protocol=params.dataset_entry(job.paper, job.dataset)["protocol"],
        search_space=MappingProxyType(copy.deepcopy(space)),
        n_configs=params.n_configs(job.paper, job.dataset, job.model),
        repeats=params.repeats(job.paper, job.dataset, job.model),
        selection_metrics=MappingProxyType({task: selection_metric(params, job.paper, task) for task in TASKS}),
        params_digest=params.job_digest(job),
        data_dir=params.data_dir,
        processed_dir=layout.processed_dir.path(source=source),
        split_file=layout.split_fold.path(job),
        job_dir=layout.job_dir.path(job),
        metrics_path=layout.job_metrics.path(job),
        test_predictions_path=layout.job_test_predictions.path(job),
        config_dir_pattern=layout.config_dir,
    )
