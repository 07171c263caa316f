"""Per-configuration jobs (NPT variants) and their selection, without Snakemake."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import tiny_profile
from conftest import write_params as write_profile
from tabrepro.cli import main
from tabrepro.config import Job, Params
from tabrepro.config_jobs import run_config_batch, run_config_job, select_config
from tabrepro.evaluation import prediction_spread
from tabrepro.evaluation.job_predictions import read_predictions
from tabrepro.job_spec import resolve_job
from tabrepro.splits import fold_path, load_split
from tabrepro.training import run_job


def _assert_recomputed(recomputed: list[dict] | dict, recorded: list[dict] | dict) -> None:
    """Metrics recomputed from a predictions file equal the recorded ones to float32 rounding."""
    if isinstance(recorded, dict):
        recomputed, recorded = [recomputed], [recorded]
    assert len(recomputed) == len(recorded)
    for again, run in zip(recomputed, recorded, strict=True):
        assert again.keys() == run.keys()
        for metric, value in run.items():
            assert again[metric] == pytest.approx(value, rel=1e-5, abs=1e-6), metric


def write_params(tmp_path: Path, seed: int = 0, name: str = "params.yaml") -> Path:
    """Profile `tiny`: a tiny NPT (two variants) and k-NN on breast cancer, fold 0."""
    profile = tiny_profile(
        ["npt", "knn"],
        max_configs=2,
        model_overrides={
            "npt": {
                "max_configs": 2,
                "params": {
                    "embed_dim": 8,
                    "n_layers": 2,
                    "n_heads": 2,
                    "max_steps": 6,
                    "eval_every_epochs": 2,
                    "checkpoint_every_steps": 3,
                },
            }
        },
    )
    return write_profile(tmp_path, profile, mutate=lambda raw: raw.update(seed=seed), filename=name)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("training")
    params_file = write_params(tmp_path)
    for command in (["prepare", "breast_cancer"], ["split", "npt", "breast_cancer"]):
        assert main(["--params", str(params_file), "--quiet", *command]) == 0
    params = Params.from_file(params_file)
    job = Job("npt", "breast_cancer", "npt", 0)
    results = [run_config_job(resolve_job(params, job), c, params.config_dir(job, c)) for c in range(2)]
    return tmp_path, params_file, params, job, results


def test_each_configuration_job_stores_validation_scores_predictions_and_weights(prepared):
    _, _, params, job, results = prepared
    for c, result in enumerate(results):
        out = params.config_dir(job, c)
        assert result["variant"] == ["vanilla", "layers16"][c]
        assert "test" not in result["metrics"]  # test outputs are stored, never scored here
        assert json.loads((out / "result.json").read_text())["metrics"] == result["metrics"]
        with np.load(out / "predictions.npz", allow_pickle=False) as stored:
            assert stored["val"].shape == (result["split"]["n_val"], 2)
            assert stored["test"].shape == (result["split"]["n_test"], 2)
        assert (out / "weights.pt").stat().st_size > 0 and not (out / "state").exists()  # dropped once done


def test_selection_uses_validation_only_and_scores_the_winner_once(prepared):
    _, _, params, job, results = prepared
    out = params.job_dir(job) / "metrics.json"
    chosen = select_config(resolve_job(params, job), out)
    kept = read_predictions(params.layout.job_test_predictions.path(job))  # beside the result
    _assert_recomputed(kept.metrics(), chosen["metrics"]["test"])
    val_nll = [r["metrics"]["val"]["nll"] for r in results]
    assert chosen["selection"]["best_index"] == int(np.argmin(val_nll))
    assert chosen["metrics"]["val"] == results[chosen["selection"]["best_index"]]["metrics"]["val"]
    assert 0.5 < chosen["metrics"]["test"]["auroc"] <= 1.0
    winner = params.config_dir(job, chosen["selection"]["best_index"])
    assert (out.parent / "weights.pt").read_bytes() == (winner / "weights.pt").read_bytes()
    assert chosen["wall_time_s"] >= sum(r["wall_time_s"] for r in results)
    assert "test_repeats" not in chosen  # the NPT protocol has no repeats


def test_selection_names_the_gpu_its_configurations_computed_on(prepared, tmp_path):
    """The select step itself never touches the GPU; a job whose configurations trained on one is
    still a GPU job (the compute plan calibrates GPU-hours on such jobs)."""
    _, _, params, job, _ = prepared
    spec = resolve_job(params, job)
    path = params.config_dir(job, 1) / "result.json"
    original = path.read_bytes()
    result = json.loads(original)
    result["provenance"]["gpu"] = {"used": True, "name": "Test GPU"}
    try:
        path.write_text(json.dumps(result))
        chosen = select_config(spec, tmp_path / "metrics.json")
        assert chosen["provenance"]["gpu"] == {"used": True, "name": "Test GPU"}
    finally:
        path.write_bytes(original)
    assert not (select_config(spec, tmp_path / "metrics.json")["provenance"]["gpu"] or {}).get("used")


def test_a_finished_configuration_resumes_at_its_last_step_with_identical_weights(prepared):
    """Its state is dropped once its result is written; kept when asked (keep_state), a rerun
    resumes at the last step and gives the same weights."""
    _, _, params, job, results = prepared
    out = params.config_dir(job, 0)
    before = (out / "weights.pt").read_bytes()
    spec = resolve_job(params, job)
    kept = run_config_job(spec, 0, out, keep_state=True)
    assert kept["fit_info"]["resumed_from"] is None  # trained afresh: the first run dropped its state
    assert len(list((out / "state").glob("*/state.pt"))) == 1
    again = run_config_job(spec, 0, out)
    assert again["fit_info"]["resumed_from"] == results[0]["fit_info"]["steps"]
    assert (out / "weights.pt").read_bytes() == before
    assert again["metrics"] == results[0]["metrics"] == kept["metrics"]
    assert not (out / "state").exists()


def test_a_batch_keeps_finished_configurations_and_trains_the_rest_as_single_jobs_would(prepared, tmp_path):
    """A train_batch job: configuration 0 finished earlier is kept (not retrained); configuration 1,
    whose directory is gone, is trained again to the same scores and bytes as its own job gave."""
    _, _, params, job, results = prepared
    redo = params.config_dir(job, 1)
    weights = (redo / "weights.pt").read_bytes()
    kept_at = (params.config_dir(job, 0) / "result.json").stat().st_mtime_ns
    parked = tmp_path / "config1"
    redo.rename(parked)
    try:
        manifest = run_config_batch(resolve_job(params, job), range(2))
        assert [e["reused"] for e in manifest["results"]] == [True, False]
        assert [e["val"] for e in manifest["results"]] == [r["metrics"]["val"] for r in results]
        assert (params.config_dir(job, 0) / "result.json").stat().st_mtime_ns == kept_at
        assert (redo / "weights.pt").read_bytes() == weights
        assert manifest["configs"] == [0, 2] and manifest["params_digest"] == params.job_digest(job)
    finally:
        if redo.exists():
            import shutil

            shutil.rmtree(redo)
        parked.rename(redo)


def test_a_batch_retrains_configurations_written_under_other_parameters(prepared):
    tmp_path, _, _, job, _ = prepared
    other = Params.from_file(write_params(tmp_path, seed=1, name="reseeded-batch.yaml"))
    other_dir = other.config_dir(job, 0)
    assert other_dir == Params.from_file(write_params(tmp_path)).config_dir(job, 0)  # same directory
    before = json.loads((other_dir / "result.json").read_text())
    manifest = run_config_batch(resolve_job(other, job), range(1))
    assert manifest["results"][0]["reused"] is False
    after = json.loads((other_dir / "result.json").read_text())
    assert after["params_digest"] == other.job_digest(job) != before["params_digest"]
    # put the seed-0 result back for the tests that follow
    original = Params.from_file(write_params(tmp_path))
    assert run_config_batch(resolve_job(original, job), range(1))["results"][0]["reused"] is False


def test_selection_refuses_results_written_under_other_parameters(prepared):
    tmp_path, _, _, job, _ = prepared
    other = Params.from_file(write_params(tmp_path, seed=1, name="reseeded.yaml"))
    with pytest.raises(ValueError, match="written under different parameters"):
        select_config(resolve_job(other, job), tmp_path / "unused.json")


def test_cli_sends_each_model_kind_to_its_command(prepared, capsys):
    _, params_file, _, _, _ = prepared
    assert main(["--params", str(params_file), "train", "npt", "breast_cancer", "npt", "0"]) == 2
    assert "use `tabrepro train-config`" in capsys.readouterr().err
    assert main(["--params", str(params_file), "select", "npt", "breast_cancer", "knn", "0"]) == 2
    assert "use `tabrepro train`" in capsys.readouterr().err
    assert main(["--params", str(params_file), "train-config", "npt", "breast_cancer", "npt", "0", "7"]) == 2
    assert "config 7 out of range" in capsys.readouterr().err


def test_repeats_retrain_the_chosen_configuration_with_further_seeds_and_average(prepared):
    tmp_path, _, _, _, _ = prepared
    raw = yaml.safe_load(write_params(tmp_path, name="repeats.yaml").read_text())
    raw["protocols"]["npt_cv10"]["repeats"] = 3
    raw["search_spaces"]["baselines"]["random_forest"]["params"]["n_estimators"] = {"choice": [5, 10]}
    params = Params(raw)
    kept = tmp_path / "forest_repeats" / "test_predictions.npz"
    result = run_job(resolve_job(params, Job("npt", "breast_cancer", "random_forest", 0)), predictions_path=kept)
    runs = result["test_repeats"]
    assert len(runs) == 3 and len({run["nll"] for run in runs}) > 1  # different seeds, different forests
    assert result["metrics"]["test"]["nll"] == pytest.approx(np.mean([run["nll"] for run in runs]))
    _assert_recomputed(read_predictions(kept).run_metrics(), runs)  # each seed's run is kept


def test_tuning_keeps_only_the_leading_model_alive_and_scores_the_same_winner(prepared, monkeypatch):
    """A search of 24 forests of 1,000 trees once held every fitted model until the end (20 GB on
    Protein); only the best so far is kept now, and the winner and its test score are unchanged."""
    import gc
    import weakref

    import tabrepro.training as training

    tmp_path, _, _, _, _ = prepared
    raw = yaml.safe_load(write_params(tmp_path, name="leader.yaml").read_text())
    raw["profiles"][raw["profile"]]["max_configs"] = 4
    params = Params(raw)
    spec = resolve_job(params, Job("npt", "breast_cancer", "knn", 0))
    reference = run_job(spec, progress=False)
    alive: list[weakref.ref] = []
    most = 0
    original = training.fit_config

    def tracked(*args, **kwargs):
        nonlocal most
        gc.collect()
        most = max(most, sum(ref() is not None for ref in alive))
        model = original(*args, **kwargs)
        alive.append(weakref.ref(model))
        return model

    monkeypatch.setattr(training, "fit_config", tracked)
    result = run_job(spec, progress=False)
    assert len(alive) == 4 and most <= 1  # before each fit, at most the leader is still alive
    assert result["selection"] == reference["selection"] and result["metrics"] == reference["metrics"]


@pytest.mark.parametrize("stop_at", [1, 3])
def test_a_search_stopped_midway_scores_only_what_it_had_not_and_gives_the_same_result(prepared, monkeypatch, stop_at):
    """A job killed after `stop_at` of its four configurations (a cluster's time limit) goes on
    with the rest when run again, refits the winner if the stopped run had scored it (same seed,
    same forest), and reports what an uninterrupted job reports; its saved scores then go."""
    import tabrepro.training as training

    tmp_path, _, _, _, _ = prepared
    raw = yaml.safe_load(write_params(tmp_path, name=f"stopped{stop_at}.yaml").read_text())
    raw["profiles"][raw["profile"]]["max_configs"] = 4
    raw["search_spaces"]["baselines"]["random_forest"]["params"]["n_estimators"] = {"choice": [5, 10]}
    params = Params(raw)
    spec = resolve_job(params, Job("npt", "breast_cancer", "random_forest", 0))
    reference = run_job(spec, progress=False)
    state = spec.job_dir / training.STATE_DIR
    assert not state.exists()  # an uninterrupted job leaves no saved scores
    original = training.fit_config
    fitted: list[int] = []

    def stopping(spec, data, index, config, **kwargs):
        if len(fitted) == stop_at:
            raise KeyboardInterrupt  # the job is killed while fitting this configuration
        fitted.append(index)
        return original(spec, data, index, config, **kwargs)

    monkeypatch.setattr(training, "fit_config", stopping)
    with pytest.raises(KeyboardInterrupt):
        run_job(spec, progress=False)
    assert len(list(state.glob("tuning/*/config*.json"))) == stop_at

    other = state / training.TUNING_DIR / "0123456789ab" / "config0.json"  # left under other settings
    other.parent.mkdir()
    other.write_text('{"metrics": {}}')
    fitted.clear()
    monkeypatch.setattr(training, "fit_config", lambda *a, **k: fitted.append(a[2]) or original(*a, **k))
    result = run_job(spec, progress=False)
    best = reference["selection"]["best_index"]
    assert fitted == list(range(stop_at, 4)) + ([best] if best < stop_at else [])
    for key in ("metrics", "selection", "selected_config", "test_repeats"):
        assert result.get(key) == reference.get(key), key
    assert not state.exists()


def test_a_knn_job_stopped_in_a_long_prediction_goes_on_with_the_next_piece(prepared, monkeypatch):
    """k-NN predicts a long table in saved pieces (HIGGS: hours): the pieces give what one call
    gives; a job killed after some pieces predicts only the rest when run again (its winner is
    refitted: k-NN's fit stores the rows), reports what an uninterrupted job reports, and its
    saved pieces go with its saved scores."""
    import tabrepro.models.knn as knn
    import tabrepro.training as training
    from tabrepro.models.estimator import EstimatorModel

    _, _, params, _, _ = prepared
    spec = resolve_job(params, Job("npt", "breast_cancer", "knn", 0))
    whole = run_job(spec, progress=False)  # validation and test rows: one piece each
    monkeypatch.setattr(knn, "PIECE_ROWS", 16)
    original = EstimatorModel._predict_proba
    predicted: list[int] = []

    def counting(self, X):
        predicted.append(len(X))
        return original(self, X)

    monkeypatch.setattr(EstimatorModel, "_predict_proba", counting)
    reference = run_job(spec, progress=False)
    for key in ("metrics", "selection", "selected_config"):
        assert reference[key] == whole[key], key
    n_pieces = len(predicted)
    assert n_pieces > 4 and max(predicted) == 16
    state = spec.job_dir / training.STATE_DIR
    assert not state.exists()

    predicted.clear()

    def stopping(self, X):
        if len(predicted) == n_pieces - 3:
            raise KeyboardInterrupt  # killed three pieces before the end (in the test rows)
        return counting(self, X)

    monkeypatch.setattr(EstimatorModel, "_predict_proba", stopping)
    with pytest.raises(KeyboardInterrupt):
        run_job(spec, progress=False)
    assert len(list(state.glob("tuning/*/config*/predictions/proba-*.npy"))) == n_pieces - 3
    predicted.clear()
    monkeypatch.setattr(EstimatorModel, "_predict_proba", counting)
    result = run_job(spec, progress=False)
    assert len(predicted) == 3
    for key in ("metrics", "selection", "selected_config"):
        assert result[key] == reference[key], key
    assert not state.exists()


def test_folds_trained_in_one_process_give_what_their_own_jobs_give(prepared, capsys):
    """train-folds (the workflow's train_folds job) against one run_job per fold: the same
    metrics, choice and split for each fold, though the first fold ran before the second."""
    _, params_file, params, _, _ = prepared
    args = ["--params", str(params_file), "--quiet"]
    assert main([*args, "train-folds", "npt", "breast_cancer", "knn", "--folds", "1", "0"]) == 0
    for fold in (0, 1):
        job = Job("npt", "breast_cancer", "knn", fold)
        together = json.loads(params.layout.job_metrics.path(job).read_text())
        alone = run_job(resolve_job(params, job), progress=False)
        for key in ("metrics", "selected_config", "selection", "split", "params_digest"):
            assert together[key] == json.loads(json.dumps(alone[key])), key
        assert together["peak_memory_mb"] > 0
    assert main([*args, "train-folds", "npt", "breast_cancer", "npt"]) == 2
    assert "use `tabrepro train-batch`" in capsys.readouterr().err
    assert main([*args, "train-folds", "npt", "breast_cancer", "knn", "--folds", "10"]) == 2
    assert "fold 10 out of range" in capsys.readouterr().err


def test_loading_a_fold_hands_back_the_tables_arrow_memory_once_the_table_is_gone(prepared, monkeypatch):
    """The categorical (string) columns live in Arrow's allocator; the job releases its pages only
    after the table is dropped, so they do not sit under a model's training step."""
    import pyarrow as pa

    import tabrepro.job_run as job_run

    _, _, params, job, _ = prepared
    before = pa.total_allocated_bytes()
    held_at_release: list[int] = []
    monkeypatch.setattr(job_run, "release_arrow_memory", lambda: held_at_release.append(pa.total_allocated_bytes()))
    fold = job_run.load_fold(resolve_job(params, job))
    assert held_at_release == [before]
    assert fold.X.shape[0] == len(fold.split.roles)


def test_a_finished_repeat_is_a_small_file_and_is_not_trained_again(prepared, monkeypatch, caplog):
    """The selection step's retraining resumes after its last finished repeat, from a file of a few
    numbers (which can travel between machines) instead of the run's checkpoint."""
    import tabrepro.job_run as job_run

    tmp_path, _, _, _, _ = prepared
    raw = yaml.safe_load(write_params(tmp_path, name="repeat_files.yaml").read_text())
    raw["protocols"]["npt_cv10"]["repeats"] = 3
    raw["search_spaces"]["baselines"]["random_forest"]["params"]["n_estimators"] = {"choice": [5]}
    params = Params(raw)
    spec = resolve_job(params, Job("npt", "breast_cancer", "random_forest", 0))
    data = job_run.load_fold(spec)
    config = {"n_estimators": 5}
    fits = []
    original = job_run.fit_config
    monkeypatch.setattr(job_run, "fit_config", lambda *a, **k: fits.append(k["repeat"]) or original(*a, **k))
    work = tmp_path / "repeat_state"

    def same(runs, other):
        return [m for m, _ in runs] == [m for m, _ in other] and all(
            np.array_equal(np.float32(a), np.float32(b)) for (_, a), (_, b) in zip(runs, other, strict=True)
        )

    first = job_run.repeat_runs(spec, data, 0, config, n_jobs=1, work_dir=work)
    assert fits == [1, 2] and len(first) == 2
    files = ["repeat.json", "repeat.json", "test_outputs.npy", "test_outputs.npy"]
    assert sorted(p.name for p in work.rglob("*") if p.is_file()) == files
    assert same(job_run.repeat_runs(spec, data, 0, config, n_jobs=1, work_dir=work), first)
    assert fits == [1, 2]  # both read back, none trained again

    (work / "repeat2" / "repeat.json").write_text("{not json")
    again = job_run.repeat_runs(spec, data, 0, config, n_jobs=1, work_dir=work)
    assert fits == [1, 2, 2] and same(again, first)  # the same seed retrains to the same forest
    assert "repeat 2 is trained again" in caplog.text

    # a repeat finished without its test outputs kept cannot give the job's predictions: retrained
    (work / "repeat1" / "test_outputs.npy").unlink()
    again = job_run.repeat_runs(spec, data, 0, config, n_jobs=1, work_dir=work)
    assert fits == [1, 2, 2, 1] and same(again, first)
    (work / "repeat1" / "test_outputs.npy").write_bytes(b"garbage")
    again = job_run.repeat_runs(spec, data, 0, config, n_jobs=1, work_dir=work)
    assert fits == [1, 2, 2, 1, 1] and same(again, first)
    assert "not a repeat's test outputs" in caplog.text


def test_a_repeat_run_on_its_own_is_picked_up_by_the_selection(prepared, monkeypatch):
    """`tabrepro repeat` trains one further seed; `select` then reads its file instead of training
    it again, and its mean is the same as when the selection trains every repeat itself."""
    import tabrepro.job_run as job_run

    tmp_path, _, _, _, _ = prepared
    raw = yaml.safe_load(write_params(tmp_path, name="repeat_alone.yaml").read_text())
    raw["protocols"]["npt_cv10"]["repeats"] = 3
    raw["paths"] = {"data": raw["paths"]["data"], "results": str(tmp_path / "repeat_alone_results")}
    params_file = tmp_path / "repeat_alone.yaml"
    params_file.write_text(yaml.safe_dump(raw))
    params = Params.from_file(params_file)
    job = Job("npt", "breast_cancer", "npt", 0)
    spec = resolve_job(params, job)
    for c in range(2):
        run_config_job(spec, c, spec.config_dir(c))
    assert main(["--params", str(params_file), "--quiet", "repeat", "npt", "breast_cancer", "npt", "0", "2"]) == 0
    assert main(["--params", str(params_file), "--quiet", "repeat", "npt", "breast_cancer", "npt", "0", "3"]) == 2
    fits = []
    original = job_run.fit_config
    monkeypatch.setattr(job_run, "fit_config", lambda *a, **k: fits.append(k["repeat"]) or original(*a, **k))
    out = tmp_path / "repeat_alone_metrics.json"
    result = select_config(spec, out)
    assert fits == [1]  # repeat 2 was read from its file
    assert len(result["test_repeats"]) == 3
    # each run's test rows beside the result, repeat 2's from its file: their mean is the result's
    kept = read_predictions(out.with_name("test_predictions.npz"))
    assert kept.n_runs == 3
    _assert_recomputed(kept.run_metrics(), result["test_repeats"])
    for path in (p for p in params.config_dir(job, 0).parent.rglob("repeat.json")):
        path.unlink()
    again = select_config(spec, out)
    assert fits == [1, 1, 2] and again["test_repeats"] == result["test_repeats"]


def test_a_training_job_keeps_its_test_rows_and_they_recompute_its_metrics(prepared):
    """`tabrepro train` writes the test rows as scored beside metrics.json: the split's test rows,
    the fold, labels and probabilities, from which its test metrics recompute and an SE follows."""
    _, params_file, params, _, _ = prepared
    job = Job("npt", "breast_cancer", "knn", 0)
    assert main(["--params", str(params_file), "--quiet", "train", *map(str, job.names())]) == 0
    result = json.loads(params.layout.job_metrics.path(job).read_text())
    path = params.layout.job_test_predictions.path(job)
    assert path.parent == params.layout.job_metrics.path(job).parent
    kept = read_predictions(path)
    split = load_split(fold_path(params.split_dir(job.paper, job.dataset), job.fold))
    assert kept.fold == 0 and kept.task == "binary" and kept.row_id.tolist() == split.test.tolist()
    assert kept.outputs.shape == (1, result["split"]["n_test"], 2)
    assert sorted(np.bincount(kept.y_true).tolist()) == sorted(result["split"]["test_class_counts"].values())
    _assert_recomputed(kept.metrics(), result["metrics"]["test"])
    se, basis = prediction_spread.test_metric_se(path, "nll")
    assert 0 < se < 1 and basis.endswith(f"of {result['split']['n_test']} test rows")


def test_a_multi_fold_job_gives_back_the_test_rows_of_a_fold_it_finished_before_it_was_killed(prepared, monkeypatch):
    """train-folds writes each fold's test rows where its own job would; a fold finished before a
    kill (Snakemake then deletes every output of the job) gives back its predictions with its
    result, untrained. A kept result whose predictions are gone is trained again."""
    import tabrepro.training as training

    _, _, params, _, _ = prepared
    spec = resolve_job(params, Job("npt", "breast_cancer", "knn", 0))
    target = spec.test_predictions_path
    folds = training.run_folds([spec], progress=False)
    first_job, first = next(folds)  # the job is killed after this fold
    written = target.read_bytes()
    _assert_recomputed(read_predictions(target).metrics(), first["metrics"]["test"])
    target.unlink()
    fits = []
    original = training.fit_config
    monkeypatch.setattr(training, "fit_config", lambda *a, **k: fits.append(a[2]) or original(*a, **k))
    assert [result for _, result in training.run_folds([spec], progress=False)] == [first]
    assert fits == [] and target.read_bytes() == written
    assert not (spec.job_dir / training.STATE_DIR).exists()  # kept files go once every fold is out

    folds = training.run_folds([spec], progress=False)
    next(folds)
    (spec.job_dir / training.STATE_DIR / "finished_predictions.npz").unlink()
    assert [result["metrics"] for _, result in training.run_folds([spec], progress=False)] == [first["metrics"]]
    assert fits  # trained again
    _assert_recomputed(read_predictions(target).metrics(), first["metrics"]["test"])


def test_regression_test_rows_are_kept_in_the_targets_units():
    """Models predict on the standardised scale; the file holds what the metrics were computed on."""
    from tabrepro.job_run import FoldData, outputs_metrics, scored_test_rows
    from tabrepro.splits import TEST, Split

    class Standardised:
        mean, scale = 100.0, 4.0

        def inverse_transform(self, y):
            return np.asarray(y, dtype=np.float64) * self.scale + self.mean

    rng = np.random.default_rng(0)
    roles = np.array([0, 1, TEST] * 20, dtype=np.int8)
    y = rng.normal(size=roles.size)
    split = Split(roles)
    data = FoldData("regression", np.zeros((roles.size, 1)), y, Standardised(), split, Path("f"), None, None)
    outputs = y[split.test] + 0.1 * rng.normal(size=split.test.size)
    kept = scored_test_rows(data, 3, [outputs])
    assert kept.fold == 3 and kept.row_id.tolist() == split.test.tolist()
    assert kept.y_true == pytest.approx(y[split.test] * 4 + 100)
    _assert_recomputed(kept.metrics(), outputs_metrics("regression", outputs, y[split.test], data.target))
