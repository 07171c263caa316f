"""What each workflow job asks a scheduler for: threads, memory and run time.

The policy is params.yaml's `resources:` section, which a profile may override key by key
(`profiles.NAME.resources`):

* `default` and `rules`: fixed requests for the bookkeeping and data rules (fetch, prepare,
  split, tables, ...), per rule where it needs more than the default;
* `training`: the train, train_folds, train_batch and select_config jobs. With `sizing: plan`
  each job is sized by the compute plan (tabrepro.plan): the calibrated cost model's estimate of
  that job's run time and peak memory for its model family, search budget and dataset size,
  times the safety factors, within the bounds. CPU models that can use several cores and are predicted to
  run longer than `long_job_hours` on one get 2, 4, 8, ... threads. With `sizing: fixed` every
  training job gets `fixed`.

The workflow multiplies memory and run time by Snakemake's attempt number, so a retried job asks
for more. GPU jobs ask for a GPU separately (the rules' `gpu` resource); this module sizes their
host side and run time.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabrepro.config import Job
from tabrepro.io import write_json
from tabrepro.models.registry import get_model_class
from tabrepro.plan import default_planner
from tabrepro.resource_policy import FoldGroup, config_batches, fold_groups, policy

if TYPE_CHECKING:
    from tabrepro.config import Params
    from tabrepro.plan import JobEstimate, Planner

__all__ = [
    "RULES",
    "TRAINING_RULES",
    "Request",
    "JobSizer",
    "combine_sequential",
    "size_job",
]

# Every rule of the workflow (a test checks this against the Snakefile); params.yaml's
# `resources.rules` may name only these.
RULES = (
    "fetch",
    "availability",
    "prepare",
    "split",
    "train",
    "train_folds",
    "train_batch",
    "select_config",
    "tables",
    "scorecard",
    "report_html",
    "analyse_fold",
    "analyse_lookup",
    "feature_sparsity",
    "feature_sparsity_plot",
)
# Training rules and the compute plan's name for their kind of job.
# A train_batch job trains several configurations one after another (`configs_per_job`); the plan
# estimates each (kind train_config) and the job asks for their sum of time and their largest memory.
# A train_folds job likewise trains a dataset's folds one after another (`folds_in_one_job`): the
# sum of its folds' train estimates.
TRAINING_RULES = {
    "train": "train",
    "train_folds": "train_folds",
    "train_batch": "train_config",
    "select_config": "select",
}
# Model families that use more than one core when given them (the rest run on one).
THREADED_FAMILIES = ("boosting_hist", "catboost", "random_forest", "knn", "mlp")
THREAD_EFFICIENCY = 0.8  # the speed-up of t threads is taken as t ** 0.8


@dataclass(frozen=True)
class Request:
    """One job's request at its first attempt (memory in MB, run time in minutes)."""

    threads: int
    mem_mb: int
    runtime_min: int


def _fixed(entry: Mapping[str, Any], default: Mapping[str, Any]) -> Request:
    values = {**default, **entry}
    return Request(int(values["threads"]), int(values["mem_mb"]), int(values["runtime_min"]))


def size_job(estimate: JobEstimate, training: Mapping[str, Any]) -> Request:
    """The request for a training job the cost model estimates as `estimate` (its bound: maximum
    epochs), under the `training` policy."""
    floor = training["gpu_memory_floor_mb"] if estimate.gpu else training["memory_floor_mb"]
    peak = estimate.peak_mb * training["memory_safety"] + floor
    mem_mb = min(int(math.ceil(peak / 256.0) * 256), training["max_mem_mb"])
    if estimate.gpu:
        seconds, threads = estimate.gpu_seconds, 1
    else:
        hours = estimate.cpu_seconds / 3600
        threads = 1
        if estimate.family in THREADED_FAMILIES and hours > training["long_job_hours"]:
            threads = 2 ** math.ceil(math.log2(hours / training["long_job_hours"]))
        threads = max(1, min(threads, training["max_threads"]))
        seconds = estimate.cpu_seconds / threads**THREAD_EFFICIENCY
    runtime = int(math.ceil(seconds * training["runtime_safety"] / 60.0 + training["runtime_floor_min"]))
    return Request(threads, mem_mb, min(runtime, training["max_runtime_min"]))


def combine_sequential(estimates: list[JobEstimate]) -> JobEstimate:
    """One job running these one after another: their times add up, their peaks do not."""
    first = estimates[0]
    return dataclasses.replace(
        first,
        cpu_seconds=sum(e.cpu_seconds for e in estimates),
        gpu_seconds=sum(e.gpu_seconds for e in estimates),
        peak_mb=max(e.peak_mb for e in estimates),
        n_fits=sum(e.n_fits for e in estimates),
    )


def _cache_key(kind: str, paper: str, dataset: str, model: str, batch: int | None) -> str:
    return f"{kind}|{paper}|{dataset}|{model}|{'' if batch is None else batch}"


def sizing_inputs_digest(params: Params) -> str:
    """A digest of everything the compute plan's sizes depend on (see JobSizer's cache)."""
    digest = hashlib.sha256(json.dumps([params.profile_name, params.raw], sort_keys=True, default=str).encode())
    package = Path(__file__).resolve().parent
    files = [
        *sorted(package.rglob("*.py")),
        *sorted(package.rglob("*.yaml")),
        *sorted(package.rglob("*.json")),  # the shipped cost calibration among them
        *sorted(params.data_dir.glob("processed/*/*.json")),
    ]
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue
        digest.update(f"{file}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


class JobSizer:
    """The requests of one Params' jobs; what the workflow's rules call (common.smk).

    The planner (calibrated on the shipped calibration) is built on the
    first training job asked about; estimates are shared by a job's folds, which cost the same.
    """

    def __init__(self, params: Params, planner: Planner | None = None, cache_dir: Path | None = None) -> None:
        self.params = params
        self.policy = policy(params)
        self._planner = planner
        self._cache_dir = cache_dir
        self._cached: dict[str, Request] | None = None

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = default_planner(self.params)
        return self._planner

    def config_batches(self, paper: str, dataset: str, model: str) -> list[range]:
        """The configurations of each `train_batch` job of a per-configuration model, in order."""
        return config_batches(self.params, self.policy, paper, dataset, model)

    @functools.cached_property
    def fold_groups(self) -> dict[tuple[str, str], FoldGroup]:
        """The profile's train_folds jobs' fold groups, by paper x dataset."""
        return {(g.paper, g.dataset): g for g in fold_groups(self.params, self.policy)}

    def request(self, rule: str, wildcards: Mapping[str, Any] | Any = None) -> Request:
        """The first attempt's request of one job of `rule` (wildcards: paper, dataset, model,
        fold and, for train_batch, batch)."""
        if rule not in RULES:
            raise ValueError(f"unknown workflow rule {rule!r}")
        default = self.policy["default"]
        if rule not in TRAINING_RULES:
            return _fixed(self.policy.get("rules", {}).get(rule, {}), default)
        training = self.policy["training"]
        if training["sizing"] == "fixed":
            return _fixed(training["fixed"], default)
        # Snakemake's wildcards, or a mapping of them: untyped values
        get: Callable[[str], Any] = (
            wildcards.get if isinstance(wildcards, Mapping) else functools.partial(getattr, wildcards)
        )
        batch = int(get("batch")) if rule == "train_batch" else None
        key = (TRAINING_RULES[rule], get("paper"), get("dataset"), get("model"), batch)
        if self._cache_dir is not None:
            if self._cached is None:
                self._cached = self._load_or_build_cache()
            found = self._cached.get(_cache_key(*key))
            if found is not None:
                return found
        return self._planned(*key)

    def training_keys(self) -> list[tuple[str, str, str, str, int | None]]:
        """Every distinct training request of the profile: (kind, paper, dataset, model, batch)."""

        keys: list[tuple[str, str, str, str, int | None]] = []
        for paper, dataset, model in dict.fromkeys((j.paper, j.dataset, j.model) for j in self.params.jobs()):
            if get_model_class(model).per_config_jobs:
                keys += [
                    ("train_config", paper, dataset, model, b)
                    for b in range(len(self.config_batches(paper, dataset, model)))
                ]
                keys.append(("select", paper, dataset, model, None))
            else:
                group = self.fold_groups.get((paper, dataset))
                grouped = group is not None and model in group.models
                keys.append(("train_folds" if grouped else "train", paper, dataset, model, None))
        return keys

    def _load_or_build_cache(self) -> dict[str, Request]:
        """Every training request of the profile, from `cache_dir` when its inputs are unchanged.

        Calibrating the cost model and pricing thousands of configurations takes seconds, which
        every Snakemake start (every dry run) would pay. The file is named by a digest of all
        that the sizes depend on (the parameters, tabrepro's sources and package data with the cost
        calibration, the prepared tables' schemas), so a change to any of them misses.
        """
        assert self._cache_dir is not None  # called only with a cache folder
        path = Path(self._cache_dir) / f"sizes-{sizing_inputs_digest(self.params)}.json"
        try:
            return {k: Request(*v) for k, v in json.loads(path.read_text()).items()}
        except (OSError, ValueError, TypeError):
            pass  # missing (or removed meanwhile by another run), or damaged: rebuilt
        table = {_cache_key(*key): self._planned(*key) for key in self.training_keys()}
        for old in Path(self._cache_dir).glob("sizes-*.json"):
            old.unlink(missing_ok=True)
        write_json(path, {k: dataclasses.astuple(v) for k, v in table.items()})
        return table

    @functools.cache  # noqa: B019 - one sizer per workflow run; folds share
    def _planned(self, kind: str, paper: str, dataset: str, model: str, batch: int | None) -> Request:
        job = Job(paper, dataset, model, 0)
        if kind == "train_folds":
            folds = self.fold_groups[paper, dataset].folds
            estimate = combine_sequential([self.planner.estimate(job, "train", bound=True)] * len(folds))
        elif batch is None:
            estimate = self.planner.estimate(job, kind, bound=True)
        else:
            configs = self.config_batches(paper, dataset, model)[batch]
            estimate = combine_sequential([self.planner.estimate(job, kind, c, bound=True) for c in configs])
        return size_job(estimate, self.policy["training"])

    # What the rules take: Snakemake calls these with the job's wildcards (and attempt).
    def threads(self, rule: str):
        return lambda wildcards: self.request(rule, wildcards).threads

    def mem_mb(self, rule: str):
        return lambda wildcards, attempt: self.request(rule, wildcards).mem_mb * attempt

    def runtime(self, rule: str):
        return lambda wildcards, attempt: self.request(rule, wildcards).runtime_min * attempt
