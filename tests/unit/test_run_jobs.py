"""scripts/run_jobs.py: a profile's jobs through the CLI without Snakemake (the lent GPU machine's way)."""

from __future__ import annotations

import json

import pytest

from conftest import SHARED_DATASETS, load_script, tiny_profile

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
