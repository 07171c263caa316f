"""scripts/gpu_checks.sh, the one call a lent GPU machine gets: on a machine without a GPU every
stage runs, fails with its own one-line reason in its log, and the exit status counts them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


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
