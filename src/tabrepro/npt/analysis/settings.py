"""Sizes and constants of NPT's analysis experiments, per profile (params.yaml `analysis:`).

params.yaml holds one entry per profile under `analysis:` (the only place the profiles' sizes
are written down); a profile without an entry runs no analysis experiment.

Every field has a default; the file only needs to name what differs. Unknown keys are errors
(a typo would otherwise silently leave a default in place).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Self

from tabrepro.errors import InputError

__all__ = [
    "AnalysisError",
    "AnalysisSettings",
    "AttentionSettings",
    "CorruptionSettings",
    "DeletionSettings",
    "LookupModelSettings",
    "LookupSettings",
    "EXPERIMENTS",
    "FOLD_EXPERIMENTS",
    "settings_for",
    "experiment_digest",
]

EXPERIMENTS = ("corruption", "deletion", "attention", "lookup")
FOLD_EXPERIMENTS = ("corruption", "deletion", "attention")  # these need a trained NPT of a fold
LOOKUP_VARIANTS = ("original", "random_features", "add_one", "random_features_add_one")
SYNTHETIC = "synthetic"


class AnalysisError(InputError, ValueError):
    """Bad input to an analysis experiment; the message names the offending value or file."""


@dataclass(frozen=True)
class CorruptionSettings:
    """Alg. 1: one forward pass per test row; `max_test_rows` caps the cost (None = all)."""

    max_test_rows: int | None = None


@dataclass(frozen=True)
class DeletionSettings:
    """Alg. 2 (App. B.3.2). The five algorithm constants are the paper's; the caps are ours.

    `max_context_rows` caps the rows a test row's prediction is computed from (None = its whole
    evaluation batch); `max_proposals` caps the forward passes per test row (None = until the
    algorithm stops by itself).
    """

    max_test_rows: int | None = 50
    max_context_rows: int | None = None
    max_proposals: int | None = None
    delta_start: float = 0.01
    delta_growth: float = 1.1
    patience: int = 50  # rejected proposals before the threshold grows
    max_total_change: float = 0.10
    min_remaining_fraction: float = 0.02


@dataclass(frozen=True)
class AttentionSettings:
    """ABD attention maps around `n_reference_rows` test rows, each in a context of at most
    `max_rows` rows of its batch (None = the whole batch)."""

    n_reference_rows: int = 1
    max_rows: int | None = 256


@dataclass(frozen=True)
class LookupModelSettings:
    """The NPT trained for the lookup task (NPTConfig fields; dropout off by default)."""

    embed_dim: int = 16
    n_layers: int = 2  # one ABD and one ABA block: enough to look a row up
    n_heads: int = 4
    lr: float = 1e-2
    steps: int = 1200
    flat_fraction: float = 0.7
    dropout: float = 0.0
    p_feature: float = 0.0  # feature masking on the originals; paper silent, default off


@dataclass(frozen=True)
class LookupSettings:
    """Semi-synthetic lookup (§4.2, App. B.1).

    `dataset` is a paper dataset with a regression target (the paper: protein) or "synthetic":
    Protein-shaped random data (9 continuous features, a noisy nonlinear target), which needs no
    download and so lets the quick profile run offline.
    """

    dataset: str = SYNTHETIC
    variants: tuple[str, ...] = LOOKUP_VARIANTS
    n_train_rows: int | None = 4096  # pool the training batches are drawn from (None = all)
    n_val_rows: int = 256  # choose k of the k-NN baseline
    n_test_rows: int = 256  # fresh rows, never seen in training
    batch_rows: int = 64  # originals per batch (the batch holds twice as many rows)
    n_random_features: int = 3
    noise_mean: float = 1.0
    noise_std: float = 1.0
    add: float = 1.0  # Add One, on the standardised target scale
    knn_max_k: int = 10
    intervention_rows: int = 4
    intervention_values: tuple[float, ...] = (-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)
    model: LookupModelSettings = field(default_factory=LookupModelSettings)


@dataclass(frozen=True)
class AnalysisSettings:
    paper: str = "npt"
    datasets: tuple[str, ...] | str = "all"  # trained-NPT experiments; "all" = profile's NPT datasets
    folds: tuple[int, ...] | str = (0,)
    experiments: tuple[str, ...] = EXPERIMENTS
    device: str = "auto"  # "auto" (CUDA when available), "cpu" or "cuda"
    corruption: CorruptionSettings = field(default_factory=CorruptionSettings)
    deletion: DeletionSettings = field(default_factory=DeletionSettings)
    attention: AttentionSettings = field(default_factory=AttentionSettings)
    lookup: LookupSettings = field(default_factory=LookupSettings)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "analysis") -> Self:
        return _build(cls, raw, where)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _build(kind: type, raw: Any, where: str) -> Any:
    """A (nested) settings dataclass from a plain mapping, naming the first bad key."""
    if not isinstance(raw, dict):
        raise AnalysisError(f"{where}: expected a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise AnalysisError(f"{where}: unknown key(s) {unknown}; known: {sorted(fields)}")
    values: dict[str, Any] = {}
    for name, value in raw.items():
        default = getattr(kind(), name)
        if dataclasses.is_dataclass(default):
            values[name] = _build(type(default), value, f"{where}.{name}")
        elif isinstance(value, list):
            values[name] = tuple(value)
        else:
            values[name] = value
    settings = kind(**values)
    _check(settings, where)
    return settings


def _check(settings: Any, where: str) -> None:
    if isinstance(settings, AnalysisSettings):
        bad = [e for e in settings.experiments if e not in EXPERIMENTS]
        if bad:
            raise AnalysisError(f"{where}.experiments: unknown experiment(s) {bad}; known: {list(EXPERIMENTS)}")
        if isinstance(settings.datasets, str) and settings.datasets != "all":
            raise AnalysisError(f"{where}.datasets: a list of names or 'all', got {settings.datasets!r}")
        if settings.device not in ("auto", "cpu", "cuda"):
            raise AnalysisError(f"{where}.device: 'auto', 'cpu' or 'cuda', got {settings.device!r}")
        if isinstance(settings.folds, str) and settings.folds != "all":
            raise AnalysisError(f"{where}.folds: a list of fold indices or 'all', got {settings.folds!r}")
    if isinstance(settings, LookupSettings):
        bad = [v for v in settings.variants if v not in LOOKUP_VARIANTS]
        if bad:
            raise AnalysisError(f"{where}.variants: unknown variant(s) {bad}; known: {list(LOOKUP_VARIANTS)}")
        if settings.batch_rows < 2 or settings.n_test_rows < 1 or settings.knn_max_k < 1:
            raise AnalysisError(f"{where}: batch_rows >= 2, n_test_rows >= 1 and knn_max_k >= 1 needed")
    if isinstance(settings, DeletionSettings):
        if not 0 < settings.min_remaining_fraction < 1 or settings.delta_growth <= 1:
            raise AnalysisError(f"{where}: min_remaining_fraction must lie in (0, 1) and delta_growth > 1")
    for name in ("max_test_rows", "max_rows", "max_context_rows", "max_proposals", "n_train_rows"):
        value = getattr(settings, name, None)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise AnalysisError(f"{where}.{name}: a positive integer or null, got {value!r}")


def settings_for(raw_params: dict[str, Any], profile: str) -> AnalysisSettings | None:
    """The profile's settings from params.yaml's `analysis.<profile>` (None without an entry)."""
    section = raw_params.get("analysis") or {}
    if not isinstance(section, dict):
        raise AnalysisError("analysis: expected a mapping of profile -> settings")
    entry = section.get(profile)
    return None if entry is None else AnalysisSettings.from_dict(entry, f"analysis.{profile}")


def experiment_digest(settings: AnalysisSettings, experiment: str, seed: int) -> str:
    """Hash of what one experiment's result depends on, so the workflow reruns it on a change."""
    if experiment not in EXPERIMENTS:
        raise AnalysisError(f"unknown experiment {experiment!r}; known: {list(EXPERIMENTS)}")
    relevant = {"seed": seed, "paper": settings.paper, experiment: settings.to_dict()[experiment]}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]
