"""A job resolved once (tabrepro.job_spec): what Params says, fixed, and the training modules'
seam (tabrepro.job_run) kept free of private imports."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import tiny_profile
from tabrepro.config import Job, Params
from tabrepro.job_spec import JobSpec, resolve_job, selection_metric
from tabrepro.seeding import derive_seed
from tabrepro.splits import fold_path
from tabrepro.tasks import TASKS
from tabrepro.tuning import job_configs, sample_configs

SRC = Path(__file__).resolve().parents[2] / "src" / "tabrepro"
JOBS = (
    Job("npt", "breast_cancer", "knn", 1),
    Job("npt", "breast_cancer", "npt", 0),
    Job("bishop", "qsar", "xgboost", 0),  # a paper with its own selection metric and repeats
)


@pytest.fixture
def params(tiny_params) -> Params:
    """Two papers, a capped budget and a model override with forced values: every field differs
    from the defaults somewhere."""
    profile = tiny_profile(
        ["knn", "npt"],
        bishop={"datasets": ["qsar"], "models": ["xgboost"]},
        max_configs=3,
        folds=[0, 1],
        model_overrides={"npt": {"max_configs": 2, "params": {"embed_dim": 8}}},
    )
    return Params.from_file(tiny_params(profile))


@pytest.mark.parametrize("job", JOBS, ids=lambda job: f"{job.paper}-{job.model}")
def test_resolving_gives_what_params_says(params, job):
    spec = resolve_job(params, job)
    assert spec.job == job
    assert spec.seed == params.seed
    assert spec.profile == params.profile_name == "tiny"
    assert spec.source == params.source_of(job.paper, job.dataset)
    assert spec.protocol == params.dataset_entry(job.paper, job.dataset)["protocol"]
    assert spec.search_space == params.search_space(job.paper, job.dataset, job.model)
    assert spec.n_configs == params.n_configs(job.paper, job.dataset, job.model)
    assert spec.repeats == params.repeats(job.paper, job.dataset, job.model)
    assert dict(spec.selection_metrics) == {task: selection_metric(params, job.paper, task) for task in TASKS}
    assert spec.params_digest == params.job_digest(job)
    assert spec.data_dir == params.data_dir
    assert spec.processed_dir == params.processed_dir(spec.source)
    assert spec.split_file == fold_path(params.split_dir(job.paper, job.dataset), job.fold)
    assert spec.job_dir == params.job_dir(job)
    assert spec.metrics_path == params.layout.job_metrics.path(job)
    assert spec.test_predictions_path == params.layout.job_test_predictions.path(job)
    assert [spec.config_dir(c) for c in (0, 3, 12)] == [params.config_dir(job, c) for c in (0, 3, 12)]


def test_the_profile_reaches_the_spec(params):
    npt = resolve_job(params, JOBS[1])
    assert npt.n_configs == 2 and npt.search_space["forced"] == {"embed_dim": 8}
    assert resolve_job(params, JOBS[0]).n_configs == 3
    bishop = resolve_job(params, JOBS[2])
    assert bishop.selection_metrics["binary"] == "auroc" and bishop.repeats > 1


def test_the_spec_draws_the_candidates_params_did(params):
    for job in JOBS:
        task = "binary"  # breast cancer and qsar
        seed = derive_seed(params.seed, job.paper, job.dataset, job.model, "search")
        space, n = params.search_space(job.paper, job.dataset, job.model), params.n_configs(*job.names()[:3])
        assert job_configs(resolve_job(params, job), task) == sample_configs(space, task, n, seed)


def test_the_spec_cannot_be_changed(params):
    spec = resolve_job(params, JOBS[1])
    for field in dataclasses.fields(JobSpec):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(spec, field.name, getattr(spec, field.name))
    with pytest.raises(TypeError):
        spec.search_space["n_configs"] = 99  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.selection_metrics["binary"] = "auroc"  # type: ignore[index]
    assert resolve_job(params, JOBS[1]) == spec
    # its own copy: Params's nested data, changed afterwards, does not reach the spec
    params.search_space("npt", "breast_cancer", "npt")["params"]["n_layers"] = 99
    assert spec.search_space["params"].get("n_layers") != 99


def _private_imports(path: Path) -> list[str]:
    """Underscore names `path` takes from other tabrepro modules, by import or by attribute."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("tabrepro")):
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
            modules |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name.startswith("tabrepro")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id in modules:
                found.append(f"{node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("module", ["training", "config_jobs", "job_run", "job_spec"])
def test_the_training_modules_take_no_private_names_from_other_modules(module):
    assert _private_imports(SRC / f"{module}.py") == []


def test_the_private_import_check_notices_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from tabrepro.training import _kept_fold\nimport tabrepro.job_run as run\nrun._one\n")
    assert _private_imports(probe) == ["from tabrepro.training import _kept_fold", "run._one"]


def test_in_job_and_per_configuration_training_meet_only_in_job_run():
    for module, other in (("training", "config_jobs"), ("config_jobs", "training")):
        tree = ast.parse((SRC / f"{module}.py").read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert f"tabrepro.{other}" not in imported and "tabrepro.job_run" in imported, module


def test_the_spec_imports_first_and_light():
    """No circle through tabrepro.config, and nothing heavy: the CLI imports it at its top."""
    code = (
        "import sys, tabrepro.job_spec; "
        "assert not {'sklearn', 'scipy', 'torch', 'pandas'} & set(sys.modules), 'loaded a heavy library'"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
