"""Semi-synthetic lookup task (§4.2, App. B.1, Table 3, Fig. 3).

Every batch holds m original rows with their targets hidden plus an exact copy of those m rows
with the targets revealed; the loss is the target loss on the originals. A model that attends
between datapoints can solve this perfectly by finding each original's duplicate; a parametric
model can only learn the feature-target relation. Variants make plain copying insufficient:

* Random Features: the last three features are overwritten with N(1, 1) noise, drawn
  independently for originals and duplicates, so the match must ignore them;
* Add One: the duplicates' targets are +1 (standardised scale); the answer is the looked-up
  target minus one;
* both together.

Test rows are fresh rows never used in training, in batches of the training size. Baselines:
1-NN and k-NN (k = 1..10, brute force) fitted on the test duplicates and asked for the test
originals; k is chosen on validation rows built the same way. Interventions (Fig. 3d-e): change
one test duplicate's target and record NPT's prediction for its original, which should follow.

RMSE is reported in the target's original units (Table 3), and on the standardised scale.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.neighbors import KNeighborsRegressor
from torch import Tensor

from tabrepro.features import continuous
from tabrepro.models.npt.config import NPTConfig
from tabrepro.models.npt.masking import feature_loss_weight, npt_loss
from tabrepro.models.npt.model import NPTNetwork
from tabrepro.models.npt.optim import LRSchedule, build_optimizer, clip_gradients
from tabrepro.nn.session import resolve_device
from tabrepro.npt.analysis.attention import abd_attention
from tabrepro.npt.analysis.settings import SYNTHETIC, AnalysisError, LookupModelSettings, LookupSettings
from tabrepro.seeding import derive_seed

__all__ = [
    "LookupData",
    "synthetic_lookup_data",
    "dataset_lookup_data",
    "LookupBatch",
    "make_batch",
    "train_lookup_model",
    "npt_predictions",
    "knn_baselines",
    "interventions",
    "run_variant",
    "lookup_experiment",
]


@dataclass
class LookupData:
    """Standardised features and target, split into disjoint train / validation / test rows."""

    train_X: np.ndarray
    train_y: np.ndarray
    val_X: np.ndarray
    val_y: np.ndarray
    test_X: np.ndarray
    test_y: np.ndarray
    target_mean: float = 0.0
    target_scale: float = 1.0
    source: str = SYNTHETIC

    @property
    def n_features(self) -> int:
        return int(self.train_X.shape[1])


def synthetic_lookup_data(settings: LookupSettings, seed: int, n_features: int = 9) -> LookupData:
    """Protein-shaped data: 9 correlated continuous features and a noisy nonlinear target.

    The target is partly predictable from the features (R^2 about 0.5, like Protein for an MLP),
    so a model that only learns the feature-target relation does well but not perfectly.
    """
    rng = np.random.default_rng(seed)
    n_train = settings.n_train_rows or 4096
    n = n_train + settings.n_val_rows + settings.n_test_rows
    mixing = rng.normal(size=(n_features, n_features)) / math.sqrt(n_features) + np.eye(n_features)
    X = rng.normal(size=(n, n_features)) @ mixing
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    coefficients = rng.normal(size=n_features)
    signal = np.tanh(X) @ coefficients + 0.5 * X[:, 0] * X[:, 1]
    signal = (signal - signal.mean()) / signal.std()
    y = signal + rng.normal(size=n)
    y = (y - y[:n_train].mean()) / y[:n_train].std()
    a, b = n_train, n_train + settings.n_val_rows
    return LookupData(X[:a], y[:a], X[a:b], y[a:b], X[b:], y[b:], 0.0, 1.0, SYNTHETIC)


def dataset_lookup_data(params: Any, paper: str, dataset: str, settings: LookupSettings, seed: int) -> LookupData:
    """A regression dataset of `paper` (Protein in the paper), continuous features only.

    Rows are shuffled with `seed` and cut into disjoint train / validation / test parts, so the
    test rows are fresh; features and target are standardised with training-row statistics.
    """
    from tabrepro.data.table import load_table  # deferred: loads pandas

    source = params.source_of(paper, dataset)
    table = load_table(params.processed_dir(source))
    schema = table.schema
    if schema.task != "regression":
        raise AnalysisError(f"lookup needs a regression dataset; {paper}/{dataset} is {schema.task}")
    names = [c.name for c in schema.features if c.kind == "continuous"]
    if not names:
        raise AnalysisError(f"{paper}/{dataset} has no continuous features")
    X_all = table.frame[names].to_numpy(dtype=np.float64)
    y_all = table.frame[schema.target].to_numpy(dtype=np.float64)
    ok = np.isfinite(X_all).all(axis=1) & np.isfinite(y_all)
    X_all, y_all = X_all[ok], y_all[ok]
    order = np.random.default_rng(seed).permutation(len(y_all))
    n_test, n_val = settings.n_test_rows, settings.n_val_rows
    available = len(order) - n_test - n_val
    if available < settings.batch_rows:
        raise AnalysisError(f"{paper}/{dataset}: {len(order)} rows are too few for the lookup sizes")
    n_train = available if settings.n_train_rows is None else min(settings.n_train_rows, available)
    test, val = order[:n_test], order[n_test : n_test + n_val]
    train = order[n_test + n_val : n_test + n_val + n_train]
    mean, std = X_all[train].mean(axis=0), X_all[train].std(axis=0)
    std[std == 0] = 1.0
    y_mean, y_std = float(y_all[train].mean()), float(y_all[train].std() or 1.0)

    def standardise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (X_all[rows] - mean) / std, (y_all[rows] - y_mean) / y_std

    (tx, ty), (vx, vy), (sx, sy) = standardise(train), standardise(val), standardise(test)
    return LookupData(tx, ty, vx, vy, sx, sy, y_mean, y_std, f"{paper}/{dataset}")


# ---------------------------------------------------------------------------- batches
@dataclass
class LookupBatch:
    """2m rows: m originals (target hidden) then their m duplicates (target shown)."""

    values: Tensor  # (2m, d) model input, hidden entries zero
    mask: Tensor  # (2m, d) bool
    truth: Tensor  # (2m, d) true codes: the originals' real targets, for the loss
    original_X: np.ndarray  # (m, p) the originals' features as seen (with their noise)
    duplicate_X: np.ndarray
    duplicate_y: np.ndarray  # (m,) the duplicates' revealed targets (with Add One)
    y: np.ndarray  # (m,) the originals' true targets


def _variant_flags(variant: str) -> tuple[bool, bool]:
    return "random_features" in variant, "add_one" in variant


def make_batch(
    X: np.ndarray, y: np.ndarray, variant: str, settings: LookupSettings, rng: np.random.Generator
) -> LookupBatch:
    """Originals with hidden targets plus duplicates with revealed targets, per the variant."""
    random_features, add_one = _variant_flags(variant)
    m, p = X.shape
    original, duplicate = X.copy(), X.copy()
    if random_features:
        k = min(settings.n_random_features, p)
        original[:, p - k :] = rng.normal(settings.noise_mean, settings.noise_std, size=(m, k))
        duplicate[:, p - k :] = rng.normal(settings.noise_mean, settings.noise_std, size=(m, k))
    duplicate_y = y + (settings.add if add_one else 0.0)
    values = np.zeros((2 * m, p + 1))
    values[:m, :p], values[m:, :p], values[m:, p] = original, duplicate, duplicate_y
    truth = values.copy()
    truth[:m, p] = y
    mask = np.zeros((2 * m, p + 1), dtype=bool)
    mask[:m, p] = True
    return LookupBatch(
        torch.as_tensor(values, dtype=torch.float32),
        torch.as_tensor(mask),
        torch.as_tensor(truth, dtype=torch.float32),
        original,
        duplicate,
        duplicate_y,
        y.copy(),
    )


def _config(model: LookupModelSettings, seed: int) -> NPTConfig:
    return NPTConfig(
        embed_dim=model.embed_dim,
        n_layers=model.n_layers,
        n_heads=model.n_heads,
        lr=model.lr,
        max_steps=model.steps,
        flat_fraction=model.flat_fraction,
        attention_dropout=model.dropout,
        hidden_dropout=model.dropout,
        embedding_dropout=model.dropout,
        p_feature=model.p_feature,
        seed=seed,
    )


def train_lookup_model(
    data: LookupData, variant: str, settings: LookupSettings, seed: int, device: str = "cpu"
) -> tuple[NPTNetwork, list[float]]:
    """Train an NPT on lookup batches drawn from the training rows; returns it and its losses."""
    config = _config(settings.model, seed)
    where = resolve_device(device)
    attributes = tuple(continuous(f"x{j}") for j in range(data.n_features)) + (continuous("target"),)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "lookup", variant, "init"))
        model = NPTNetwork(attributes, config)
    model = model.to(where)
    model.dropout_generator = torch.Generator(device=where).manual_seed(derive_seed(seed, "lookup", variant, "dropout"))
    optimizer, schedule = build_optimizer(model, config), LRSchedule.from_config(config)
    rng = np.random.default_rng(derive_seed(seed, "lookup", variant, "batches"))
    mask_generator = torch.Generator().manual_seed(derive_seed(seed, "lookup", variant, "masks"))
    m = min(settings.batch_rows, len(data.train_y))
    losses: list[float] = []
    model.train()
    for step in range(config.max_steps):
        rows = rng.choice(len(data.train_y), size=m, replace=False)
        batch = make_batch(data.train_X[rows], data.train_y[rows], variant, settings, rng)
        values, mask = batch.values, batch.mask.clone()
        target_selected = torch.zeros(2 * m, dtype=torch.bool)
        target_selected[:m] = True
        feature_selected = torch.zeros_like(mask)
        if config.p_feature > 0:  # BERT-style feature masking (mask only, no randomisation)
            feature_selected[:, :-1] = torch.rand(mask[:, :-1].shape, generator=mask_generator) < config.p_feature
            mask |= feature_selected
            values = torch.where(mask, 0.0, values)
        lam = feature_loss_weight(config, step)
        schedule.apply(optimizer, step)
        outputs = model.forward_codes(values.to(where), mask.to(where))
        loss = npt_loss(
            outputs, batch.truth.to(where), target_selected.to(where), feature_selected.to(where), attributes, lam
        )
        optimizer.zero_grad(set_to_none=True)
        loss.total.backward()
        clip_gradients(model.parameters(), config.grad_clip, config.grad_clip_threshold)
        optimizer.step()
        losses.append(float(loss.target.detach()))
    model.eval()
    return model, losses


def _fixed_batches(
    X: np.ndarray, y: np.ndarray, variant: str, settings: LookupSettings, seed: int
) -> list[LookupBatch]:
    """Evaluation batches of fresh rows, noise drawn once from a fixed seed."""
    rng = np.random.default_rng(seed)
    m = settings.batch_rows
    return [make_batch(X[i : i + m], y[i : i + m], variant, settings, rng) for i in range(0, len(y), m)]


@torch.no_grad()
def npt_predictions(model: NPTNetwork, batches: list[LookupBatch]) -> np.ndarray:
    """NPT's predictions (standardised) for every original row of the batches."""
    model.eval()
    where = _device(model)
    out = []
    for batch in batches:
        m = len(batch.y)
        prediction = model.forward_codes(batch.values.to(where), batch.mask.to(where))[-1][:m, 0]
        out.append(prediction.double().cpu().numpy())
    return np.concatenate(out)


def knn_baselines(batches: list[LookupBatch], max_k: int) -> dict[int, np.ndarray]:
    """Brute-force k-NN (k = 1..max_k) fitted on the duplicates, predicting the originals."""
    dup_X = np.concatenate([b.duplicate_X for b in batches])
    dup_y = np.concatenate([b.duplicate_y for b in batches])
    orig_X = np.concatenate([b.original_X for b in batches])
    predictions = {}
    for k in range(1, min(max_k, len(dup_y)) + 1):
        knn = KNeighborsRegressor(n_neighbors=k, algorithm="brute").fit(dup_X, dup_y)
        predictions[k] = knn.predict(orig_X)
    return predictions


@torch.no_grad()
def interventions(
    model: NPTNetwork, batch: LookupBatch, rows: list[int], new_values: tuple[float, ...]
) -> list[dict[str, Any]]:
    """Set duplicate i's target to each value; NPT's prediction for original i should follow."""
    m = len(batch.y)
    where = _device(model)
    mask = batch.mask.to(where)
    out = []
    for i in rows:
        predictions = []
        for value in new_values:
            values = batch.values.clone()
            values[m + i, -1] = float(value)
            predictions.append(float(model.forward_codes(values.to(where), mask)[-1][i, 0]))
        slope, intercept = np.polyfit(np.asarray(new_values), np.asarray(predictions), 1)
        out.append(
            {
                "row": int(i),
                "duplicate_values": list(map(float, new_values)),
                "predictions": predictions,
                "slope": float(slope),
                "intercept": float(intercept),
                "true_target": float(batch.y[i]),
            }
        )
    return out


def _device(model: NPTNetwork) -> torch.device:
    return next(model.parameters()).device


def _rmse(prediction: np.ndarray, truth: np.ndarray) -> float:
    return float(np.sqrt(np.mean((prediction - truth) ** 2)))


def run_variant(
    data: LookupData, variant: str, settings: LookupSettings, seed: int, device: str = "cpu"
) -> dict[str, Any]:
    """Train NPT on one variant and score it and the k-NN baselines on fresh test rows."""
    started = time.perf_counter()
    model, losses = train_lookup_model(data, variant, settings, seed, device)
    trained = time.perf_counter()
    test = _fixed_batches(data.test_X, data.test_y, variant, settings, derive_seed(seed, "lookup", variant, "test"))
    val = _fixed_batches(data.val_X, data.val_y, variant, settings, derive_seed(seed, "lookup", variant, "val"))
    truth = np.concatenate([b.y for b in test])
    scale = data.target_scale
    npt = npt_predictions(model, test)
    knn_test = knn_baselines(test, settings.knn_max_k)
    knn_val = knn_baselines(val, settings.knn_max_k) if val and len(data.val_y) else knn_test
    val_truth = np.concatenate([b.y for b in val]) if val else truth
    val_rmse = {k: _rmse(p, val_truth) for k, p in knn_val.items()}
    best_k = min(val_rmse, key=lambda k: (val_rmse[k], k))
    curve = {k: _rmse(p, truth) * scale for k, p in knn_test.items()}
    n_rows = min(settings.intervention_rows, len(test[0].y))
    maps = abd_attention(model, test[0].values.to(_device(model)), test[0].mask.to(_device(model)))
    m = len(test[0].y)
    on_duplicate = [
        [float(np.mean(heads[h, np.arange(m), m + np.arange(m)])) for h in range(heads.shape[0])] for heads in maps
    ]
    return {
        "variant": variant,
        "rmse": {"NPT": _rmse(npt, truth) * scale, "1-NN": curve[1], "k-NN": curve[best_k]},
        "rmse_standardised": {"NPT": _rmse(npt, truth), "1-NN": curve[1] / scale, "k-NN": curve[best_k] / scale},
        "pearson_r": {"NPT": float(np.corrcoef(npt, truth)[0, 1])},
        "knn": {"best_k": int(best_k), "val_rmse_standardised": val_rmse, "test_rmse_by_k": curve},
        "interventions": interventions(model, test[0], list(range(n_rows)), settings.intervention_values),
        "training": {
            "steps": len(losses),
            "final_loss": float(np.mean(losses[-50:])),
            "loss_curve": _thin(losses, 200),
            "seconds": round(trained - started, 3),
        },
        "attention_on_duplicate": on_duplicate,  # per ABD layer and head: original -> its copy
        "_attention": maps,  # for the figure; not written to JSON
        "n_test_rows": int(len(truth)),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _thin(values: list[float], n: int) -> list[float]:
    """At most n evenly spaced points of a long curve (each the mean of its stretch)."""
    if len(values) <= n:
        return list(values)
    edges = np.linspace(0, len(values), n + 1).astype(int)
    return [float(np.mean(values[a:b])) for a, b in zip(edges[:-1], edges[1:])]


def lookup_experiment(data: LookupData, settings: LookupSettings, seed: int, device: str = "cpu") -> dict[str, Any]:
    """Every configured variant; Table 3's RMSEs are under `variants[v]["rmse"]`."""
    return {
        "source": data.source,
        "target_scale": data.target_scale,
        "n_train_rows": int(len(data.train_y)),
        "n_features": data.n_features,
        "device": str(resolve_device(device)),
        "variants": {v: run_variant(data, v, settings, seed, device) for v in settings.variants},
    }
