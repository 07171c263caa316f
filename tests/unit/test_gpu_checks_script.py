"""scripts/gpu_checks.sh, the one call a lent GPU machine gets: on a machine without a GPU every
stage runs, fails with its own one-line reason in its log, and the exit status counts them."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import REPO, SHARED_DATASETS, tiny_profile, write_params


def test_each_stage_runs_logs_and_counts_as_a_failure_without_a_gpu(tmp_path: Path):
    env = {**os.environ, "PYTHON": sys.executable, "STAGES": "versus precision", "PRECISION_ARGS": "--seeds 0"}
    out = tmp_path / "out"
    for name in ("npt", "bishop"):  # stand-ins for the authors' checkouts (plain directories)
        (tmp_path / name).mkdir()
    done = subprocess.run(
        ["bash", "scripts/gpu_checks.sh", str(out), str(tmp_path / "npt"), str(tmp_path / "bishop")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr  # two stages, both failed
    assert (out / "machine.txt").is_file() and "=== test_cuda" not in done.stdout
    for stage in ("versus", "precision"):
        log = (out / f"{stage}.log").read_text()
        assert "--device cuda" in log and "no CUDA device" in log, log
        assert f"=== {stage}: exit 2" in done.stdout


@pytest.mark.skipif(SHARED_DATASETS is None, reason="needs the offline dataset copies (../shared/datasets)")
def test_stage_jobs_runs_the_named_profile_with_its_options_and_packs_the_metrics(tmp_path: Path):
    """JOBS_PROFILE and JOBS_ARGS reach scripts/run_jobs.py: two k-NN folds, two at a time (no
    GPU needed), and both jobs' metrics.json come back in the tarball."""
    params = write_params(tmp_path, tiny_profile(["knn"], folds=[0, 1]))
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "STAGES": "jobs",
        "DATA_MIRROR": str(SHARED_DATASETS),
        "JOBS_PROFILE": "tiny",
        "JOBS_ARGS": f"--params {params} --parallel 2",
    }
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", "scripts/gpu_checks.sh", str(out), str(tmp_path), str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(out / "jobs-results.tar.gz") as packed:
        names = sorted(packed.getnames())
    assert names == [f"results/npt/breast_cancer/knn/fold{fold}/metrics.json" for fold in (0, 1)], names
