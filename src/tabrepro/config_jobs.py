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

from tabrepro.config import Job, Params, ParamsError
from tabrepro.evaluation.job_predictions import write_predictions
from tabrepro.io import atomic_write
from tabrepro.layout import PREDICTIONS_FILE, RESULT_FILE, WEIGHTS_FILE
from tabrepro.training import (
    KEEP_STATE_ENV,
    REPEAT_FILE,
    STATE_DIR,
    FoldData,
    _drop_state,
    _fit_config,
    _jsonable,
    _mean_metrics,
    _record,
    _repeat_runs,
    _repeats_record,
    load_fold,
    model_outputs,
    outputs_metrics,
    predictions_beside,
    scored_test_rows,
    selection_metric,
    write_result,
)
from tabrepro.tuning import job_configs, select_best, variant_names

__all__ = ["run_config_batch", "run_config_job", "run_repeat", "select_config"]


def run_config_job(
    params: Params, job: Job, config_index: int, out_dir: Path, *, n_jobs: int = 1, keep_state: bool | None = None
) -> dict:
    """Train one configuration (e.g. one NPT variant) and store its validation score.

    Writes predictions.npz (validation and test outputs, no labels), weights.pt and, last,
    result.json. The test outputs are not scored here: `select_config` scores only the winner's.
    Resumable state lives in out_dir/state, which the workflow does not declare as an output; it
    is removed once result.json is written (NPT's is tens of MB and more), unless `keep_state`
    (None: unless the environment sets KEEP_STATE_ENV=1).
    """
    started = time.perf_counter()
    data = load_fold(params, job)
    configs = job_configs(params, job, data.task)
    _check_config_index(params, job, config_index, len(configs))
    return _train_config(params, job, data, configs, config_index, Path(out_dir), n_jobs, started, keep_state)


def run_config_batch(
    params: Params, job: Job, indices: range, *, n_jobs: int = 1, progress: bool = False, keep_state: bool | None = None
) -> dict:
    """Train configurations `indices` one after another (a `train_batch` job); returns its manifest.

    Each configuration writes its own directory as `run_config_job` does. A configuration whose
    result there was written under the same parameters is kept, not retrained, so a batch that
    was interrupted (or re-sized) redoes only what is missing; an interrupted configuration
    resumes from its state file.
    """
    data = load_fold(params, job)
    configs = job_configs(params, job, data.task)
    for index in (indices[0], indices[-1]):
        _check_config_index(params, job, index, len(configs))
    entries = []
    for index in tqdm(indices, desc=f"{job.model} configurations", disable=not progress, unit="config"):
        started = time.perf_counter()
        out_dir = params.config_dir(job, index)
        result = _finished_result(params, job, out_dir, configs[index])
        reused = result is not None
        if result is None:
            result = _train_config(params, job, data, configs, index, out_dir, n_jobs, started, keep_state)
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
        "params_digest": params.job_digest(job),
        "results": entries,
    }


def _check_config_index(params: Params, job: Job, index: int, n_configs: int) -> None:
    if not 0 <= index < n_configs:
        raise ParamsError(
            f"config {index} out of range: {job.model} has {n_configs} configuration(s) "
            f"for {job.paper}/{job.dataset} in profile {params.profile_name!r}"
        )


def _finished_result(params: Params, job: Job, out_dir: Path, config: dict) -> dict | None:
    """The configuration's stored result if it is complete and was written under these parameters."""
    path = out_dir / RESULT_FILE
    if not path.is_file() or not (out_dir / PREDICTIONS_FILE).is_file():
        return None
    result = json.loads(path.read_text())
    same = result.get("params_digest") == params.job_digest(job) and result.get("config") == json.loads(
        json.dumps(config, default=_jsonable)
    )
    if not same or (result.get("weights") and not (out_dir / WEIGHTS_FILE).is_file()):
        return None
    return result


def _train_config(
    params: Params,
    job: Job,
    data: FoldData,
    configs: list[dict],
    index: int,
    out_dir: Path,
    n_jobs: int,
    started: float,
    keep_state: bool | None = None,
) -> dict:
    config = configs[index]
    state = _state_dir(out_dir, params, job, data, config)
    model = _fit_config(params, job, data, index, config, n_jobs=n_jobs, work_dir=state)
    va, te = data.split.val, data.split.test
    val_outputs = model_outputs(model, data.task, data.X[va])
    test_outputs = model_outputs(model, data.task, data.X[te])
    buffer = io.BytesIO()
    np.savez(buffer, val=val_outputs, test=test_outputs)
    atomic_write(out_dir / PREDICTIONS_FILE, buffer.getvalue())
    has_weights = model.save_weights(out_dir / WEIGHTS_FILE)
    variants = variant_names(params.search_space(job.paper, job.dataset, job.model))
    result = {
        **_record(params, job, data, started, n_jobs),
        "config_index": index,
        "variant": variants[index] if variants else None,
        "config": config,
        "metrics": {"val": outputs_metrics(data.task, val_outputs, data.y[va], data.target)},
        "fit_info": model.fit_info_,
        "weights": WEIGHTS_FILE if has_weights else None,
    }
    write_result(result, out_dir / RESULT_FILE)
    if not (os.environ.get(KEEP_STATE_ENV) == "1" if keep_state is None else keep_state):
        _drop_state(state)
    return result


def _state_dir(out_dir: Path, params: Params, job: Job, data: FoldData, config: dict) -> Path:
    """Resumable state, keyed by what the training trajectory depends on.

    A changed configuration, seed, split or state-file format starts from step 0 in a fresh
    directory instead of refusing to resume (or, worse, resuming) from state written for other settings.
    """
    from tabrepro.models.registry import get_model_class

    checkpoint_format = get_model_class(job.model).checkpoint_format
    settings = {"config": config, "seed": params.seed, "split": data.split.sha256, "format": checkpoint_format}
    key = json.dumps(settings, sort_keys=True, default=_jsonable)
    return out_dir / STATE_DIR / hashlib.sha256(key.encode()).hexdigest()[:12]


def _configuration_results(params: Params, job: Job, data: FoldData) -> tuple[list[dict], str, list, int]:
    """Every configuration's stored result, the selection metric, their validation scores and the
    index of the best."""
    digest = params.job_digest(job)
    results = []
    for c in range(params.n_configs(job.paper, job.dataset, job.model)):
        path = params.config_dir(job, c) / RESULT_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: configuration {c} has not run (run its train_batch job first)")
        result = json.loads(path.read_text())
        if result["params_digest"] != digest:
            raise ParamsError(f"{path} was written under different parameters; rerun that configuration")
        results.append(result)
    metric = selection_metric(params, job.paper, data.task)
    val_scores = [r["metrics"]["val"].get(metric) for r in results]
    return results, metric, val_scores, select_best(val_scores, metric)


def run_repeat(params: Params, job: Job, repeat: int, *, n_jobs: int = 1) -> Path:
    """Retrain the chosen configuration with further seed `repeat` alone and leave its small
    result files (test metrics, test outputs) where `select_config` picks them up, so the repeats
    of one job can run side by side (in separate processes or on separate machines, the repeat's
    directory copied back). Returns its metrics file."""
    n_repeats = params.repeats(job.paper, job.dataset, job.model)
    if not 1 <= repeat < n_repeats:
        raise ParamsError(
            f"repeat {repeat}: {job.paper}/{job.dataset}/{job.model} has repeats 1..{n_repeats - 1} "
            f"beside its first run (the protocol's {n_repeats} runs)"
        )
    data = load_fold(params, job)
    results, _, _, best = _configuration_results(params, job, data)
    config = results[best]["config"]
    work_dir = _state_dir(params.config_dir(job, best), params, job, data, config)
    _repeat_runs(params, job, data, best, config, n_jobs=n_jobs, work_dir=work_dir, only=repeat)
    return work_dir / f"repeat{repeat}" / REPEAT_FILE


def select_config(params: Params, job: Job, out_path: Path, *, n_jobs: int = 1) -> dict:
    """Pick the configuration with the best validation score; score its test outputs once.

    With `repeats` > 1 (BiSHop's protocol) the winner is retrained here with further seeds,
    resumably, and the reported test metric is the mean over all its runs. The winner's weights
    and the test rows as each run scored them (`scored_test_rows`) are written beside `out_path`;
    the caller writes the returned result there last.
    """
    started = time.perf_counter()
    data = load_fold(params, job)
    n = params.n_configs(job.paper, job.dataset, job.model)
    results, metric, val_scores, best = _configuration_results(params, job, data)
    chosen_dir = params.config_dir(job, best)
    with np.load(chosen_dir / PREDICTIONS_FILE, allow_pickle=False) as stored:
        test_outputs = stored["test"]
    te = data.split.test
    runs = [(outputs_metrics(data.task, test_outputs, data.y[te], data.target), test_outputs)]
    runs += _repeat_runs(
        params,
        job,
        data,
        best,
        results[best]["config"],
        n_jobs=n_jobs,
        work_dir=_state_dir(chosen_dir, params, job, data, results[best]["config"]),
    )
    test_runs = [metrics for metrics, _ in runs]
    out_path = Path(out_path)
    if results[best].get("weights"):
        atomic_write(out_path.parent / WEIGHTS_FILE, (chosen_dir / WEIGHTS_FILE).read_bytes())
    write_predictions(predictions_beside(out_path), scored_test_rows(data, job.fold, [o for _, o in runs]))
    record = _record(params, job, data, started, n_jobs)
    # The job's cost: its configurations plus this step (which retrains the winner on repeats).
    record["wall_time_s"] = round(record["wall_time_s"] + sum(r["wall_time_s"] for r in results), 3)
    if not (record["provenance"].get("gpu") or {}).get("used"):
        # the configurations computed on a GPU although this step did not: the job as a whole did
        used = [g for r in results if (g := (r.get("provenance") or {}).get("gpu") or {}).get("used")]
        record["provenance"]["gpu"] = used[0] if used else record["provenance"].get("gpu")
    record["peak_memory_mb"] = max(record["peak_memory_mb"], *(r["peak_memory_mb"] for r in results))
    return {
        **record,
        "metrics": {"test": _mean_metrics(test_runs), "val": results[best]["metrics"]["val"]},
        **_repeats_record(test_runs),
        "selected_config": results[best]["config"],
        "selection": {
            "metric": metric,
            "n_configs": n,
            "best_index": best,
            "val_scores": val_scores,
            "variant": results[best].get("variant"),
            "fit_info": results[best].get("fit_info"),
        },
    }
