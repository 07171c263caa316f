"""One job: tune a model on a fold's validation split, score the chosen one once on test.

Selection sees validation rows only; the test rows are scored exactly once, with the configuration
that won on validation. Everything random is seeded from params.yaml's root seed and the job's
names, so a job gives the same result wherever and whenever it runs. Models tuned in one process
(the CPU baselines) run here; those with one job per configuration, in tabrepro.config_jobs; what
both share, in tabrepro.job_run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from tabrepro.errors import InputError, one_line
from tabrepro.evaluation.job_predictions import read_predictions, write_predictions
from tabrepro.io import atomic_write, read_state, remove_stale_temps, set_aside, write_json
from tabrepro.job_run import (
    chosen_test_runs,
    fit_config,
    job_record,
    jsonable,
    load_fold,
    mean_metrics,
    model_outputs,
    outputs_metrics,
    repeats_record,
    scored_test_rows,
    write_result,
)
from tabrepro.job_spec import JobSpec
from tabrepro.layout import FINISHED_FILE, FINISHED_PREDICTIONS_FILE, STATE_DIR, TUNING_DIR
from tabrepro.models.base import TabularModel
from tabrepro.provenance import reset_peak_memory
from tabrepro.splits import Split, load_split
from tabrepro.tuning import job_configs, select_best

log = logging.getLogger(__name__)


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

    def __init__(self, spec: JobSpec, split: Split, configs: list[dict]) -> None:
        key = json.dumps(
            {"params": spec.params_digest, "split": split.sha256, "configs": configs},
            sort_keys=True,
            default=jsonable,
        )
        self.root = spec.job_dir / STATE_DIR / TUNING_DIR
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
        instead = f"configuration {index} is scored again; saved scores of the others are kept"
        saved = read_state(path, "a saved score", instead)
        if saved is None:
            return None
        problem = _saved_score_problem(saved, index)
        if problem is None:
            return saved["metrics"]
        set_aside(path, problem, instead)
        return None

    def put(self, index: int, config: dict, metrics: dict[str, float]) -> None:
        write_json(self._path(index), {"index": index, "config": config, "metrics": metrics}, default=jsonable)

    def clear(self) -> None:
        """Remove the saved scores once the job is done: these, and any a stopped run left under
        other settings (of no use now), then the state directory if nothing else lives there."""
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.root.parent.rmdir()
        except OSError:
            pass


def _saved_score_problem(saved: dict, index: int) -> str | None:
    """What is wrong with a configuration's saved score as read back, or None if nothing."""
    if saved.get("index") != index:
        return f"not the saved score of configuration {index}"
    metrics = saved.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        return "a saved score without metrics"
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in metrics.values()):
        return "a saved score whose metrics are not all numbers"  # None: a metric undefined on these rows
    return None


def run_job(spec: JobSpec, *, n_jobs: int = 1, progress: bool = True, predictions_path: Path | None = None) -> dict:
    """Tune every configuration in this process, score the winner once on test (CPU models).

    With `predictions_path`, the test rows as scored are written there (`scored_test_rows`)
    before the result is returned, so that the metrics.json written after them marks both done.
    Each configuration's validation metrics are kept as it is scored (`ScoredConfigurations`): a
    job stopped mid-search and run again scores only the configurations it had not reached, and
    refits the winner when an earlier run scored it (same seed, same model).
    """
    job = spec.job
    started = time.perf_counter()
    data = load_fold(spec)
    configs = job_configs(spec, data.task)
    chosen_on = spec.selection_metrics[data.task]
    va, te = data.split.val, data.split.test
    scored = ScoredConfigurations(spec, data.split, configs)

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
            model = fit_config(spec, data, i, config, n_jobs=n_jobs, work_dir=scored.work_dir(i))
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
        best_so_far = fit_config(spec, data, best, configs[best], n_jobs=n_jobs, work_dir=scored.work_dir(best))
    test_outputs = model_outputs(best_so_far, data.task, data.X[te])
    runs = chosen_test_runs(spec, data, best, configs[best], test_outputs, n_jobs=n_jobs)
    test_runs = [metrics for metrics, _ in runs]
    if predictions_path is not None:
        write_predictions(predictions_path, scored_test_rows(data, job.fold, [outputs for _, outputs in runs]))
    scored.clear()
    return {
        **job_record(spec, data, started, n_jobs),
        "metrics": {"test": mean_metrics(test_runs), "val": val_metrics[best]},
        **repeats_record(test_runs),
        "selected_config": configs[best],
        "selection": {
            "metric": chosen_on,
            "n_configs": len(configs),
            "best_index": best,
            "val_scores": val_scores,
        },
    }


def run_folds(specs: list[JobSpec], *, n_jobs: int = 1, progress: bool = True) -> Iterator[tuple[JobSpec, dict]]:
    """`run_job` for several folds one after another in this process (a train_folds job), each
    result yielded as it is ready. A fold's result is the one its own job would give (its seeds
    come from its names, not from what ran before it); its peak memory is measured afresh.

    Each fold's test predictions are written where the layout puts them (the spec's
    `test_predictions_path`) before its result is yielded; the caller writes its metrics.json.
    Each finished fold's result and predictions are also kept in its state directory
    (`FINISHED_FILE`, `FINISHED_PREDICTIONS_FILE`) until every fold was yielded: Snakemake deletes
    all outputs of a job that was killed, those of the folds it had finished included, and the
    rerun gives those folds back instead of training them again.
    """
    for spec in specs:
        result = _kept_fold(spec)
        kept_predictions = _kept_fold_path(spec).with_name(FINISHED_PREDICTIONS_FILE)
        if result is None:
            reset_peak_memory()
            result = run_job(spec, n_jobs=n_jobs, progress=progress, predictions_path=kept_predictions)
            write_result(result, _kept_fold_path(spec))
        else:
            log.info(
                "%s/%s/%s fold %d: finished by an earlier, stopped run of this job; not trained again",
                *spec.job.names(),
            )
        atomic_write(spec.test_predictions_path, kept_predictions.read_bytes())
        yield spec, result
    for spec in specs:
        _drop_kept_fold(spec)


def _kept_fold_path(spec: JobSpec) -> Path:
    return spec.job_dir / STATE_DIR / FINISHED_FILE


def _kept_fold(spec: JobSpec) -> dict | None:
    """The result an earlier, stopped run of this train_folds job kept for its fold, if it was
    written under the same parameters and split; an unreadable one is moved aside."""
    job = spec.job
    path = _kept_fold_path(spec)
    result = read_state(path, "a result", f"fold {job.fold} is trained again")
    if result is None:
        return None
    if not (isinstance(result.get("metrics"), dict) and isinstance(result.get("split"), dict)):
        set_aside(path, "not a result (no metrics or split)", f"fold {job.fold} is trained again")
        return None
    predictions = path.with_name(FINISHED_PREDICTIONS_FILE)
    if not predictions.is_file():
        log.info("%s: kept without its test predictions; fold %d is trained again", path, job.fold)
        return None
    try:
        read_predictions(predictions)
    except InputError as error:
        set_aside(predictions, one_line(error, 200), f"fold {job.fold} is trained again")
        return None
    split = load_split(spec.split_file)
    same = result.get("params_digest") == spec.params_digest and result["split"].get("sha256") == split.sha256
    return result if same and result.get("fold") == job.fold and result.get("model") == job.model else None


def _drop_kept_fold(spec: JobSpec) -> None:
    _kept_fold_path(spec).unlink(missing_ok=True)
    _kept_fold_path(spec).with_name(FINISHED_PREDICTIONS_FILE).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the state directory goes too unless something else lives there
        _kept_fold_path(spec).parent.rmdir()
