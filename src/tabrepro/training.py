"""One job: tune a model on a fold's validation split, score the chosen one once on test.

Selection sees validation rows only; the test rows are scored exactly once, with the configuration
that won on validation. Everything random is seeded from params.yaml's root seed and the job's
names, so a job gives the same result wherever and whenever it runs.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tabrepro.config import Job, Params
from tabrepro.data.table import atomic_write_bytes, load_table
from tabrepro.evaluation.metrics import compute_metrics
from tabrepro.models.registry import get_model_class
from tabrepro.preprocessing import Preprocessor, TargetEncoder
from tabrepro.provenance import peak_memory_mb, provenance
from tabrepro.seeding import derive_seed
from tabrepro.splits import fold_path, load_split
from tabrepro.tuning import sample_configs, select_best

log = logging.getLogger(__name__)

# The deep models' criterion (validation target loss) serves every model: it is smooth, unlike
# AUROC or accuracy on a few dozen validation rows.
SELECTION_METRIC = {"binary": "nll", "multiclass": "nll", "regression": "mse"}


def _evaluate(model, task: str, X: np.ndarray, y_encoded: np.ndarray, target: TargetEncoder) -> dict[str, float]:
    if task == "regression":
        return compute_metrics(task, target.inverse_transform(y_encoded),
                               y_pred=target.inverse_transform(model.predict(X)))
    return compute_metrics(task, y_encoded, proba=model.predict_proba(X))


def run_job(params: Params, job: Job, *, n_jobs: int = 1, progress: bool = True) -> dict:
    """Run one job and return its result record (see `write_result` for where it goes)."""
    started = time.perf_counter()
    source = params.source_of(job.paper, job.dataset)
    table = load_table(params.processed_dir(source))
    schema = table.schema
    split_file = fold_path(params.split_dir(job.paper, job.dataset), job.fold)
    split = load_split(split_file)
    if len(split.roles) != schema.n_rows:
        raise ValueError(f"{split_file}: {len(split.roles)} rows, but table {source!r} has {schema.n_rows}")

    features = Preprocessor().fit(table.frame, schema, split.train)
    X = features.transform(table.frame)
    target = TargetEncoder().fit(table.frame, schema, split.train)
    y = target.transform(table.frame)
    tr, va, te = split.train, split.val, split.test

    space = params.search_space(job.paper, job.dataset, job.model)
    n_configs = params.n_configs(job.paper, job.dataset, job.model)
    # One candidate set per dataset x model, shared by its folds: folds then differ only in data.
    search_seed = derive_seed(params.seed, job.paper, job.dataset, job.model, "search")
    configs = sample_configs(space, schema.task, n_configs, search_seed)
    model_cls = get_model_class(job.model)
    n_classes = None if schema.task == "regression" else len(schema.target_column.levels)
    selection_metric = SELECTION_METRIC[schema.task]

    fitted, val_scores, val_metrics = [], [], []
    label = f"{job.paper}/{job.dataset}/{job.model}/fold{job.fold}"
    for i, config in enumerate(tqdm(configs, desc=label, unit="config", disable=not progress)):
        model = model_cls(schema.task, config, seed=derive_seed(params.seed, *_names(job), "model", i),
                          n_jobs=n_jobs, n_classes=n_classes)
        model.fit(X[tr], y[tr], X[va], y[va])
        metrics = _evaluate(model, schema.task, X[va], y[va], target)
        fitted.append(model)
        val_metrics.append(metrics)
        val_scores.append(metrics[selection_metric])
    best = select_best(val_scores, selection_metric)
    test_metrics = _evaluate(fitted[best], schema.task, X[te], y[te], target)

    return {
        "paper": job.paper,
        "dataset": job.dataset,
        "source": source,
        "model": job.model,
        "fold": job.fold,
        "task": schema.task,
        "metrics": {"test": test_metrics, "val": val_metrics[best]},
        "selected_config": configs[best],
        "selection": {"metric": selection_metric, "n_configs": len(configs), "best_index": best,
                      "val_scores": val_scores},
        "seed": params.seed,
        "split": {"protocol": params.dataset_entry(job.paper, job.dataset)["protocol"],
                  "sha256": split.sha256, "file": str(split_file),
                  **{f"n_{k}": v for k, v in split.counts().items()}},
        "profile": params.profile_name,
        "params_digest": params.job_digest(job),
        "wall_time_s": round(time.perf_counter() - started, 3),
        "peak_memory_mb": round(peak_memory_mb(), 1),
        "provenance": provenance(),
    }


def _names(job: Job) -> tuple:
    return (job.paper, job.dataset, job.model, job.fold)


def write_result(result: dict, path: Path) -> None:
    """Atomic write: an interrupted job leaves no metrics.json, so Snakemake reruns it."""
    atomic_write_bytes(path, (json.dumps(result, indent=2, sort_keys=True, default=_jsonable) + "\n").encode())


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
