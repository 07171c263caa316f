"""Hyperparameter search spaces (params.yaml `search_spaces`) turned into concrete configurations.

A parameter spec is one of
    {choice: [v1, v2, ...]}      one of the listed values
    {int: [lo, hi]}              an integer, uniform on lo..hi (both inclusive)
    {log_int: [lo, hi]}          an integer, log-uniform on lo..hi (lo >= 1)
    {uniform: [lo, hi]}          a float, uniform on [lo, hi]
    {log_uniform: [lo, hi]}      a float, log-uniform on [lo, hi] (lo > 0)
    VALUE                        a fixed value (a list is a fixed tuple, e.g. hidden_layer_sizes)
or a per-task split {classification: SPEC, regression: SPEC}; binary and multiclass tasks read
the classification branch.

Sampling rule: when the space is finite (only choices, fixed values and integer ranges) and has
no more points than `n_configs`, the whole grid is returned in a fixed order (parameters sorted by
name, each parameter's values in listed / ascending order); this includes the paper's own rule
"all choices and grid <= n_configs". Otherwise `n_configs` distinct draws from a Latin hypercube
design are returned: each parameter's range is cut into `n_configs` equal-probability strata and
every stratum is used once, so even a budget of a handful covers every learning-rate decade and
depth band (plain random draws of 6 out of a 48-point boosting grid can miss every useful learning
rate, as a quick-profile run showed).

Named variants (NPT's small-data sweep): an entry may list `variants: {name: {param: value}}`.
Its configurations are then the fixed `params` updated by each variant's overrides, in the listed
order, the first `n_configs` of them; no sampling is involved. An entry may also carry `forced`
values (a profile's `model_overrides`, put there by tabrepro.config), applied last to every
configuration, so a quick profile can shrink a model without editing the paper's space.

Values come back as plain Python types (int, float, str, bool, None, tuple): lists become tuples,
which is what scikit-learn expects for `hidden_layer_sizes` and what keeps configurations hashable.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from scipy.stats import qmc

from tabrepro.errors import InputError
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.seeding import derive_seed
from tabrepro.tasks import TASK_FAMILIES, TaskFamily

if TYPE_CHECKING:
    from tabrepro.job_spec import JobSpec
from tabrepro.tasks import task_family as family_of_task

__all__ = [
    "job_configs",
    "ParamSpec",
    "SearchSpaceError",
    "expand_search_space",
    "sample_configs",
    "select_best",
    "variant_names",
    "space_size",
    "task_family",
]

SpecKind = Literal["fixed", "choice", "int", "log_int", "uniform", "log_uniform"]
RANGE_KINDS: tuple[str, ...] = ("int", "log_int", "uniform", "log_uniform")
SPEC_KINDS: tuple[str, ...] = ("choice", *RANGE_KINDS)
TASK_BRANCHES: tuple[str, ...] = TASK_FAMILIES
_ENTRY_KEYS = {"params", "n_configs", "variants", "forced"}


class SearchSpaceError(InputError, ValueError):
    """A malformed search space; the message names the offending parameter."""


def task_family(task: str) -> TaskFamily:
    """binary and multiclass share the classification branch of a per-task split
    (tabrepro.tasks.task_family, with an unknown task reported as a SearchSpaceError)."""
    try:
        return family_of_task(task)
    except ValueError as error:
        raise SearchSpaceError(str(error)) from None


def _plain(value: Any) -> Any:
    """YAML/numpy value -> plain, hashable Python value (lists become tuples)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, Mapping):
        raise TypeError("mapping")
    return value


@dataclass(frozen=True)
class ParamSpec:
    """One parameter's distribution, already resolved for a task."""

    name: str
    kind: SpecKind
    values: tuple[Any, ...] = ()  # fixed: (value,); choice: the options
    low: float = 0.0  # range kinds only
    high: float = 0.0

    @property
    def size(self) -> int | None:
        """Number of distinct values, or None for a continuous range."""
        if self.kind in ("fixed", "choice"):
            return len(self.values)
        if self.kind in ("int", "log_int"):
            return int(self.high) - int(self.low) + 1
        return 1 if self.low == self.high else None

    def grid(self) -> Sequence[Any]:
        """All values in a fixed order (finite specs only)."""
        if self.kind in ("fixed", "choice"):
            return self.values
        if self.kind in ("int", "log_int"):
            return range(int(self.low), int(self.high) + 1)
        if self.low == self.high:
            return (float(self.low),)
        raise SearchSpaceError(f"parameter {self.name!r}: a continuous range has no grid")

    def from_unit(self, u: float) -> Any:
        """The value at quantile `u` in [0, 1) of this parameter's distribution (inverse CDF)."""
        if self.kind == "fixed":
            return self.values[0]
        if self.kind == "choice":
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        if self.kind == "int":
            span = int(self.high) - int(self.low) + 1
            return int(self.low) + min(int(u * span), span - 1)
        if self.kind == "log_int":
            # floor of a log-uniform value on [lo, hi + 1): integer k gets mass ∝ log((k+1)/k).
            draw = math.exp(math.log(self.low) + u * (math.log(self.high + 1) - math.log(self.low)))
            return int(min(max(math.floor(draw), self.low), self.high))
        if self.kind == "uniform":
            return float(self.low + u * (self.high - self.low))
        return float(math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low))))


def _parse_bounds(name: str, kind: str, raw: Any) -> tuple[float, float]:
    if not isinstance(raw, (list, tuple)) or len(raw) != 2:
        raise SearchSpaceError(f"parameter {name!r}: {kind} needs [lo, hi], got {raw!r}")
    low, high = raw
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, (int, float, np.number)):
            hint = " (YAML reads 1e-5 as a string; write 1.0e-5)" if isinstance(bound, str) else ""
            raise SearchSpaceError(f"parameter {name!r}: {kind} bounds must be numbers, got {bound!r}{hint}")
    if kind in ("int", "log_int") and not all(float(b).is_integer() for b in (low, high)):
        raise SearchSpaceError(f"parameter {name!r}: {kind} bounds must be integers, got {raw!r}")
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise SearchSpaceError(f"parameter {name!r}: {kind} needs finite lo <= hi, got {raw!r}")
    if kind == "log_int" and low < 1:
        raise SearchSpaceError(f"parameter {name!r}: log_int needs lo >= 1, got {raw!r}")
    if kind == "log_uniform" and low <= 0:
        raise SearchSpaceError(f"parameter {name!r}: log_uniform needs lo > 0, got {raw!r}")
    if kind in ("int", "log_int"):
        return int(low), int(high)
    return float(low), float(high)


def _parse_spec(name: str, raw: Any, family: str) -> ParamSpec:
    if isinstance(raw, Mapping):
        keys = set(raw)
        if keys and keys <= set(TASK_BRANCHES):
            if family not in raw:
                raise SearchSpaceError(f"parameter {name!r}: per-task split has no {family!r} branch")
            branch = raw[family]
            if isinstance(branch, Mapping) and set(branch) & set(TASK_BRANCHES):
                raise SearchSpaceError(f"parameter {name!r}: per-task splits cannot be nested")
            return _parse_spec(name, branch, family)
        if len(raw) != 1 or next(iter(raw)) not in SPEC_KINDS:
            raise SearchSpaceError(
                f"parameter {name!r}: a mapping must be exactly one of "
                f"{{{', '.join(SPEC_KINDS)}}} or a {{classification, regression}} split, "
                f"got keys {sorted(map(str, raw))}"
            )
        kind, body = next(iter(raw.items()))
        if kind == "choice":
            if not isinstance(body, (list, tuple)) or not body:
                raise SearchSpaceError(f"parameter {name!r}: choice needs a non-empty list")
            try:
                options = tuple(_plain(v) for v in body)
            except TypeError:
                raise SearchSpaceError(f"parameter {name!r}: choice options cannot be mappings") from None
            if len(set(options)) != len(options):
                raise SearchSpaceError(f"parameter {name!r}: choice lists a value twice: {body!r}")
            return ParamSpec(name, "choice", values=options)
        low, high = _parse_bounds(name, kind, body)
        return ParamSpec(name, kind, low=low, high=high)
    try:
        return ParamSpec(name, "fixed", values=(_plain(raw),))
    except TypeError:  # a mapping nested inside a fixed list
        raise SearchSpaceError(f"parameter {name!r}: fixed values cannot hold mappings") from None


def _params_of(space: Mapping[str, Any]) -> Mapping[str, Any]:
    """Accept a model's whole entry ({n_configs, params}) or just its params mapping."""
    if not isinstance(space, Mapping):
        raise SearchSpaceError(f"a search space must be a mapping, got {type(space).__name__}")
    if "params" in space and isinstance(space["params"], Mapping):
        extra = set(space) - _ENTRY_KEYS
        if extra:
            raise SearchSpaceError(f"search space entry has unknown keys {sorted(extra)}")
        return space["params"]
    return space


def expand_search_space(space: Mapping[str, Any], task: str) -> dict[str, ParamSpec]:
    """Validate a space and resolve per-task splits: parameter name -> spec, sorted by name."""
    family = task_family(task)
    params = _params_of(space)
    if not params:
        raise SearchSpaceError("search space has no parameters")
    specs: dict[str, ParamSpec] = {}
    for name in sorted(params, key=str):
        if not isinstance(name, str) or not name:
            raise SearchSpaceError(f"parameter names must be non-empty strings, got {name!r}")
        specs[name] = _parse_spec(name, params[name], family)
    return specs


def space_size(specs: Mapping[str, ParamSpec]) -> int | None:
    """Number of distinct configurations, or None when a parameter is continuous."""
    total = 1
    for spec in specs.values():
        if spec.size is None:
            return None
        total *= spec.size
    return total


def _fixed_values(raw: Mapping[str, Any], task: str, where: str) -> dict[str, Any]:
    """A mapping of fixed values (per-task splits resolved); anything sampled is an error."""
    if not isinstance(raw, Mapping):
        raise SearchSpaceError(f"{where} must be a mapping of parameter values")
    family = task_family(task)
    values = {}
    for name in sorted(raw, key=str):
        spec = _parse_spec(str(name), raw[name], family)
        if spec.kind != "fixed":
            raise SearchSpaceError(f"{where}: parameter {name!r} must be a fixed value, got a {spec.kind}")
        values[str(name)] = spec.values[0]
    return values


def variant_names(space: Mapping[str, Any]) -> list[str] | None:
    """The variant names of an entry in order, or None for an ordinary sampled space."""
    variants = space.get("variants") if isinstance(space, Mapping) else None
    return None if variants is None else [str(name) for name in variants]


def _variant_configs(space: Mapping[str, Any], task: str, n_configs: int) -> list[dict[str, Any]]:
    variants = space["variants"]
    if not isinstance(variants, Mapping) or not variants:
        raise SearchSpaceError("variants must be a non-empty mapping of name -> overrides")
    base = _fixed_values(space.get("params", {}), task, "params of a variant space")
    configs = []
    for name in list(variants)[:n_configs]:
        overrides = _fixed_values(variants[name] or {}, task, f"variant {name!r}")
        unknown = sorted(set(overrides) - set(base))
        if unknown:
            raise SearchSpaceError(f"variant {name!r} overrides {unknown}, which params does not set")
        configs.append({**base, **overrides})
    return configs


def sample_configs(space: Mapping[str, Any], task: str, n_configs: int, seed: int) -> list[dict[str, Any]]:
    """The configurations to evaluate: the whole grid if it fits, else distinct random draws.

    Variant spaces give their first `n_configs` variants; `forced` values override every config.
    """
    if isinstance(n_configs, bool) or not isinstance(n_configs, (int, np.integer)) or n_configs < 1:
        raise SearchSpaceError(f"n_configs must be a positive integer, got {n_configs!r}")
    forced = _fixed_values(space.get("forced") or {}, task, "forced values") if isinstance(space, Mapping) else {}
    configs = _sample(space, task, n_configs, seed)
    return [{**config, **forced} for config in configs]


def _sample(space: Mapping[str, Any], task: str, n_configs: int, seed: int) -> list[dict[str, Any]]:
    if isinstance(space, Mapping) and "variants" in space:
        return _variant_configs(space, task, n_configs)
    specs = expand_search_space(space, task)
    size = space_size(specs)
    if size is not None and size <= n_configs:
        names = list(specs)
        return [dict(zip(names, combo)) for combo in itertools.product(*(specs[n].grid() for n in names))]

    rng = np.random.default_rng(seed)
    names = list(specs)
    configs: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for _ in range(100):  # further designs only top up duplicates of a coarse choice grid
        design = qmc.LatinHypercube(d=len(names), rng=rng).random(n_configs - len(configs))
        for point in design:
            config = {name: specs[name].from_unit(float(u)) for name, u in zip(names, point)}
            key = tuple(config.values())
            if key not in seen:
                seen.add(key)
                configs.append(config)
        if len(configs) == n_configs:
            return configs
    raise SearchSpaceError(  # pragma: no cover - needs a pathologically narrow space
        f"could not draw {n_configs} distinct configurations from the space"
    )


def select_best(scores: Sequence[float | None], metric: str) -> int:
    """Index of the best score under the metric's direction; ties go to the first, NaN is skipped."""
    if metric not in HIGHER_IS_BETTER:
        known = ", ".join(sorted(HIGHER_IS_BETTER))
        raise ValueError(f"unknown metric {metric!r}; known metrics: {known}")
    higher = HIGHER_IS_BETTER[metric]
    best_index: int | None = None
    best_score = 0.0
    for index, score in enumerate(scores):
        if score is None or math.isnan(float(score)):
            continue
        value = float(score)
        if best_index is None or (value > best_score if higher else value < best_score):
            best_index, best_score = index, value
    if best_index is None:
        raise ValueError(f"no valid {metric} score to select from ({len(scores)} given, all NaN)")
    return best_index


def job_configs(spec: JobSpec, task: str) -> list[dict]:
    """The candidate configurations of a job: one set per dataset x model, shared by all its folds
    (the training jobs, the compute plan and the workflow's sizing all draw the same list)."""
    job = spec.job
    search_seed = derive_seed(spec.seed, job.paper, job.dataset, job.model, "search")
    return sample_configs(spec.search_space, task, spec.n_configs, search_seed)
