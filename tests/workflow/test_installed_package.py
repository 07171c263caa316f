"""The installed package works outside a checkout: its schema, dataset registry and cost
calibration are package data, and nothing it runs reads the repository's records/ or workflow/.

pip installs a copy of the package's sources (pyproject.toml, README, LICENSE, src/) into a
folder of its own, without dependencies or build isolation (the test environment has them), and
the commands run from a directory with no repository above it, this Python taking the installed
copy first on its path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, tiny_profile

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package pip-installed from a copy of its sources; returns the install folder."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    target = root / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    done = subprocess.run([*command, "--target", str(target), str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    shutil.rmtree(source)  # the installed copy must not lean on its sources either
    return target


def _tabrepro(installed: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    env.pop("TABREPRO_DATA_DIR", None)
    env.pop("TABREPRO_RESULTS_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "tabrepro", *args], cwd=workdir, capture_output=True, text=True, env=env, timeout=600
    )


def test_validate_plan_and_a_tiny_train_run_from_the_installed_package(installed, tmp_path):
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["paths"] = {"data": "data", "results": "results"}
    raw["profiles"]["tiny"] = tiny_profile(["xgboost"])
    raw["profile"] = "tiny"
    params = workdir / "params.yaml"
    params.write_text(yaml.safe_dump(raw, sort_keys=False))

    probe = subprocess.run(
        [sys.executable, "-c", "import tabrepro; print(tabrepro.__file__)"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(installed)},
    )
    assert probe.stdout.strip().startswith(str(installed)), probe.stdout + probe.stderr
    for name in ("data/params.schema.yaml", "data/datasets.yaml", "data/cost_calibration.json"):
        assert (installed / "tabrepro" / name).is_file(), f"{name} is not installed as package data"

    validated = _tabrepro(installed, workdir, "--params", str(params), "validate")
    assert validated.returncode == 0, validated.stderr
    planned = _tabrepro(installed, workdir, "--params", str(params), "plan")
    assert planned.returncode == 0, planned.stderr
    assert "| npt | breast_cancer | xgboost |" in planned.stdout and "Calibrated on" in planned.stdout
    for step in (["prepare", "breast_cancer"], ["split", "npt", "breast_cancer"]):
        done = _tabrepro(installed, workdir, "--params", str(params), *step)
        assert done.returncode == 0, done.stderr
    trained = _tabrepro(installed, workdir, "--params", str(params), "train", "npt", "breast_cancer", "xgboost", "0")
    assert trained.returncode == 0, trained.stderr
    assert (workdir / "results" / "npt" / "breast_cancer" / "xgboost" / "fold0" / "metrics.json").is_file()
