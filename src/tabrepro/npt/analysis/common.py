"""A trained NPT and the table it predicts from, as every analysis experiment needs them.

`NPTContext` bundles the model (in evaluation mode), the `NPTTable` it was evaluated on
([train | validation | test] rows, every non-training target hidden), the evaluation batches, the
true labels for scoring and a feature matrix for distances. `load_fold_context` rebuilds it for
one workflow fold from the fold's `weights.pt` and the NPT configuration recorded in its
`metrics.json` (`selected_config`), preprocessing the data exactly as the training job did.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tabrepro.config import Job
from tabrepro.evaluation.metrics import compute_metrics
from tabrepro.features import categorical, continuous
from tabrepro.models.npt.config import NPTConfig
from tabrepro.models.npt.estimator import feature_attributes
from tabrepro.models.npt.masking import TEST, TRAIN, VAL, NPTTable, batch_plan
from tabrepro.models.npt.model import NPTNetwork
from tabrepro.nn.session import resolve_device
from tabrepro.npt.analysis.settings import AnalysisError
from tabrepro.tasks import TASKS, Task

__all__ = [
    "NPTContext",
    "load_fold_context",
    "target_outputs",
    "batch_outputs",
    "finite_json",
    "npt_config_from_result",
    "pairwise_distances",
]

log = logging.getLogger(__name__)


@dataclass
class NPTContext:
    """Everything an experiment needs to run a trained NPT on one table and score it.

    labels: per table row, the true target in the metric's encoding: class index over all
        `n_classes` classes, or the value in original units (regression). NaN/-1 where unknown.
    class_columns: classification only: the class index of each model output column (the model
        only knows the classes present in its training rows).
    target_mean / target_scale: regression only: original = mean + scale * model output.
    features: (n, p) numeric features for feature-space distances (preprocessed scale).
    """

    model: NPTNetwork
    table: NPTTable
    batches: list[Tensor]
    task: Task
    labels: np.ndarray
    features: np.ndarray
    n_classes: int | None = None
    class_columns: np.ndarray | None = None
    target_mean: float = 0.0
    target_scale: float = 1.0
    name: str = ""

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise AnalysisError(f"unknown task {self.task!r}")
        n = self.table.n_rows
        if self.labels.shape[0] != n or self.features.shape[0] != n:
            raise AnalysisError(f"labels/features must have one entry per table row ({n})")
        if self.task != "regression" and self.class_columns is None:
            width = self.table.attributes[-1].one_hot_width
            self.class_columns = np.arange(width)
            self.n_classes = self.n_classes or width
        self.model.eval()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def test_rows(self) -> np.ndarray:
        """Test rows with a known label, in table order."""
        rows = self.table.rows(TEST).cpu().numpy()
        return rows[self._known(rows)]

    def _known(self, rows: np.ndarray) -> np.ndarray:
        labels = self.labels[rows]
        return np.isfinite(labels) & (labels >= 0) if self.task != "regression" else np.isfinite(labels)

    def batch_of(self, row: int) -> Tensor:
        for rows in self.batches:
            if bool((rows == row).any()):
                return rows
        raise AnalysisError(f"row {row} is in no evaluation batch")

    # ------------------------------------------------------------------ turning outputs into numbers
    def probabilities(self, outputs: np.ndarray) -> np.ndarray:
        """(m, n_classes) probabilities from (m, n_columns) logits; absent classes get 0."""
        assert self.class_columns is not None and self.n_classes is not None
        logits = outputs - outputs.max(axis=1, keepdims=True)
        present = np.exp(logits)
        present /= present.sum(axis=1, keepdims=True)
        full = np.zeros((outputs.shape[0], self.n_classes))
        full[:, self.class_columns] = present
        return full

    def values(self, outputs: np.ndarray) -> np.ndarray:
        """Regression predictions in original units."""
        return self.target_mean + self.target_scale * outputs[:, 0]

    def score(self, rows: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
        """The paper's metrics for `rows` given the model outputs for those rows."""
        labels = self.labels[rows]
        if self.task == "regression":
            return compute_metrics("regression", labels, y_pred=self.values(outputs))
        return compute_metrics(self.task, labels.astype(np.int64), proba=self.probabilities(outputs))

    def prediction(self, outputs: np.ndarray, reference_class: int | None = None) -> np.ndarray:
        """One number per row to follow under interventions: the value in original units, or the
        probability of `reference_class` (default: each row's arg-max class)."""
        if self.task == "regression":
            return self.values(outputs)
        proba = self.probabilities(outputs)
        if reference_class is None:
            return proba.max(axis=1)
        return proba[:, reference_class]


# ---------------------------------------------------------------------------- forward passes
@torch.no_grad()
def batch_outputs(model: NPTNetwork, values: Tensor, mask: Tensor) -> Tensor:
    """Target outputs (n, width) of one forward pass over one batch, in evaluation mode."""
    model.eval()
    return model.forward_codes(values, mask)[-1].float()


@torch.no_grad()
def target_outputs(context: NPTContext) -> np.ndarray:
    """Target outputs for every table row, each row predicted within its evaluation batch."""
    table = context.table
    width = table.attributes[-1].one_hot_width
    result = torch.empty((table.n_rows, width), device=table.device)
    for rows in context.batches:
        result[rows] = batch_outputs(context.model, table.inputs[rows], table.input_missing[rows])
    return result.cpu().double().numpy()


def pairwise_distances(features: np.ndarray, row: int, others: np.ndarray) -> np.ndarray:
    """Euclidean feature-space distances from `row` to each of `others`."""
    return np.sqrt(((features[others] - features[row]) ** 2).sum(axis=1))


# ---------------------------------------------------------------------------- rebuilding a fold
def npt_config_from_result(result: dict[str, Any], where: str) -> NPTConfig:
    """The NPTConfig of a fold result's `selected_config` (unknown keys are reported, not used)."""
    values = result.get("selected_config")
    if not isinstance(values, dict):
        raise AnalysisError(f"{where}: no 'selected_config' object (is this an NPT result?)")
    known = {f.name for f in dataclasses.fields(NPTConfig)}
    ignored = sorted(set(values) - known)
    if ignored:
        log.warning("%s: ignoring non-NPTConfig key(s) %s in selected_config", where, ignored)
    config_values = {k: v for k, v in values.items() if k in known}
    if isinstance(config_values.get("lamb_betas"), list):
        config_values["lamb_betas"] = tuple(config_values["lamb_betas"])
    config_values["device"] = "cpu"
    try:
        return NPTConfig.from_dict(config_values)
    except (TypeError, ValueError) as error:
        raise AnalysisError(f"{where}: selected_config is not a valid NPT configuration: {error}") from None


def load_fold_context(
    params: Any,
    paper: str,
    dataset: str,
    fold: int,
    *,
    metrics_path: Path | None = None,
    weights_path: Path | None = None,
    model_name: str = "npt",
    batch_seed: int = 0,
    device: str = "cpu",
) -> NPTContext:
    """Rebuild the trained NPT of one fold and the table it predicts its test rows from."""
    from tabrepro.data.table import load_table  # deferred: loads pandas
    from tabrepro.preprocessing import Preprocessor, TargetEncoder  # deferred: loads pandas
    from tabrepro.splits import fold_path, load_split  # deferred: loads pandas, sklearn

    job = Job(paper, dataset, model_name, fold)
    metrics_path = Path(metrics_path or params.layout.job_metrics.path(job))
    weights_path = Path(weights_path or params.layout.job_weights.path(job))
    for path in (metrics_path, weights_path):
        if not path.is_file():
            raise AnalysisError(f"{path}: no such file (train NPT on {paper}/{dataset} fold {fold} first)")
    try:
        result = json.loads(metrics_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise AnalysisError(f"{metrics_path}: cannot read result JSON: {error}") from None
    config = npt_config_from_result(result, str(metrics_path))

    source = params.source_of(paper, dataset)
    table = load_table(params.processed_dir(source))
    schema = table.schema
    split = load_split(fold_path(params.split_dir(paper, dataset), fold))
    if len(split.roles) != schema.n_rows:
        raise AnalysisError(f"fold {fold} of {paper}/{dataset} has {len(split.roles)} rows, table has {schema.n_rows}")
    preprocessor = Preprocessor().fit(table.frame, schema, split.train)
    X = preprocessor.transform(table.frame)
    encoder = TargetEncoder().fit(table.frame, schema, split.train)
    y = encoder.transform(table.frame)
    layout = preprocessor.feature_layout
    rows = np.concatenate([split.train, split.val, split.test])
    roles = np.concatenate(
        [np.full(len(split.train), TRAIN), np.full(len(split.val), VAL), np.full(len(split.test), TEST)]
    )
    codes = layout.decode(X[rows])

    weights = torch.load(weights_path, map_location="cpu", weights_only=True)
    n_attributes = layout.n_features + 1
    out_key = f"out_maps.{n_attributes - 1}.weight"
    if out_key not in weights:
        raise AnalysisError(f"{weights_path}: not NPT weights for {n_attributes} attributes (no {out_key})")
    task = schema.task
    context_kwargs: dict[str, Any] = {}
    model_targets = np.asarray(y[rows], dtype=np.float64).copy()
    if task == "regression":
        target = continuous("target")
        context_kwargs.update(target_mean=encoder.mean, target_scale=encoder.scale)
        labels = encoder.inverse_transform(y[rows])
    else:
        n_classes = int(encoder.n_classes or 2)
        present = np.unique(y[split.train]).astype(np.int64)
        width = int(weights[out_key].shape[0])
        # The model interface re-codes the classes present in the training rows to 0..k-1.
        if width == len(present) and len(present) < n_classes:
            class_columns = present
        elif width == n_classes:
            class_columns = np.arange(n_classes)
        else:
            raise AnalysisError(f"{weights_path}: {width} target classes, data has {n_classes}")
        recode = {int(c): i for i, c in enumerate(class_columns)}
        model_targets = np.array([recode.get(int(c), np.nan) for c in y[rows]], dtype=np.float64)
        target = categorical(max(width, 2), "target")
        labels = np.asarray(y[rows], dtype=np.float64)
        context_kwargs.update(n_classes=n_classes, class_columns=class_columns)
    model_targets[roles == TEST] = np.nan  # never part of the input, as in the estimator
    keep = (roles != VAL) | np.isfinite(model_targets)  # validation rows of absent classes
    attributes = (*feature_attributes(layout), target)
    values = np.column_stack([codes, model_targets])[keep]
    npt_table = NPTTable(attributes, torch.as_tensor(values, dtype=torch.float32), torch.as_tensor(roles[keep]))
    model = NPTNetwork(attributes, config)
    try:
        model.load_state_dict(weights)
    except RuntimeError as error:
        raise AnalysisError(f"{weights_path}: weights do not fit the selected config: {error}") from None
    batches = make_batches(npt_table, config.batch_size, batch_seed)  # CPU indices
    where = resolve_device(device)
    model = model.to(where).eval()
    npt_table = npt_table.to(where)
    features = np.nan_to_num(np.asarray(X[rows][keep], dtype=np.float64))
    return NPTContext(
        model=model,
        table=npt_table,
        batches=batches,
        task=task,
        labels=np.asarray(labels, dtype=np.float64)[keep],
        features=features,
        name=f"{paper}/{dataset}/fold{fold}",
        **context_kwargs,
    )


def make_batches(table: NPTTable, batch_size: int | None, seed: int) -> list[Tensor]:
    """Evaluation batches that keep the train/val/test proportions (one batch if None).

    The training job's own evaluation batches depend on its job seed, which the result does not
    record; any batching with the same proportions is an equally valid evaluation context.
    """
    rows = torch.arange(table.n_rows)
    if batch_size is None or batch_size >= table.n_rows:
        return [rows]
    return batch_plan(table, rows, batch_size, torch.Generator().manual_seed(seed))


def finite_json(value: Any) -> Any:
    """`value` as plain JSON data: numpy values unwrapped, NaN and inf as null (the results are
    written with allow_nan=False, so that every JSON reader can parse them)."""
    if isinstance(value, dict):
        return {str(k): finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return finite_json(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
