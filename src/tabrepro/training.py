"""One job: tune a model on a fold's validation split, score the chosen one once on test.

Selection sees validation rows only; the test rows are scored exactly once, with the configuration
that won on validation. Everything random is seeded from params.yaml's root seed and the job's
names, so a job gives the same result wherever and whenever it runs. Models tuned in one process
(the CPU baselines) run here; those with one job per configuration, in tabrepro.config_jobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tabrepro.config import Job, Params
from tabrepro.data.table import load_table, release_arrow_memory
from tabrepro.errors import InputError
from tabrepro.evaluation.job_predictions import JobPredictions, job_predictions, read_predictions, write_predictions
from tabrepro.evaluation.metrics import compute_metrics
from tabrepro.features import FeatureLayout
from tabrepro.io import atomic_write, recorded_path, remove_stale_temps, set_aside, write_json
from tabrepro.layout import (
    FINISHED_FILE,
    FINISHED_PREDICTIONS_FILE,
    REPEAT_FILE,
    REPEAT_OUTPUTS_FILE,
    STATE_DIR,
    TEST_PREDICTIONS_FILE,
    TUNING_DIR,
)
from tabrepro.models.base import FitContext, TabularModel
from tabrepro.models.registry import get_model_class
from tabrepro.preprocessing import Preprocessor, TargetEncoder
from tabrepro.provenance import peak_memory_mb, provenance, reset_peak_memory
from tabrepro.seeding import derive_seed
from tabrepro.splits import Split, SplitError, fold_path, load_split
from tabrepro.tasks import Task
from tabrepro.tuning import job_configs, select_best

log = logging.getLogger(__name__)

# The deep models' criterion (validation target loss) serves every model: it is smooth, unlike
# AUROC or accuracy on a few dozen validation rows. A paper's `selection_metric` (params.yaml)
# replaces it where the paper's tables were selected otherwise (BiSHop: validation AUROC, R²).
SELECTION_METRIC = {"binary": "nll", "multiclass": "nll", "regression": "mse"}


def selection_metric(params: Params, paper: str, task: str) -> str:
    """The validation metric a paper's configurations are chosen on for a task."""
    return (params.paper(paper).get("selection_metric") or {}).get(task, SELECTION_METRIC[task])


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


def load_fold(params: Params, job: Job) -> FoldData:
    source = params.source_of(job.paper, job.dataset)
    table = load_table(params.processed_dir(source))
    schema = table.schema
    split_file = fold_path(params.split_dir(job.paper, job.dataset), job.fold)
    split = load_split(split_file)
    if len(split.roles) != schema.n_rows:
        raise SplitError(
            f"{split_file}: {len(split.roles)} rows, but table {source!r} has {schema.n_rows}: "
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


def _fit_config(
    params: Params,
    job: Job,
    data: FoldData,
    index: int,
    config: dict,
    *,
    n_jobs: int,
    work_dir: Path | None = None,
    repeat: int = 0,
) -> TabularModel:
    """Fit configuration `index`; repeat r > 0 retrains it with a further seed (see `repeats`).

    A configuration the model or its library refuses becomes a ModelConfigError naming the job,
    the configuration and the library's message, instead of a traceback.
    """
    names = (*job.names(), "model", index) + (("repeat", repeat) if repeat else ())
    tr, va = data.split.train, data.split.val
    try:
        model = get_model_class(job.model)(
            data.task, config, seed=derive_seed(params.seed, *names), n_jobs=n_jobs, n_classes=data.n_classes
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


def _record(params: Params, job: Job, data: FoldData, started: float, n_jobs: int) -> dict:
    """The fields every result file shares: what ran, on which split, under which parameters."""
    return {
        "paper": job.paper,
        "dataset": job.dataset,
        "source": params.source_of(job.paper, job.dataset),
        "model": job.model,
        "fold": job.fold,
        "task": data.task,
        "seed": params.seed,
        "split": {
            "protocol": params.dataset_entry(job.paper, job.dataset)["protocol"],
            "sha256": data.split.sha256,
            "file": recorded_path(data.split_file, params.data_dir),
            **{f"n_{k}": v for k, v in data.split.counts().items()},
            **_test_class_counts(data),
        },
        "profile": params.profile_name,
        "params_digest": params.job_digest(job),
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


def _leads(scores: list[float | None], metric: str) -> bool:
    """Whether the latest score is the best so far (ties go to the earlier one, as in select_best)."""
    try:
        return select_best(scores, metric) == len(scores) - 1
    except ValueError:  # every score so far is NaN
        return False


class ScoredConfigurations:
    """The validation metrics of an in-job search, one small file per configuration as soon as it
    is scored (state/tuning/<key>/ in the job's directory), so that a job stopped mid-search (a
    cluster's time limit, a lost node) goes on with the next configuration instead of the first.
    The key covers what the scores depend on (the job's parameters, its split and its candidate
    list): files written under other settings are never read. The files go once the job is done.
    """

    def __init__(self, params: Params, job: Job, split: Split, configs: list[dict]) -> None:
        key = json.dumps(
            {"params": params.job_digest(job), "split": split.sha256, "configs": configs},
            sort_keys=True,
            default=_jsonable,
        )
        self.root = params.job_dir(job) / STATE_DIR / TUNING_DIR
        self.dir = self.root / hashlib.sha256(key.encode()).hexdigest()[:12]
        remove_stale_temps(self.dir)  # half-written scores of a killed run

    def _path(self, index: int) -> Path:
        return self.dir / f"config{index}.json"

    def work_dir(self, index: int) -> Path:
        """Configuration `index`'s own directory for a model's resumable state (a k-NN's saved
        prediction pieces), under the same key and removed with the scores."""
        return self.dir / f"config{index}"

    def get(self, index: int) -> dict[str, float] | None:
        """Configuration `index`'s saved metrics; None when it has none, or when its file cannot
        be read (then moved aside: that configuration is scored again, the others are kept)."""
        path = self._path(index)
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except ValueError as error:  # not JSON, or not UTF-8
            problem: str | None = f"not a saved score ({_one_line(error)})"
        else:
            problem = _saved_score_problem(saved, index)
        if problem is None:
            return saved["metrics"]
        set_aside(path, problem, f"configuration {index} is scored again; saved scores of the others are kept")
        return None

    def put(self, index: int, config: dict, metrics: dict[str, float]) -> None:
        write_json(self._path(index), {"index": index, "config": config, "metrics": metrics}, default=_jsonable)

    def clear(self) -> None:
        """Remove the saved scores once the job is done: these, and any a stopped run left under
        other settings (of no use now), then the state directory if nothing else lives there."""
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.root.parent.rmdir()
        except OSError:
            pass


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())[:200] or type(error).__name__


def _saved_score_problem(saved: object, index: int) -> str | None:
    """What is wrong with a configuration's saved score as read back, or None if nothing."""
    if not isinstance(saved, dict) or saved.get("index") != index:
        return f"not the saved score of configuration {index}"
    metrics = saved.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        return "a saved score without metrics"
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in metrics.values()):
        return "a saved score whose metrics are not all numbers"  # None: a metric undefined on these rows
    return None


def run_job(
    params: Params, job: Job, *, n_jobs: int = 1, progress: bool = True, predictions_path: Path | None = None
) -> dict:
    """Tune every configuration in this process, score the winner once on test (CPU models).

    With `predictions_path`, the test rows as scored are written there (`scored_test_rows`)
    before the result is returned, so that the metrics.json written after them marks both done.
    Each configuration's validation metrics are kept as it is scored (`ScoredConfigurations`): a
    job stopped mid-search and run again scores only the configurations it had not reached, and
    refits the winner when an earlier run scored it (same seed, same model).
    """
    started = time.perf_counter()
    data = load_fold(params, job)
    configs = job_configs(params, job, data.task)
    chosen_on = selection_metric(params, job.paper, data.task)
    va, te = data.split.val, data.split.test
    scored = ScoredConfigurations(params, job, data.split, configs)

    # Only the leader is kept: 24 forests of 1,000 trees do not fit together. None while the
    # leader is a configuration an earlier, stopped run scored.
    best_so_far: TabularModel | None = None
    val_scores, val_metrics = [], []
    label = f"{job.paper}/{job.dataset}/{job.model}/fold{job.fold}"
    earlier = 0
    for i, config in enumerate(tqdm(configs, desc=label, unit="config", disable=not progress)):
        model = None
        metrics = scored.get(i)
        if metrics is None:
            model = _fit_config(params, job, data, i, config, n_jobs=n_jobs, work_dir=scored.work_dir(i))
            metrics = outputs_metrics(data.task, model_outputs(model, data.task, data.X[va]), data.y[va], data.target)
            scored.put(i, config, metrics)
        else:
            earlier += 1
        val_metrics.append(metrics)
        val_scores.append(metrics.get(chosen_on))  # None (skipped) where undefined, e.g. a class absent
        if _leads(val_scores, chosen_on):
            best_so_far = model
        del model
    if earlier:
        log.info("%s: %d of %d configurations were scored by an earlier, stopped run", label, earlier, len(configs))
    best = select_best(val_scores, chosen_on)  # the last leader: select_best is prefix-consistent
    if best_so_far is None:
        best_so_far = _fit_config(params, job, data, best, configs[best], n_jobs=n_jobs, work_dir=scored.work_dir(best))
    test_outputs = model_outputs(best_so_far, data.task, data.X[te])
    runs = [(outputs_metrics(data.task, test_outputs, data.y[te], data.target), test_outputs)]
    runs += _repeat_runs(params, job, data, best, configs[best], n_jobs=n_jobs)
    test_runs = [metrics for metrics, _ in runs]
    if predictions_path is not None:
        write_predictions(predictions_path, scored_test_rows(data, job.fold, [outputs for _, outputs in runs]))
    scored.clear()
    return {
        **_record(params, job, data, started, n_jobs),
        "metrics": {"test": _mean_metrics(test_runs), "val": val_metrics[best]},
        **_repeats_record(test_runs),
        "selected_config": configs[best],
        "selection": {
            "metric": chosen_on,
            "n_configs": len(configs),
            "best_index": best,
            "val_scores": val_scores,
        },
    }


def run_folds(params: Params, jobs: list[Job], *, n_jobs: int = 1, progress: bool = True) -> Iterator[tuple[Job, dict]]:
    """`run_job` for several folds one after another in this process (a train_folds job), each
    result yielded as it is ready. A fold's result is the one its own job would give (its seeds
    come from its names, not from what ran before it); its peak memory is measured afresh.

    Each fold's test predictions are written where the layout puts them
    (`job_test_predictions`) before its result is yielded; the caller writes its metrics.json.
    Each finished fold's result and predictions are also kept in its state directory
    (`FINISHED_FILE`, `FINISHED_PREDICTIONS_FILE`) until every fold was yielded: Snakemake deletes
    all outputs of a job that was killed, those of the folds it had finished included, and the
    rerun gives those folds back instead of training them again.
    """
    for job in jobs:
        result = _kept_fold(params, job)
        kept_predictions = _kept_fold_path(params, job).with_name(FINISHED_PREDICTIONS_FILE)
        if result is None:
            reset_peak_memory()
            result = run_job(params, job, n_jobs=n_jobs, progress=progress, predictions_path=kept_predictions)
            write_result(result, _kept_fold_path(params, job))
        else:
            log.info(
                "%s/%s/%s fold %d: finished by an earlier, stopped run of this job; not trained again",
                job.paper,
                job.dataset,
                job.model,
                job.fold,
            )
        atomic_write(params.layout.job_test_predictions.path(job), kept_predictions.read_bytes())
        yield job, result
    for job in jobs:
        _drop_kept_fold(params, job)


def _kept_fold_path(params: Params, job: Job) -> Path:
    return params.job_dir(job) / STATE_DIR / FINISHED_FILE


def _kept_fold(params: Params, job: Job) -> dict | None:
    """The result an earlier, stopped run of this train_folds job kept for `job`, if it was
    written under the same parameters and split; an unreadable one is moved aside."""
    path = _kept_fold_path(params, job)
    try:
        result = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as error:
        set_aside(path, f"not a result ({_one_line(error)})", f"fold {job.fold} is trained again")
        return None
    if not (
        isinstance(result, dict) and isinstance(result.get("metrics"), dict) and isinstance(result.get("split"), dict)
    ):
        set_aside(path, "not a result (no metrics or split)", f"fold {job.fold} is trained again")
        return None
    predictions = path.with_name(FINISHED_PREDICTIONS_FILE)
    if not predictions.is_file():
        log.info("%s: kept without its test predictions; fold %d is trained again", path, job.fold)
        return None
    try:
        read_predictions(predictions)
    except InputError as error:
        set_aside(predictions, _one_line(error), f"fold {job.fold} is trained again")
        return None
    split = load_split(fold_path(params.split_dir(job.paper, job.dataset), job.fold))
    same = result.get("params_digest") == params.job_digest(job) and result["split"].get("sha256") == split.sha256
    return result if same and result.get("fold") == job.fold and result.get("model") == job.model else None


def _drop_kept_fold(params: Params, job: Job) -> None:
    _kept_fold_path(params, job).unlink(missing_ok=True)
    _kept_fold_path(params, job).with_name(FINISHED_PREDICTIONS_FILE).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the state directory goes too unless something else lives there
        _kept_fold_path(params, job).parent.rmdir()


def _repeat_runs(
    params: Params,
    job: Job,
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
    for repeat in range(1, params.repeats(job.paper, job.dataset, job.model)):
        if only is not None and repeat != only:
            continue
        state = None if work_dir is None else work_dir / f"repeat{repeat}"
        done = None if state is None else _finished_repeat(state / REPEAT_FILE, repeat)
        if done is not None:
            runs.append(done)
            continue
        model = _fit_config(params, job, data, best, config, n_jobs=n_jobs, work_dir=state, repeat=repeat)
        outputs = model_outputs(model, data.task, data.X[te])
        metrics = outputs_metrics(data.task, outputs, data.y[te], data.target)
        if state is not None:
            # A finished run is its test outputs and a few numbers: kept in place of its state (a
            # checkpoint of BiSHop is ~200 MB), so that the job resumes after it, here or wherever
            # the files are copied. The metrics file goes last: it marks the run finished.
            if os.environ.get(KEEP_STATE_ENV) != "1":
                _drop_state(state)
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
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as error:
        set_aside(path, f"not a repeat result ({_one_line(error)})", f"repeat {repeat} is trained again")
        return None
    test = stored.get("test") if isinstance(stored, dict) else None
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
        problem = f"not a repeat's test outputs ({_one_line(error)})"
        set_aside(outputs_path, problem, f"repeat {repeat} is trained again")
        return None
    return {key: float(value) for key, value in test.items()}, outputs


def _mean_metrics(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([run[key] for run in runs])) for key in runs[0]}


def _repeats_record(runs: list[dict[str, float]]) -> dict:
    """Per-seed test metrics, recorded only when the protocol asks for repeats."""
    return {"test_repeats": runs} if len(runs) > 1 else {}


# ------------------------------------------------------------------ resumable state on disk
# (one job per configuration, NPT's and BiSHop's, is tabrepro.config_jobs)
KEEP_STATE_ENV = "TABREPRO_KEEP_STATE"  # =1: keep finished configurations' state (as --keep-state)


def _drop_state(state: Path) -> None:
    """A finished configuration's resumable state, and the state directory once it is empty."""
    shutil.rmtree(state, ignore_errors=True)
    with contextlib.suppress(OSError):
        state.parent.rmdir()


def write_result(result: dict, path: Path) -> None:
    """Atomic write: an interrupted job leaves no metrics.json, so Snakemake reruns it."""
    write_json(path, result, default=_jsonable)


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
