"""Cost model: what one job costs (runtime, peak memory) from its configurations and its table's shape.

Why a model and not a lookup: the paper profile's 7,000 jobs are mostly of sizes nobody has run
here (HIGGS' 9.6 M training rows, k-NN's 480 configurations, BiSHop's 200-trial searches), so the
estimate must extrapolate from what was measured (the quick and reproduce runs' metrics.json,
and the scale benchmark's stand-in runs) along the dimensions that drive cost.

Each model family describes one fit of one configuration as a few *terms* in work units that
follow the algorithm's complexity (for example trees x rows x features x depth for gradient
boosting, query rows x training rows x features for k-NN, floating-point operations for the
networks, optimiser steps for per-batch overhead). A job is the sum of its fits' terms plus a
start-up term (1 per job: interpreter, imports) and a load term (cells of the table it loads and
encodes). The runtime is a non-negative weighted sum of the terms; the weights (seconds per unit)
are calibrated per family by least squares on the log ratio of predicted to measured time, pulled
gently toward first-principles priors so that a term the measurements do not exercise keeps a
sensible weight instead of collapsing to zero. Peak memory is calibrated the same way, from
memory terms (the table as loaded and encoded, and model state such as random-forest trees or
NPT's attention matrices).

Networks (NPT, BiSHop, TabNet, FT-Transformer, ResNet) are GPU jobs in the paper profile. Their
GPU time has the same terms with GPU weights: seconds per GFLOP (a sustained rate) and per step
(launches, optimiser, Python), calibrated on the jobs measured on a GPU (a metrics.json whose
provenance names a GPU the job used) and pulled toward `GpuAssumptions` (an assumed rate and
overhead), which stand alone for a family no GPU job measured; their start-up and loading weights
start from the CPU calibration's. GPU jobs never enter the CPU calibration.

Early stopping makes epochs unknown in advance: the estimate assumes training stops after
`EARLY_STOP_PATIENCES` x patience epochs (capped by max_epochs); a job's resource *bound* (what
a scheduler must grant) uses max_epochs.
"""

from __future__ import annotations

import collections
import functools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabrepro.models.registry import get_model_class

__all__ = [
    "Calibration",
    "CostModel",
    "GpuAssumptions",
    "MeasuredJob",
    "TableShape",
    "family_of",
    "fit_terms",
    "job_terms",
    "memory_terms",
]

EARLY_STOP_PATIENCES = 3.0  # an early-stopped run is assumed to last 3 x patience epochs
PRIOR_WEIGHT = 0.2  # how strongly calibration is pulled toward the priors (per unit of log ratio)


@dataclass(frozen=True)
class TableShape:
    """The size of one dataset as a job sees it (rows per split, raw and encoded widths)."""

    n_rows: int
    n_train: int
    n_val: int
    n_test: int
    n_features: int  # raw feature columns
    width: int  # encoded columns (one-hot expanded)
    n_classes: int  # 0 for regression
    source: str = ""  # where these facts come from (prepared schema, registry, approximate)

    @property
    def outputs(self) -> int:
        """Output units of a model: classes (2 for binary), 1 for regression."""
        return max(self.n_classes, 1)


@dataclass(frozen=True)
class GpuAssumptions:
    """Assumed sustained throughput of one GPU for these models: the GPU calibration's priors, and
    its whole estimate for a family no GPU job measured."""

    tflops: float = 10.0  # fp32 dense training on a data-centre GPU, well below its peak
    step_overhead_ms: float = 4.0  # kernel launches, optimiser and Python per training step


# ----------------------------------------------------------------------------------------------
# families and their work terms

GPU_FAMILIES = ("tabnet", "torch_mlp", "npt", "bishop")


def family_of(model: str) -> str:
    """A registered model's cost family: its class's `cost_family`, which a registered variant
    inherits from its base (BiSHop's ablations cost what BiSHop costs, NPT-ISAB what NPT costs)."""

    model_class = get_model_class(model)
    family = getattr(model_class, "cost_family", None)
    if family is None:
        raise TypeError(f"{model_class.__name__} sets no cost_family (a family of tabrepro.costmodel)")
    return family


def _get(config: Mapping[str, Any], key: str, default: Any) -> Any:
    value = config.get(key, default)
    return default if value is None else value


def _epochs(config: Mapping[str, Any], max_default: int, patience_default: int, bound: bool) -> float:
    max_epochs = float(_get(config, "max_epochs", max_default))
    if bound:
        return max_epochs
    return min(max_epochs, EARLY_STOP_PATIENCES * float(_get(config, "patience", patience_default)))


def _log2(n: float) -> float:
    return math.log2(max(n, 2.0))


def _boosting_depth(model: str, config: Mapping[str, Any]) -> float:
    if model == "lightgbm":
        depth = _get(config, "max_depth", -1)
        leaves = float(_get(config, "num_leaves", 31))
        return float(depth) if depth and depth > 0 else _log2(leaves)
    return float(_get(config, "max_depth", _get(config, "depth", 6)))


def _mlp_weights(layers: Sequence[int], n_in: int, n_out: int) -> float:
    sizes = [n_in, *layers, n_out]
    return float(sum(a * b for a, b in zip(sizes[:-1], sizes[1:])))


def _tabnet_row_flops(config: Mapping[str, Any], width: int) -> float:
    """Forward flops of one row: per decision step, a 4-layer GLU feature transformer and an
    attentive transformer (n_d, n_a, n_steps as pytorch-tabnet builds them)."""
    n_d = float(_get(config, "n_d", 8))
    n_a = float(_get(config, "n_a", n_d))
    steps = float(_get(config, "n_steps", 3))
    hidden = n_d + n_a
    transformer = 2 * (width * 2 * hidden + 3 * hidden * 2 * hidden)
    attentive = 2 * n_a * width
    return steps * (transformer + attentive) + transformer


def _torch_row_flops(model: str, config: Mapping[str, Any], shape: TableShape) -> float:
    """Forward flops of one row of FT-Transformer (tokens = features + CLS) or the tabular ResNet."""
    blocks = float(_get(config, "n_blocks", 3))
    if model == "ft_transformer":
        d = float(_get(config, "d_block", 192))
        tokens = shape.n_features + 1
        ffn = d * float(_get(config, "ffn_d_hidden_multiplier", 4 / 3))
        return blocks * tokens * (8 * d * d + 6 * d * ffn) + blocks * 4 * tokens * tokens * d
    d = float(_get(config, "d_block", 256))
    hidden = d * float(_get(config, "d_hidden_multiplier", 2.0))
    return blocks * 4 * d * hidden + 2 * shape.width * d


def npt_step_flops(config: Mapping[str, Any], n_attributes: int, rows: int) -> float:
    """Forward flops of NPT on one batch of `rows` rows: ABD blocks attend between rows over the
    whole row (width attributes x e), ABA blocks between the attributes of a row; rFF 4x wide."""
    e = float(_get(config, "embed_dim", 64))
    layers = int(_get(config, "n_layers", 8))
    abd, aba = (layers + 1) // 2, layers // 2
    width = n_attributes * e
    per_abd = 24 * rows * width * width + 4 * rows * rows * width
    per_aba = 24 * rows * n_attributes * e * e + 4 * rows * n_attributes * n_attributes * e
    return abd * per_abd + aba * per_aba


# fp32 copies NPT's training holds of each parameter: the weights, their gradients, LAMB's two
# moments, Lookahead's slow weights and the best weights kept for model selection (one copy
# fewer with `best_weights_on_disk`).
NPT_BYTES_PER_PARAMETER = 4 * 6


def npt_parameters(config: Mapping[str, Any], n_attributes: int) -> float:
    """NPT's parameters, about: each block holds 13 width^2 weights (QKV 3, output 1, residual 1,
    rFF 4 + 4); ABD blocks are n_attributes x e wide, ABA blocks e wide. Wide tables make this
    large: Income's 41 attributes at NPT-Base's e = 64 give 4 ABD blocks 2,624 wide, about 358 M."""
    e = float(_get(config, "embed_dim", 64))
    layers = int(_get(config, "n_layers", 8))
    abd, aba = (layers + 1) // 2, layers // 2
    return 13 * (abd * (n_attributes * e) ** 2 + aba * e**2)


def bishop_sample_flops(config: Mapping[str, Any], n_features: int) -> float:
    """Forward flops of one BiSHop sample: patch tokens per feature through H encoder levels (each
    merging r patches) of column- and row-wise blocks, and the decoder's S decoded tokens.
    Calibrated in shape only: the absolute scale comes from the measured runs."""
    embed = float(_get(config, "embed_dim", 32))
    patch = float(_get(config, "patch_size", 8))
    d = float(_get(config, "d_model", 256))
    ffn = float(_get(config, "ffn_dim", 512))
    levels = int(_get(config, "n_levels", 3))
    merge = float(_get(config, "merge_factor", 4))
    decoded = float(_get(config, "n_decoded", 24))
    pooling = float(_get(config, "n_pooling", 10))
    per_token = 2 * (8 * d * d + 4 * d * ffn)
    tokens = n_features * max(embed / patch, 1.0)
    encoder = sum(tokens / merge**level for level in range(levels)) * (per_token + 4 * pooling * d)
    decoder = levels * n_features * max(decoded / patch, 1.0) * per_token if _get(config, "decoder", True) else 0.0
    return encoder + decoder


# The configuration keys each family's terms read: configurations that agree on them cost the
# same, so a search of 11,340 MLP configurations is priced once per distinct architecture.
COST_KEYS: dict[str, tuple[str, ...]] = {
    "boosting_hist": ("n_estimators", "iterations", "max_depth", "depth", "num_leaves"),
    "catboost": ("n_estimators", "iterations", "max_depth", "depth"),
    "boosting_exact": ("n_estimators", "max_depth"),
    "random_forest": ("n_estimators", "max_features"),
    "knn": (),
    "mlp": ("hidden_layer_sizes", "max_epochs", "patience", "batch_size"),
    "tabnet": ("n_d", "n_a", "n_steps", "virtual_batch_size", "max_epochs", "patience", "batch_size"),
    "torch_mlp": (
        "n_blocks",
        "d_block",
        "ffn_d_hidden_multiplier",
        "d_hidden_multiplier",
        "batch_size",
        "max_epochs",
        "patience",
    ),
    "npt": ("embed_dim", "n_layers", "n_heads", "batch_size", "max_steps", "eval_every_epochs"),
    "bishop": (
        "embed_dim",
        "patch_size",
        "d_model",
        "ffn_dim",
        "n_levels",
        "merge_factor",
        "n_decoded",
        "n_pooling",
        "decoder",
        "max_epochs",
        "patience",
        "batch_size",
        "batches_per_epoch",
    ),
}


def fit_terms(
    model: str, config: Mapping[str, Any], shape: TableShape, *, score_rows: int, bound: bool = False
) -> dict[str, float]:
    """Work units of fitting one configuration on the training rows and scoring `score_rows` rows."""
    return dict(_fit_terms_cached(model, _cost_key(model, config), shape, score_rows, bound))


def _cost_key(model: str, config: Mapping[str, Any]) -> tuple:
    """What a configuration's cost depends on (COST_KEYS), hashable: equal keys cost the same."""
    return tuple((name, _hashable(config[name])) for name in COST_KEYS[family_of(model)] if name in config)


def _cost_key_counts(model: str, configs: Sequence[Mapping[str, Any]]) -> collections.Counter:
    """How many configurations share each cost key (the same keys `_cost_key` gives, in bulk)."""
    present = set().union(*configs)
    names = [name for name in COST_KEYS[family_of(model)] if name in present]
    if not names or any(len(c) != len(present) for c in configs):
        return collections.Counter(_cost_key(model, c) for c in configs)
    values = operator.itemgetter(*names)
    try:
        rows = map(values, configs) if len(names) > 1 else ((values(c),) for c in configs)
        counts = collections.Counter(rows)
    except TypeError:  # an unhashable value (a list read from JSON)
        return collections.Counter(_cost_key(model, c) for c in configs)
    return collections.Counter({tuple(zip(names, row)): n for row, n in counts.items()})


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@functools.lru_cache(maxsize=65536)
def _fit_terms_cached(
    model: str, key: tuple, shape: TableShape, score_rows: int, bound: bool
) -> tuple[tuple[str, float], ...]:
    return tuple(_fit_terms(model, dict(key), shape, score_rows=score_rows, bound=bound).items())


def _fit_terms(
    model: str, config: Mapping[str, Any], shape: TableShape, *, score_rows: int, bound: bool
) -> dict[str, float]:
    family = family_of(model)
    n, f, k = float(shape.n_train), float(max(shape.width, 1)), float(shape.outputs)
    s = float(score_rows)
    if family in ("boosting_hist", "catboost", "boosting_exact"):
        trees = float(_get(config, "n_estimators", _get(config, "iterations", 1000 if family == "catboost" else 100)))
        per_round = 1.0 if family == "catboost" or k <= 2 else k
        depth = _boosting_depth(model, config)
        rows = n * (_log2(n) if family == "boosting_exact" else 1.0)
        return {"trees": trees * per_round * rows * f * depth / 1e9, "score": trees * per_round * s * depth / 1e9}
    if family == "random_forest":
        trees = float(_get(config, "n_estimators", 100))
        tried = {"sqrt": math.sqrt(f), "log2": _log2(f), "all": f}.get(str(_get(config, "max_features", "sqrt")), f)
        return {"trees": trees * tried * n * _log2(n) / 1e9, "score": trees * s * _log2(n) / 1e9}
    if family == "knn":
        return {"index": n * f * _log2(n) / 1e9, "neighbours": s * n * f / 1e9}
    if family == "mlp":
        layers = _get(config, "hidden_layer_sizes", (100,))
        layers = [int(layers)] if isinstance(layers, (int, np.integer)) else [int(x) for x in layers]
        weights = _mlp_weights(layers, int(f), int(k))
        epochs = _epochs(config, 200, 20, bound)
        batch = float(_get(config, "batch_size", 200))
        return {
            "flops": (epochs * 6 * n * weights + epochs * 2 * shape.n_val * weights + 2 * s * weights) / 1e9,
            "steps": epochs * n / batch / 1e3,
        }
    if family == "tabnet":
        epochs = _epochs(config, 100, 10, bound)
        row = _tabnet_row_flops(config, int(f))
        virtual = float(_get(config, "virtual_batch_size", 128))
        steps = float(_get(config, "n_steps", 3))
        return {
            "flops": (epochs * (3 * n + shape.n_val) * row + s * row) / 1e9,
            "steps": epochs * n / virtual * steps / 1e3,
        }
    if family == "torch_mlp":
        epochs = _epochs(config, 300, 40, bound)
        row = _torch_row_flops(model, config, shape)
        batch = float(_get(config, "batch_size", 512))
        return {"flops": (epochs * (3 * n + shape.n_val) * row + s * row) / 1e9, "steps": epochs * n / batch / 1e3}
    if family == "npt":
        return _npt_terms(config, shape)
    if family == "bishop":
        epochs = _epochs(config, 200, 20, bound)
        sample = bishop_sample_flops(config, shape.n_features)
        batch = float(_get(config, "batch_size", 32))
        limit = _get(config, "batches_per_epoch", None)  # an epoch of that many batches, not all rows
        trained = n if limit is None else min(n, float(limit) * batch)
        return {
            "flops": (epochs * (3 * trained + shape.n_val) * sample + s * sample) / 1e9,
            "steps": epochs * trained / batch / 1e3,
        }
    raise KeyError(f"no cost terms for model {model!r}")


def _npt_terms(config: Mapping[str, Any], shape: TableShape) -> dict[str, float]:
    """NPT trains on batches of all rows (semi-supervised), evaluates every row every
    `eval_every_epochs` epochs and at the end, then predicts validation and test: two more
    passes over the whole table (each prediction runs the model on every row)."""
    attributes = shape.n_features + 1
    rows = shape.n_rows
    batch = _get(config, "batch_size", None)
    batch = rows if batch is None else min(int(batch), rows)
    steps = float(_get(config, "max_steps", 2000))
    per_epoch = math.ceil(rows / batch)
    evals = math.floor(steps / (float(_get(config, "eval_every_epochs", 5)) * per_epoch)) + 1 + 2
    full_pass = per_epoch * npt_step_flops(config, attributes, batch)
    return {
        "flops": (3 * steps * npt_step_flops(config, attributes, batch) + evals * full_pass) / 1e9,
        "steps": (steps + evals * per_epoch) / 1e3,
    }


def memory_terms(model: str, config: Mapping[str, Any], shape: TableShape) -> dict[str, float]:
    """Memory units (MiB) of one fit: the table as loaded and encoded, the model's own state, and
    `held`: bytes known exactly (NPT's parameters and their optimiser copies), which calibration
    does not scale: a fit on small jobs must not shrink the one term that dominates a large one."""
    table = shape.n_rows * (8.0 * shape.n_features + 4.0 * shape.width * 2) / 2**20
    family = family_of(model)
    state = held = 0.0
    if family == "random_forest":  # fully grown trees: about one node per training row
        state = float(_get(config, "n_estimators", 100)) * shape.n_train * (64 + 8 * shape.outputs) / 2**20
    elif family == "npt":
        batch = _get(config, "batch_size", None)
        batch = shape.n_rows if batch is None else min(int(batch), shape.n_rows)
        heads = float(_get(config, "n_heads", 8))
        abd = (int(_get(config, "n_layers", 8)) + 1) // 2
        width = (shape.n_features + 1) * float(_get(config, "embed_dim", 64))
        abd_attention = abd * heads * batch * batch * 4 * 3
        activations = batch * width * 4 * 40
        state = (abd_attention + activations) / 2**20
        per_parameter = NPT_BYTES_PER_PARAMETER - (4 if _get(config, "best_weights_on_disk", False) else 0)
        held = npt_parameters(config, shape.n_features + 1) * per_parameter / 2**20
    elif family in ("tabnet", "torch_mlp", "bishop"):
        batch = float(_get(config, "batch_size", 1024 if family == "tabnet" else 512 if family == "torch_mlp" else 32))
        state = batch * shape.width * 4 * 64 / 2**20
    elif family == "knn":
        state = shape.n_train * shape.width * 8 / 2**20
    return {"table": table, "state": state, "held": held}


# ----------------------------------------------------------------------------------------------
# jobs


@dataclass(frozen=True)
class JobWork:
    """Everything one workflow job does, as summed work and memory terms."""

    terms: dict[str, float]
    memory: dict[str, float]
    n_fits: int


def _add(total: dict[str, float], more: Mapping[str, float], times: float = 1.0) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0.0) + times * value


def job_terms(
    model: str,
    kind: str,
    configs: Sequence[Mapping[str, Any]],
    shape: TableShape,
    *,
    repeats: int = 1,
    bound: bool = False,
) -> JobWork:
    """The work of one job: `train` (every config fitted and scored on validation; the winner
    scored on test and retrained repeats - 1 times), `train_config` (one config, validation and
    test predicted) or `select` (the winner retrained repeats - 1 times)."""
    terms: dict[str, float] = {"start": 1.0, "load": shape.n_rows * max(shape.n_features, 1) / 1e6}
    memory: dict[str, float] = {"base": 1.0}
    n_fits = 0
    # Configurations priced once per distinct cost key (a grid of thousands of them has few);
    # memory_terms reads only cost keys too. Not needed by a selection that retrains nothing.
    counts = _cost_key_counts(model, configs) if kind != "select" or repeats > 1 else None
    if kind == "train":
        assert counts is not None  # counted for every kind but a select without retraining
        for key, count in counts.items():
            _add(terms, dict(_fit_terms_cached(model, key, shape, shape.n_val, bound)), count)
        typical = configs[0]  # the winner is not known in advance
        with_test = fit_terms(model, typical, shape, score_rows=shape.n_test, bound=bound)
        without = fit_terms(model, typical, shape, score_rows=0, bound=bound)
        _add(terms, {key: with_test[key] - without.get(key, 0.0) for key in with_test})  # the test rows, once
        _add(terms, with_test, repeats - 1)
        n_fits = len(configs) + repeats - 1
    elif kind == "train_config":
        _add(terms, fit_terms(model, configs[0], shape, score_rows=shape.n_val + shape.n_test, bound=bound))
        n_fits = 1
    elif kind == "select":
        _add(terms, fit_terms(model, configs[0], shape, score_rows=shape.n_test, bound=bound), repeats - 1)
        n_fits = repeats - 1
    else:
        raise ValueError(f"unknown job kind {kind!r}")
    if counts is not None:
        states = [memory_terms(model, dict(key), shape) for key in counts]
        largest = max(states, key=lambda s: s["state"] + s["held"])
        memory.update({"table": states[0]["table"], "state": largest["state"], "held": largest["held"]})
    else:
        memory.update({"table": memory_terms(model, configs[0], shape)["table"], "state": 0.0, "held": 0.0})
    return JobWork(terms, memory, n_fits)


# ----------------------------------------------------------------------------------------------
# calibration

# Priors: seconds per work unit, from rough single-core rates (start-up 1 s, or 5 s with torch;
# loading and encoding 0.2 s per million cells; ~1 s per 1e9 tree-row-feature-depth units for
# histogram boosting; 20-50 GFLOP/s for dense network arithmetic). Calibration replaces them
# wherever measurements say otherwise.
RUNTIME_PRIORS: dict[str, dict[str, float]] = {
    "boosting_hist": {"start": 1.0, "load": 0.2, "trees": 1.5, "score": 2.0},
    "catboost": {"start": 1.0, "load": 0.2, "trees": 3.0, "score": 2.0},
    "boosting_exact": {"start": 1.0, "load": 0.2, "trees": 1.0, "score": 2.0},
    "random_forest": {"start": 1.0, "load": 0.2, "trees": 2.0, "score": 5.0},
    "knn": {"start": 1.0, "load": 0.2, "index": 1.0, "neighbours": 0.05},
    "mlp": {"start": 1.0, "load": 0.2, "flops": 0.05, "steps": 1.0},
    "tabnet": {"start": 5.0, "load": 0.2, "flops": 0.05, "steps": 5.0},
    "torch_mlp": {"start": 5.0, "load": 0.2, "flops": 0.03, "steps": 2.0},
    "npt": {"start": 5.0, "load": 0.2, "flops": 0.02, "steps": 2.0},
    "bishop": {"start": 5.0, "load": 0.2, "flops": 0.03, "steps": 3.0},
}
MEMORY_PRIORS: dict[str, float] = {"base": 250.0, "table": 2.0, "state": 1.0}


@dataclass(frozen=True)
class MeasuredJob:
    """One measured job: what it did (work terms) and what it took."""

    label: str  # paper/dataset/model/fold (and config or stage)
    family: str
    terms: dict[str, float]
    memory: dict[str, float]
    wall_s: float | None  # None: stopped at a time limit (its memory still counts; its time does not)
    peak_mb: float
    origin: str  # which run it comes from
    gpu: bool = False  # computed on a GPU: calibrates the GPU weights, never the CPU ones
    cpu: str = ""  # the CPU type it ran on (model and ISA level): CPU times hold for that type


@dataclass
class Calibration:
    """Seconds per unit per family and term; MiB per memory unit per family."""

    runtime: dict[str, dict[str, float]] = field(default_factory=dict)
    memory: dict[str, dict[str, float]] = field(default_factory=dict)
    n_jobs: dict[str, int] = field(default_factory=dict)
    gpu_runtime: dict[str, dict[str, float]] = field(default_factory=dict)  # GPU families only
    n_gpu_jobs: dict[str, int] = field(default_factory=dict)
    cpu_types: dict[str, int] = field(default_factory=dict)  # timed CPU jobs per CPU type


def _fit_log(
    rows: np.ndarray, targets: np.ndarray, prior: np.ndarray, at_least: np.ndarray | None = None
) -> np.ndarray:
    """Positive weights w minimising sum(log(rows @ w / t)^2) + PRIOR_WEIGHT^2 * sum(log(w / prior)^2).

    The error is a log-ratio, the quantity "within 3x" is about; the prior term only decides
    weights the measurements leave free (a term no measured job exercises keeps its prior).
    Targets marked `at_least` are lower bounds (a job stopped at its time limit had reached that
    peak): only an estimate below them counts as an error."""
    from scipy.optimize import least_squares  # deferred: loads scipy

    used = rows.sum(axis=0) > 0
    log_prior = np.log(prior)
    bounded = np.zeros(len(targets), dtype=bool) if at_least is None else np.asarray(at_least, dtype=bool)

    def residuals(theta: np.ndarray) -> np.ndarray:
        predicted = rows @ np.exp(theta)
        errors = np.log(np.maximum(predicted, 1e-12) / targets)
        errors = np.where(bounded, np.minimum(errors, 0.0), errors)
        return np.concatenate([errors, PRIOR_WEIGHT * (theta - log_prior)])

    start = log_prior.copy()
    scale = np.median(targets / np.maximum(rows @ prior, 1e-12))  # one common factor first
    start[used] += np.log(scale)
    solution = least_squares(residuals, start, method="trf")
    return np.exp(solution.x)


def _fit_runtime(jobs: Sequence[MeasuredJob], prior: Mapping[str, float]) -> dict[str, float]:
    """Runtime weights (seconds per unit of each term in `prior`) fitted to the jobs with a
    measured time; the prior itself when there are none."""
    timed = [j for j in jobs if j.wall_s is not None]
    if not timed:
        return dict(prior)
    names = list(prior)
    rows = np.array([[j.terms.get(n, 0.0) for n in names] for j in timed])
    weights = _fit_log(rows, np.array([j.wall_s for j in timed]), np.array([prior[n] for n in names]))
    return dict(zip(names, weights.tolist()))


def calibrate(measured: Iterable[MeasuredJob], gpu: GpuAssumptions | None = None) -> Calibration:
    """Fit every family's runtime and memory weights to its measured CPU jobs, and the GPU
    families' GPU weights to their measured GPU jobs (priors where none)."""
    by_family: dict[str, list[MeasuredJob]] = {}
    on_gpu: dict[str, list[MeasuredJob]] = {}
    for job in measured:
        (on_gpu if job.gpu else by_family).setdefault(job.family, []).append(job)
    calibration = Calibration()
    timed = collections.Counter(j.cpu or "unrecorded CPU" for js in by_family.values() for j in js if j.wall_s)
    calibration.cpu_types = dict(timed.most_common())
    for family, prior in RUNTIME_PRIORS.items():
        jobs = by_family.get(family, [])
        calibration.n_jobs[family] = len(jobs)
        mem_names = list(MEMORY_PRIORS)
        mem_prior = np.array([MEMORY_PRIORS[n] for n in mem_names])
        if not jobs:
            calibration.runtime[family] = dict(prior)
            calibration.memory[family] = dict(MEMORY_PRIORS)
            continue
        calibration.runtime[family] = _fit_runtime(jobs, prior)
        mem_rows = np.array([[j.memory.get(n, 0.0) for n in mem_names] for j in jobs])
        # the held bytes are exact: the fitted terms explain what is left of each peak (at least
        # a tenth of it, so a job whose estimate overshoots still pulls its weights down)
        rest = np.array([max(j.peak_mb - j.memory.get("held", 0.0), 0.1 * j.peak_mb) for j in jobs])
        stopped = np.array([j.wall_s is None for j in jobs])
        mem_weights = _fit_log(mem_rows, rest, mem_prior, at_least=stopped)
        calibration.memory[family] = dict(zip(mem_names, mem_weights.tolist()))
    assumed = gpu or GpuAssumptions()
    for family in GPU_FAMILIES:
        cpu = calibration.runtime[family]
        prior = {
            "start": cpu["start"],
            "load": cpu["load"],
            "flops": 1 / (assumed.tflops * 1e3),  # seconds per GFLOP
            "steps": assumed.step_overhead_ms,  # seconds per 1,000 steps
        }
        jobs = on_gpu.get(family, [])
        calibration.n_gpu_jobs[family] = sum(j.wall_s is not None for j in jobs)
        calibration.gpu_runtime[family] = _fit_runtime(jobs, prior)
    return calibration


@dataclass(frozen=True)
class CostModel:
    """A calibration plus the GPU assumptions: predicted seconds and MiB of a job's work."""

    calibration: Calibration
    gpu: GpuAssumptions = GpuAssumptions()

    def cpu_seconds(self, family: str, terms: Mapping[str, float]) -> float:
        weights = self.calibration.runtime[family]
        return float(sum(weights.get(name, 0.0) * value for name, value in terms.items()))

    def gpu_seconds(self, family: str, terms: Mapping[str, float]) -> float:
        """GPU time: start-up, loading, flops and steps at the GPU weights (calibrated on measured
        GPU jobs; the assumed rate and overhead for a family none measured)."""
        weights = self.calibration.gpu_runtime[family]
        return float(sum(weights.get(name, 0.0) * value for name, value in terms.items()))

    def peak_mb(self, family: str, memory: Mapping[str, float]) -> float:
        weights = self.calibration.memory[family]
        fitted = sum(weights.get(name, 0.0) * value for name, value in memory.items() if name != "held")
        return float(fitted + memory.get("held", 0.0))
