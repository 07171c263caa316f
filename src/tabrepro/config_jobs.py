"""Jobs of one configuration each (NPT, BiSHop and the other `per_config_jobs` models): train a
batch of configurations, each scored on validation and kept with its predictions; then a
selection job picks the best on validation and scores its test outputs once.

Each configuration's run resumes from its own state directory, keyed by what its trajectory
depends on (configuration, seed, split), so a changed setting starts afresh instead of resuming
from state written for other settings.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tabrepro.config import ParamsError
from tabrepro.evaluation.job_predictions import write_predictions
from tabrepro.io import atomic_write
from tabrepro.job_run import (
    KEEP_STATE_ENV,
    FoldData,
    chosen_test_runs,
    drop_state,
    fit_config,
    job_record,
    jsonable,
    load_fold,
    mean_metrics,
    model_outputs,
    outputs_metrics,
    predictions_beside,
    repeat_runs,
    repeats_record,
    scored_test_rows,
    write_result,
)
from tabrepro.job_spec import JobSpec
from tabrepro.layout import PREDICTIONS_FILE, REPEAT_FILE, RESULT_FILE, STATE_DIR, WEIGHTS_FILE
from tabrepro.models.registry import get_model_class
from tabrepro.tuning import job_configs, select_best, variant_names

__all__ = ["run_config_batch", "run_config_job", "run_repeat", "select_config"]


def run_config_job(
    spec: JobSpec, config_index: int, out_dir: Path, *, n_jobs: int = 1, keep_state: bool | None = None
) -> dict:
    """Train one configuration (e.g. one NPT variant) and store its validation score.

    Writes predictions.npz (validation and test outputs, no labels), weights.pt and, last,
    result.json. The test outputs are not scored here: `select_config` scores only the winner's.
    Resumable state lives in out_dir/state, which the workflow does not declare as an output; it
    is removed once result.json is written (NPT's is tens of MB and more), unless `keep_state`
    (None: unless the environment sets KEEP_STATE_ENV=1).
    """
    started = time.perf_counter()
    data = load_fold(spec)
    configs = job_configs(spec, data.task)
    _check_config_index(spec, config_index, len(configs))
    return _train_config(spec, data, configs, config_index, Path(out_dir), n_jobs, started, keep_state)


def run_config_batch(
    spec: JobSpec, indices: range, *, n_jobs: int = 1, progress: bool = False, keep_state: bool | None = None
) -> dict:
    """Train configurations `indices` one after another (a `train_batch` job); returns its manifest.

    Each configuration writes its own directory as `run_config_job` does. A configuration whose
    result there was written under the same parameters is kept, not retrained, so a batch that
    was interrupted (or re-sized) redoes only what is missing; an interrupted configuration
    resumes from its state file.
    """
    job = spec.job
    data = load_fold(spec)
    configs = job_configs(spec, data.task)
    for index in (indices[0], indices[-1]):
        _check_config_index(spec, index, len(configs))
    entries = []
    for index in tqdm(indices, desc=f"{job.model} configurations", disable=not progress, unit="config"):
        started = time.perf_counter()
        out_dir = spec.config_dir(index)
        result = _finished_result(spec, out_dir, configs[index])
        reused = result is not None
        if result is None:
            result = _train_config(spec, data, configs, index, out_dir, n_jobs, started, keep_state)
        entries.append(
            {
                "config_index": index,
                "variant": result.get("variant"),
                "reused": reused,
                "wall_time_s": result["wall_time_s"],
                "val": result["metrics"]["val"],
                "result": str(out_dir / RESULT_FILE),
            }
        )
    return {
        "paper": job.paper,
        "dataset": job.dataset,
        "model": job.model,
        "fold": job.fold,
        "configs": [indices[0], indices[-1] + 1],
        "params_digest": spec.params_digest,
        "results": entries,
    }


def _check_config_index(spec: JobSpec, index: int, n_configs: int) -> None:
    if not 0 <= index < n_configs:
        job = spec.job
        raise ParamsError(
            f"config {index} out of range: {job.model} has {n_configs} configuration(s) "
            f"for {job.paper}/{job.dataset} in profile {spec.profile!r}"
        )


def _finished_result(spec: JobSpec, out_dir: Path, config: dict) -> dict | None:
    """The configuration's stored result if it is complete and was written under these parameters."""
    path = out_dir / RESULT_FILE
    if not path.is_file() or not (out_dir / PREDICTIONS_FILE).is_file():
        return None
    result = json.loads(path.read_text())
    same = result.get("params_digest") == spec.params_digest and result.get("config") == json.loads(
        json.dumps(config, default=jsonable)
    )
    if not same or (result.get("weights") and not (out_dir / WEIGHTS_FILE).is_file()):
        return None
    return result


def _train_config(
    spec: JobSpec,
    data: FoldData,
    configs: list[dict],
    index: int,
    out_dir: Path,
    n_jobs: int,
    started: float,
    keep_state: bool | None = None,
) -> dict:
    config = configs[index]
    state = _state_dir(out_dir, spec, data, config)
    model = fit_config(spec, data, index, config, n_jobs=n_jobs, work_dir=state)
    va, te = data.split.val, data.split.test
    val_outputs = model_outputs(model, data.task, data.X[va])
    test_outputs = model_outputs(model, data.task, data.X[te])
    buffer = io.BytesIO()
    np.savez(buffer, val=val_outputs, test=test_outputs)
    atomic_write(out_dir / PREDICTIONS_FILE, buffer.getvalue())
    has_weights = model.save_weights(out_dir / WEIGHTS_FILE)
    variants = variant_names(spec.search_space)
    result = {
        **job_record(spec, data, started, n_jobs),
        "config_index": index,
        "variant": variants[index] if variants else None,
        "config": config,
        "metrics": {"val": outputs_metrics(data.task, val_outputs, data.y[va], data.target)},
        "fit_info": model.fit_info_,
        "weights": WEIGHTS_FILE if has_weights else None,
    }
    write_result(result, out_dir / RESULT_FILE)
    if not (os.environ.get(KEEP_STATE_ENV) == "1" if keep_state is None else keep_state):
        drop_state(state)
    return result


def _state_dir(out_dir: Path, spec: JobSpec, data: FoldData, config: dict) -> Path:
    """Resumable state, keyed by what the training trajectory depends on.

    A changed configuration, seed, split or state-file format starts from step 0 in a fresh
    directory instead of refusing to resume (or, worse, resuming) from state written for other settings.
    """
    checkpoint_format = get_model_class(spec.job.model).checkpoint_format
    settings = {"config": config, "seed": spec.seed, "split": data.split.sha256, "format": checkpoint_format}
    key = json.dumps(settings, sort_keys=True, default=jsonable)
    return out_dir / STATE_DIR / hashlib.sha256(key.encode()).hexdigest()[:12]


def _configuration_results(spec: JobSpec, data: FoldData) -> tuple[list[dict], str, list, int]:
    """Every configuration's stored result, the selection metric, their validation scores and the
    index of the best."""
    results = []
    for c in range(spec.n_configs):
        path = spec.config_dir(c) / RESULT_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: configuration {c} has not run (run its train_batch job first)")
        result = json.loads(path.read_text())
        if result["params_digest"] != spec.params_digest:
            raise ParamsError(f"{path} was written under different parameters; rerun that configuration")
        results.append(result)
    metric = spec.selection_metrics[data.task]
    val_scores = [r["metrics"]["val"].get(metric) for r in results]
    return results, metric, val_scores, select_best(val_scores, metric)


def run_repeat(spec: JobSpec, repeat: int, *, n_jobs: int = 1) -> Path:
    """Retrain the chosen configuration with further seed `repeat` alone and leave its small
    result files (test metrics, test outputs) where `select_config` picks them up, so the repeats
    of one job can run side by side (in separate processes or on separate machines, the repeat's
    directory copied back). Returns its metrics file."""
    job, n_repeats = spec.job, spec.repeats
    if not 1 <= repeat < n_repeats:
        raise ParamsError(
            f"repeat {repeat}: {job.paper}/{job.dataset}/{job.model} has repeats 1..{n_repeats - 1} "
            f"beside its first run (the protocol's {n_repeats} runs)"
        )
    data = load_fold(spec)
    results, _, _, best = _configuration_results(spec, data)
    config = results[best]["config"]
    work_dir = _state_dir(spec.config_dir(best), spec, data, config)
    repeat_runs(spec, data, best, config, n_jobs=n_jobs, work_dir=work_dir, only=repeat)
    return work_dir / f"repeat{repeat}" / REPEAT_FILE


def select_config(spec: JobSpec, out_path: Path, *, n_jobs: int = 1) -> dict:
    """Pick the configuration with the best validation score; score its test outputs once.

    With `repeats` > 1 (BiSHop's protocol) the winner is retrained here with further seeds,
    resumably, and the reported test metric is the mean over all its runs. The winner's weights
    and the test rows as each run scored them (`scored_test_rows`) are written beside `out_path`;
    the caller writes the returned result there last.
    """
    started = time.perf_counter()
    data = load_fold(spec)
    results, metric, val_scores, best = _configuration_results(spec, data)
    chosen_dir = spec.config_dir(best)
    with np.load(chosen_dir / PREDICTIONS_FILE, allow_pickle=False) as stored:
        test_outputs = stored["test"]
    config = results[best]["config"]
    work_dir = _state_dir(chosen_dir, spec, data, config)
    runs = chosen_test_runs(spec, data, best, config, test_outputs, n_jobs=n_jobs, work_dir=work_dir)
    test_runs = [metrics for metrics, _ in runs]
    out_path = Path(out_path)
    if results[best].get("weights"):
        atomic_write(out_path.parent / WEIGHTS_FILE, (chosen_dir / WEIGHTS_FILE).read_bytes())
    write_predictions(predictions_beside(out_path), scored_test_rows(data, spec.job.fold, [o for _, o in runs]))
    record = job_record(spec, data, started, n_jobs)
    # The job's cost: its configurations plus this step (which retrains the winner on repeats).
    record["wall_time_s"] = round(record["wall_time_s"] + sum(r["wall_time_s"] for r in results), 3)
    if not (record["provenance"].get("gpu") or {}).get("used"):
        # the configurations computed on a GPU although this step did not: the job as a whole did
        used = [g for r in results if (g := (r.get("provenance") or {}).get("gpu") or {}).get("used")]
        record["provenance"]["gpu"] = used[0] if used else record["provenance"].get("gpu")
    record["peak_memory_mb"] = max(record["peak_memory_mb"], *(r["peak_memory_mb"] for r in results))
    return {
        **record,
        "metrics": {"test": mean_metrics(test_runs), "val": results[best]["metrics"]["val"]},
        **repeats_record(test_runs),
        "selected_config": config,
        "selection": {
            "metric": metric,
            "n_configs": spec.n_configs,
            "best_index": best,
            "val_scores": val_scores,
            "variant": results[best].get("variant"),
            "fit_info": results[best].get("fit_info"),
        },
    }
