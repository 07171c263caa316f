"""params.yaml's `resources:` policy, and how it packs a profile's training into workflow jobs.

The compute plan (tabrepro.plan) prices these jobs and the workflow's job sizer
(tabrepro.resources) asks a scheduler for them, so both read the policy and the packing here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tabrepro.config import Job
from tabrepro.models.registry import get_model_class

if TYPE_CHECKING:
    from tabrepro.config import Params

__all__ = ["FoldGroup", "config_batches", "configs_per_job", "fold_groups", "policy"]


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def policy(params: Params) -> dict[str, Any]:
    """params.yaml's `resources` with the active profile's overrides applied."""
    return _merge(params.raw["resources"], params.profile.get("resources") or {})


def configs_per_job(policy_: Mapping[str, Any], model: str) -> int:
    """How many configurations of `model` one train_batch job trains (params.yaml, default 1)."""
    return int((policy_["training"].get("configs_per_job") or {}).get(model, 1))


def config_batches(params: Params, policy_: Mapping[str, Any], paper: str, dataset: str, model: str) -> list[range]:
    """Consecutive runs of the job's configuration indices, `configs_per_job` at a time."""
    n = params.n_configs(paper, dataset, model)
    size = configs_per_job(policy_, model)
    return [range(start, min(start + size, n)) for start in range(0, n, size)]


@dataclass(frozen=True)
class FoldGroup:
    """The folds of one paper x dataset that `models` train one after another in one job each."""

    paper: str
    dataset: str
    folds: tuple[int, ...]
    models: tuple[str, ...]


def fold_groups(params: Params, policy_: Mapping[str, Any], jobs: list[Job] | None = None) -> list[FoldGroup]:
    """The jobs that run a dataset's folds one after another, per paper x dataset with several
    folds: of `jobs` (default: the profile's training jobs; the feature-sparsity curves pass
    theirs), those of the in-job models params.yaml `folds_in_one_job` lists (or all; default none).

    A fold's result does not depend on the job it runs in: the same seeds, data and threads.
    What grouping saves is a process start with its imports (~2 s) and a scheduler job per fold.
    """

    together = policy_["training"].get("folds_in_one_job") or []
    folds: dict[tuple[str, str], dict[int, None]] = {}
    models: dict[tuple[str, str], dict[str, None]] = {}
    for job in params.jobs() if jobs is None else jobs:
        if get_model_class(job.model).per_config_jobs or (together != "all" and job.model not in together):
            continue
        folds.setdefault((job.paper, job.dataset), {})[job.fold] = None
        models.setdefault((job.paper, job.dataset), {})[job.model] = None
    return [
        FoldGroup(paper, dataset, tuple(folds[paper, dataset]), tuple(models[paper, dataset]))
        for paper, dataset in folds
        if len(folds[paper, dataset]) > 1
    ]
