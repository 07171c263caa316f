"""What many test files share: the repository's path, its params.yaml, small profiles written to a
scratch directory, a scratch copy of the workflow, and a local HTTP server for datasets.

Tests are grouped: unit/ (one piece each, seconds), faults/ (fault injection: hostile servers,
files, parameters and edited records, each probe seconds), workflow/ (the real Snakemake workflow on
tiny data) and live/ (a real Slurm cluster, DVC repository or CUDA device; marked `live` / `cuda`, and
skipped where there is none). Module-level code of a test file may `from conftest import REPO,
...` (pyproject's pytest `pythonpath` puts tests/ on sys.path); tests take the fixtures by name.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from data_server import DataServer, bypass_proxies, shared_datasets_dir

REPO = Path(__file__).resolve().parents[1]
PARAMS_FILE = REPO / "params.yaml"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
# The offline copies of the real dataset files (../shared/datasets or $TABREPRO_SHARED_DATASETS);
# None where this checkout has none, and the tests that need them skip.
SHARED_DATASETS = shared_datasets_dir()

Mutate = Callable[[dict], Any]


def load_script(name: str) -> Any:
    """scripts/NAME.py as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def repo_raw_params() -> dict:
    """A fresh copy of the repository's params.yaml with its experiment profiles (profiles/*.yaml)
    added, as loaded YAML (safe to edit)."""
    from tabrepro.config import read_params_file

    return read_params_file(PARAMS_FILE)


@pytest.fixture(scope="session")
def repo_params():
    """The repository's params.yaml with its default profile (read-only: do not edit `.raw`)."""
    from tabrepro.config import Params

    return Params.from_file(PARAMS_FILE)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with slow tests first, each file's tests in their own order: `make test` hands whole
    files to parallel workers in this order, and a long file started last keeps one worker busy
    while the others sit idle."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
    for item in items:  # the fault-injection suite: `pytest -m faults` runs every probe
        if item.path.parent.name == "faults" or item.path.name in FAULT_PROBE_FILES:
            item.add_marker(pytest.mark.faults)


# Probes of hostile or broken input that live beside the code they probe, not under tests/faults/.
FAULT_PROBE_FILES = frozenset(
    {"test_fetch_trust.py", "test_fetch.py", "test_names.py", "test_resume_faults.py", "test_records.py"}
)


# ------------------------------------------------------------------------------ small profiles
def tiny_profile(
    npt_models: list[str],
    npt_datasets: list[str] | None = None,
    *,
    bishop: dict | None = None,
    description: str = "unit test",
    max_configs: int = 1,
    folds: list[int] | None = None,
    **extra: Any,
) -> dict:
    """A profile entry for params.yaml: the NPT paper's breast cancer (or `npt_datasets`) with
    these models, nothing of BiSHop's unless `bishop` ({"datasets": [...], "models": [...]})."""
    return {
        "description": description,
        "max_configs": max_configs,
        "folds": [0] if folds is None else folds,
        "papers": {
            "npt": {"datasets": npt_datasets or ["breast_cancer"], "models": list(npt_models)},
            "bishop": bishop or {"datasets": [], "models": []},
        },
        **extra,
    }


def write_params(
    root: Path, profile: dict, *, name: str = "tiny", mutate: Mutate | None = None, filename: str = "params.yaml"
) -> Path:
    """The repository's params.yaml with `profile` added as `name` and made active, its data and
    results under `root`, then `mutate(raw)` applied; written to root/filename."""
    raw = repo_raw_params()
    raw["paths"] = {"data": str(root / "data"), "results": str(root / "results")}
    raw["profiles"][name] = profile
    raw["profile"] = name
    if mutate is not None:
        mutate(raw)
    path = root / filename
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture
def tiny_params(tmp_path: Path) -> Callable[..., Path]:
    """`write_params` into the test's tmp_path: `tiny_params(tiny_profile([...]), mutate=...)`."""
    return functools.partial(write_params, tmp_path)


# ------------------------------------------------------------------------------ the workflow
def copy_workflow(dest: Path, mutate: Mutate | None = None, *, with_profiles: bool = False) -> Path:
    """A copy of the workflow (Snakefile, rules, schema; the Slurm profile only if asked) and of
    params.yaml, changed by `mutate(raw)`, in a scratch directory where Snakemake can run."""
    shutil.copy(REPO / "Snakefile", dest / "Snakefile")
    skipped = ("__pycache__",) if with_profiles else ("profiles", "__pycache__")
    shutil.copytree(REPO / "workflow", dest / "workflow", ignore=shutil.ignore_patterns(*skipped))
    raw = repo_raw_params()
    if mutate is not None:
        mutate(raw)
    (dest / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return dest


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """Snakemake of this Python's environment on two cores in `workdir`; the caller checks the result."""
    return subprocess.run(
        [str(SNAKEMAKE), "--cores", "2", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


# ------------------------------------------------------------------------------ data server
@pytest.fixture
def data_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., DataServer]]:
    """Start a DataServer (tests/data_server.py) on a free local port: `data_server(root, ...)`.

    urllib is told to bypass any configured proxy for it; every server started stops at teardown.
    """
    bypass_proxies(monkeypatch)
    with ExitStack() as servers:
        yield lambda root=None, **options: servers.enter_context(DataServer(root, **options))


@pytest.fixture(scope="module")
def shared_data_server() -> Iterator[DataServer]:
    """One DataServer over the offline dataset copies per test module (skips without them)."""
    if SHARED_DATASETS is None:
        pytest.skip("offline dataset copies not found (../shared/datasets or $TABREPRO_SHARED_DATASETS)")
    with pytest.MonkeyPatch.context() as patch:
        bypass_proxies(patch)
        with DataServer(SHARED_DATASETS, max_lifetime=300) as server:
            yield server
