"""scripts/run_jobs.py: a profile's jobs through the CLI without Snakemake (the lent GPU machine's way)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import SHARED_DATASETS, load_script, tiny_profile, write_params
from tabrepro.reporting.records import write_manifest

NPT = {"params": {"max_steps": 2, "embed_dim": 16, "n_layers": 2, "checkpoint_every_steps": 1}}


def _run_jobs():
    return load_script("run_jobs").main


@pytest.mark.skipif(SHARED_DATASETS is None, reason="needs the offline dataset copies (../shared/datasets)")
def test_every_job_writes_its_metrics_and_a_second_run_skips_them(tiny_params, tmp_path, capsys):
    """An in-job model (train) and a per-configuration one (train-config per configuration, then
    select) on the embedded breast cancer table; run again, nothing is retrained."""
    params = tiny_params(tiny_profile(["knn", "npt"], model_overrides={"npt": NPT}))
    main = _run_jobs()
    argv = [
        "--params",
        str(params),
        "--profile",
        "tiny",
        "--mirror",
        str(SHARED_DATASETS),
        "--log",
        str(tmp_path / "x"),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "npt-breast_cancer-npt-fold0-config0: ok" in printed and "npt-breast_cancer-npt-fold0-select: ok" in printed
    for model in ("knn", "npt"):
        metrics = json.loads(
            (tmp_path / "results" / "npt" / "breast_cancer" / model / "fold0" / "metrics.json").read_text()
        )
        assert metrics["profile"] == "tiny" and metrics["wall_time_s"] > 0
    assert main(argv) == 0
    assert capsys.readouterr().out.count("done before") == 2


def test_a_dataset_that_cannot_be_had_fails_its_jobs_once_each_and_the_run_goes_on(tiny_params, tmp_path, capsys):
    params = tiny_params(tiny_profile(["knn", "random_forest"]))
    main = _run_jobs()
    assert main(["--params", str(params), "--profile", "tiny", "--job-limit", "0.001", "--log", str(tmp_path)]) == 2
    printed = capsys.readouterr().out
    assert printed.count("fetch-breast_cancer: stopped at its 0.001 s limit") == 1  # tried once, not per job
    assert printed.count("not run (no data)") == 2


def _metrics(root, model, fold):
    path = root / "results" / "npt" / "breast_cancer" / model / f"fold{fold}" / "metrics.json"
    return json.loads(path.read_text())


@pytest.mark.skipif(SHARED_DATASETS is None, reason="needs the offline dataset copies (../shared/datasets)")
def test_a_restored_record_is_not_retrained_and_parallel_jobs_match_one_at_a_time(tmp_path, capsys, monkeypatch):
    """The lent GPU machine's way through a long profile: the record's finished jobs come back,
    the others run two at a time and score exactly as they do one after another."""
    profile = tiny_profile(["knn"], folds=[0, 1, 2])
    main = _run_jobs()

    def run_in(root, *extra):
        root.mkdir()
        params = write_params(root, profile)
        mirror = ["--mirror", str(SHARED_DATASETS)]
        return main(["--params", str(params), "--profile", "tiny", *mirror, "--log", str(root / "logs"), *extra])

    alone = tmp_path / "alone"
    assert run_in(alone) == 0
    job = Path("results") / "npt" / "breast_cancer" / "knn" / "fold0"
    saved = tmp_path / "records" / "runs" / "saved"
    shutil.copytree(alone / job, saved / job)  # as `tabrepro record` lays it out
    write_manifest(saved)  # and seals it: a record without its manifest is refused
    capsys.readouterr()

    monkeypatch.chdir(tmp_path)  # `record --restore` reads records/runs beside the README
    together = tmp_path / "together"
    assert run_in(together, "--restore", "saved", "--parallel", "2") == 0
    printed = capsys.readouterr().out
    assert "npt-breast_cancer-knn-fold0: restored from record saved" in printed
    assert "npt-breast_cancer-knn-fold0: ok" not in printed
    assert _metrics(together, "knn", 0) == _metrics(alone, "knn", 0)
    for fold in (1, 2):
        assert f"npt-breast_cancer-knn-fold{fold}: ok" in printed
        assert _metrics(together, "knn", fold)["metrics"] == _metrics(alone, "knn", fold)["metrics"]


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_parallel_must_be_a_positive_count(value, capsys):
    with pytest.raises(SystemExit) as stopped:
        _run_jobs()(["--profile", "tiny", "--parallel", value])
    assert stopped.value.code == 2 and "--parallel" in capsys.readouterr().err
