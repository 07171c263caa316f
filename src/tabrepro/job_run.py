"""What every training job does, however it tunes: load its fold, fit one configuration, score
outputs, retrain the chosen one on the protocol's further seeds, and write the job's record.

Models tuned in one process (tabrepro.training) and those with one job per configuration
(tabrepro.config_jobs) share these pieces, so that both kinds of job seed, score and record a
configuration the same way; neither module imports the other.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tabrepro.data.table import load_table, release_arrow_memory
from tabrepro.errors import InputError, one_line
from tabrepro.evaluation.job_predictions import JobPredictions, job_predictions
from tabrepro.evaluation.metrics import compute_metrics
from tabrepro.features import FeatureLayout
from tabrepro.io import atomic_write, read_state, recorded_path, set_aside, write_json
from tabrepro.job_spec import JobSpec
from tabrepro.layout import REPEAT_FILE, REPEAT_OUTPUTS_FILE, TEST_PREDICTIONS_FILE
from tabrepro.models.base import FitContext, TabularModel
from tabrepro.models.registry import get_model_class
from tabrepro.preprocessing import Preprocessor, TargetEncoder
from tabrepro.provenance import peak_memory_mb, provenance
from tabrepro.seeding import derive_seed
from tabrepro.splits import Split, SplitError, load_split
from tabrepro.tasks import Task

log = logging.getLogger(__name__)

KEEP_STATE_ENV = "TABREPRO_KEEP_STATE"  # =1: keep finished configurations' state (as --keep-state)


@dataclass(frozen=True)
class FoldData:
    """One fold's encoded matrices; every statistic was fitted on the fold's training rows."""

    task: Task
    X: np.ndarray
    y: np.ndarray
    target: TargetEncoder
    split: Split
    split_file: Path
    feature_layout: FeatureLayout  # which columns of X hold which (named) feature
    n_classes: int | None

    def context(self, work_dir: Path | None = None) -> FitContext:
        """What models beyond (X, y) may use: layout, test features (never labels), state dir."""
        return FitContext(feature_layout=self.feature_layout, X_test=self.X[self.split.test], work_dir=work_dir)


def load_fold(spec: JobSpec) -> FoldData:
    """The job's prepared table encoded on its fold's training rows."""
    job = spec.job
    table = load_table(spec.processed_dir)
    schema = table.schema
    split_file = spec.split_file
    split = load_split(split_file)
    if len(split.roles) != schema.n_rows:
        raise SplitError(
            f"{split_file}: {len(split.roles)} rows, but table {spec.source!r} has {schema.n_rows}: "
            f"run `tabrepro split {job.paper} {job.dataset}` again"
        )
    features = Preprocessor().fit(table.frame, schema, split.train)
    target = TargetEncoder().fit(table.frame, schema, split.train)
    n_classes = None if schema.task == "regression" else len(schema.target_column.levels)
    fold = FoldData(
        schema.task,
        features.transform(table.frame),
        target.transform(table.frame),
        target,
        split,
        split_file,
        features.feature_layout,
        n_classes,
    )
    del table  # the encoded matrices are all a job needs from here on
    release_arrow_memory()
    return fold


def model_outputs(model: TabularModel, task: str, X: np.ndarray) -> np.ndarray:
    """Class probabilities, or regression predictions on the standardised scale."""
    return model.predict(X) if task == "regression" else model.predict_proba(X)


def outputs_metrics(task: Task, outputs: np.ndarray, y_encoded: np.ndarray, target: TargetEncoder) -> dict[str, float]:
    """Every metric of `task` for `model_outputs`; regression is scored in the target's units."""
    if task == "regression":
        return compute_metrics(task, target.inverse_transform(y_encoded), y_pred=target.inverse_transform(outputs))
    return compute_metrics(task, y_encoded, proba=outputs)


def scored_test_rows(data: FoldData, fold: int, runs: list[np.ndarray]) -> JobPredictions:
    """The test rows as each run (`model_outputs`) scored them, in the units of the job's metrics."""
    te = data.split.test
    if data.task == "regression":
        truth = data.target.inverse_transform(data.y[te])
        return job_predictions(data.task, fold, te, truth, [data.target.inverse_transform(run) for run in runs])
    return job_predictions(data.task, fold, te, data.y[te], runs)


def predictions_beside(metrics_path: Path) -> Path:
    """Where a job whose metrics.json goes to `metrics_path` writes its test predictions."""
    return Path(metrics_path).with_name(TEST_PREDICTIONS_FILE)


class ModelConfigError(InputError, ValueError):
    """A model or its library refused a configuration: bad input, reported on one line (exit 2)."""


# Exceptions the boosting libraries raise for options they refuse (they derive from neither
# ValueError nor TypeError).
_LIBRARY_ERRORS = ("CatBoostError", "XGBoostError", "LightGBMError")


def _refused_configuration(error: BaseException, config: dict) -> bool:
    """Whether an exception from building or fitting a model is the configuration's fault.

    A boosting library's own error, scikit-learn's parameter validation, or a TypeError /
    ValueError whose message names one of the configuration's keys (libraries write them with
    underscores or spaces). Anything else is treated as a bug and keeps its traceback.
    """
    name = type(error).__name__
    if name in _LIBRARY_ERRORS or name == "InvalidParameterError":
        return True
    if not isinstance(error, (TypeError, ValueError)):
        return False
    message = str(error)
    return any(
        re.search(r"(?<![A-Za-z0-9_])" + re.escape(str(key)).replace("_", "[_ ]") + r"(?![A-Za-z0-9_])", message)
        for key in config
        if len(str(key)) > 1
    )


def fit_config(
    spec: JobSpec,
    data: FoldData,
    index: int,
    config: dict,
    *,
    n_jobs: int,
    work_dir: Path | None = None,
    repeat: int = 0,
) -> TabularModel:
    """Fit configuration `index`; repeat r > 0 retrains it with a further seed (see `repeat_runs`).

    The seed comes from the job's names and the configuration's index alone, so a configuration
    fits the same model in whichever job, process or order it runs. A configuration the model or
    its library refuses becomes a ModelConfigError naming the job, the configuration and the
    library's message, instead of a traceback.
    """
    job = spec.job
    names = (*job.names(), "model", index) + (("repeat", repeat) if repeat else ())
    tr, va = data.split.train, data.split.val
    try:
        model = get_model_class(job.model)(
            data.task, config, seed=derive_seed(spec.seed, *names), n_jobs=n_jobs, n_classes=data.n_classes
        )
        return model.fit(data.X[tr], data.y[tr], data.X[va], data.y[va], context=data.context(work_dir))
    except Exception as error:
        if not _refused_configuration(error, config):
            raise
        message = " ".join(str(error).split())
        raise ModelConfigError(
            f"{job.paper}/{job.dataset}/{job.model} fold {job.fold}: configuration {index} "
            f"{config} was refused: {type(error).__name__}: {message}"
        ) from error


def job_record(spec: JobSpec, data: FoldData, started: float, n_jobs: int) -> dict:
    """The fields every result file shares: what ran, on which split, under which parameters."""
    job = spec.job
    return {
        "paper": job.paper,
        "dataset": job.dataset,
        "source": spec.source,
        "model": job.model,
        "fold": job.fold,
        "task": data.task,
        "seed": spec.seed,
        "split": {
            "protocol": spec.protocol,
            "sha256": data.split.sha256,
            "file": recorded_path(data.split_file, spec.data_dir),
            **{f"n_{k}": v for k, v in data.split.counts().items()},
            **_test_class_counts(data),
        },
        "profile": spec.profile,
        "params_digest": spec.params_digest,
        "wall_time_s": round(time.perf_counter() - started, 3),
        "peak_memory_mb": round(peak_memory_mb(), 1),
        "provenance": provenance(threads=n_jobs),
    }


def _test_class_counts(data: FoldData) -> dict:
    """Test rows per encoded class: what the scorecard's sampling SE of AUROC needs (Hanley–McNeil)."""
    if data.task == "regression":
        return {}
    labels, counts = np.unique(data.y[data.split.test], return_counts=True)
    return {"test_class_counts": {str(int(label)): int(n) for label, n in zip(labels, counts, strict=True)}}


def chosen_test_runs(
    spec: JobSpec,
    data: FoldData,
    best: int,
    config: dict,
    test_outputs: np.ndarray,
    *,
    n_jobs: int,
    work_dir: Path | None = None,
) -> list[tuple[dict[str, float], np.ndarray]]:
    """The chosen configuration's test runs, each as (metrics, outputs): the selected fit's
    `test_outputs` first, then the protocol's further seeds (`repeat_runs`)."""
    first = (outputs_metrics(data.task, test_outputs, data.y[data.split.test], data.target), test_outputs)
    return [first, *repeat_runs(spec, data, best, config, n_jobs=n_jobs, work_dir=work_dir)]


def repeat_runs(
    spec: JobSpec,
    data: FoldData,
    best: int,
    config: dict,
    *,
    n_jobs: int,
    work_dir: Path | None = None,
    only: int | None = None,
) -> list[tuple[dict[str, float], np.ndarray]]:
    """Test metrics and outputs (`model_outputs`) of the chosen configuration retrained with the
    protocol's further seeds (repeat `only` alone when given, so that separate processes can share
    the repeats).

    The configuration was chosen on validation before any of these runs; each is scored once.
    """
    runs = []
    te = data.split.test
    for repeat in range(1, spec.repeats):
        if only is not None and repeat != only:
            continue
        state = None if work_dir is None else work_dir / f"repeat{repeat}"
        done = None if state is None else _finished_repeat(state / REPEAT_FILE, repeat)
        if done is not None:
            runs.append(done)
            continue
        model = fit_config(spec, data, best, config, n_jobs=n_jobs, work_dir=state, repeat=repeat)
        outputs = model_outputs(model, data.task, data.X[te])
        metrics = outputs_metrics(data.task, outputs, data.y[te], data.target)
        if state is not None:
            # A finished run is its test outputs and a few numbers: kept in place of its state (a
            # checkpoint of BiSHop is ~200 MB), so that the job resumes after it, here or wherever
            # the files are copied. The metrics file goes last: it marks the run finished.
            if os.environ.get(KEEP_STATE_ENV) != "1":
                drop_state(state)
            state.mkdir(parents=True, exist_ok=True)
            buffer = io.BytesIO()
            np.save(buffer, np.asarray(outputs, dtype=np.float32), allow_pickle=False)
            atomic_write(state / REPEAT_OUTPUTS_FILE, buffer.getvalue())
            write_json(state / REPEAT_FILE, {"repeat": repeat, "test": metrics})
        runs.append((metrics, outputs))
    return runs


def _finished_repeat(path: Path, repeat: int) -> tuple[dict[str, float], np.ndarray] | None:
    """A finished repeat's test metrics and outputs, or None (not run yet, run before its outputs
    were kept, or an unreadable file set aside): then the repeat is trained again."""
    stored = read_state(path, "a repeat result", f"repeat {repeat} is trained again")
    if stored is None:
        return None
    test = stored.get("test")
    if not isinstance(test, dict) or stored.get("repeat") != repeat:
        set_aside(path, "not a repeat result (no test metrics)", f"repeat {repeat} is trained again")
        return None
    outputs_path = path.with_name(REPEAT_OUTPUTS_FILE)
    try:
        outputs = np.load(outputs_path, allow_pickle=False)
    except FileNotFoundError:
        log.info("%s: finished without its test outputs kept; repeat %d is trained again", path, repeat)
        return None
    except (OSError, ValueError, EOFError) as error:
        problem = f"not a repeat's test outputs ({one_line(error, 200)})"
        set_aside(outputs_path, problem, f"repeat {repeat} is trained again")
        return None
    return {key: float(value) for key, value in test.items()}, outputs


def mean_metrics(runs: list[dict[str, float]]) -> dict[str, float]:
    """The reported test metrics: each metric's mean over the chosen configuration's runs."""
    return {key: float(np.mean([run[key] for run in runs])) for key in runs[0]}


def repeats_record(runs: list[dict[str, float]]) -> dict:
    """Per-seed test metrics, recorded only when the protocol asks for repeats."""
    return {"test_repeats": runs} if len(runs) > 1 else {}


def drop_state(state: Path) -> None:
    """A finished configuration's resumable state, and the state directory once it is empty."""
    shutil.rmtree(state, ignore_errors=True)
    with contextlib.suppress(OSError):
        state.parent.rmdir()


def write_result(result: dict, path: Path) -> None:
    """Atomic write: an interrupted job leaves no metrics.json, so Snakemake reruns it."""
    write_json(path, result, default=jsonable)


def jsonable(value: Any) -> Any:
    """numpy scalars and arrays as JSON takes them: results and saved scores hold model values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
