"""A changed hyperparameter reruns only the jobs whose results depend on it.

Every training job carries `params: digest` (tabrepro.config.Params.job_digest: seed, dataset,
protocol, the model's search space and budget), and Snakemake's `params` rerun trigger reruns a
job whose digest changed since it last ran. One real local run of a tiny profile records that
provenance; each test then edits params.yaml and checks the dry run's job list. No Slurm needed:
which jobs need to run is decided by Snakemake before any executor is involved.
"""

from __future__ import annotations

import copy
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from conftest import copy_workflow, tiny_profile
from conftest import snakemake as run_snakemake

FOLDS = (0, 1)
KNN_FOLDS = "train_folds_npt_breast_cancer"  # the rule of k-NN's folds (folds_in_one_job)

pytestmark = pytest.mark.slow


def tiny(raw: dict) -> None:
    raw["profiles"]["reruns"] = tiny_profile(
        ["knn", "random_forest", "npt"],
        description="rerun-trigger test",
        max_configs=2,
        folds=list(FOLDS),
        model_overrides={
            "npt": {
                "max_configs": 1,
                "params": {
                    "embed_dim": 8,
                    "n_layers": 2,
                    "n_heads": 2,
                    "max_steps": 4,
                    "eval_every_epochs": 2,
                    "checkpoint_every_steps": 2,
                },
            }
        },
    )
    # k-NN trains both folds in one train_folds job, the random forest a train job per fold.
    raw["profiles"]["reruns"]["resources"] = {"training": {"folds_in_one_job": ["knn"]}}
    raw["profile"] = "reruns"
    raw["search_spaces"]["baselines"]["random_forest"]["params"]["n_estimators"] = {"choice": [20, 40]}


def snakemake(work: Path, *args: str, timeout: float = 600) -> str:
    """Snakemake's output; the test fails when it does."""
    run = run_snakemake(work, *args, env={"PYTHONUNBUFFERED": "1"}, timeout=timeout)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    work = copy_workflow(tmp_path_factory.mktemp("reruns"), tiny)
    snakemake(work, "all")
    assert "Nothing to be done" in snakemake(work, "-n", "all")
    return work


@contextmanager
def edited_params(work: Path, edit):
    """params.yaml changed by `edit(raw)` inside the block, restored byte for byte after it."""
    path = work / "params.yaml"
    original = path.read_text()
    raw = copy.deepcopy(yaml.safe_load(original))
    edit(raw)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        yield
    finally:
        path.write_text(original)


def scheduled(work: Path, *args: str) -> dict[str, list[str]]:
    """The dry run's jobs: rule -> the first output of each of its jobs (none for `all`)."""
    out = snakemake(work, "-n", *args, "--", "all")
    jobs: dict[str, list[str]] = {}
    rule = None
    for line in out.splitlines():
        match = re.match(r"^(?:local)?rule (\S+):$", line)
        if match:
            rule = match.group(1)
            jobs.setdefault(rule, [])
        elif rule and line.strip().startswith("output:"):
            jobs[rule].append(line.split("output:", 1)[1].split(",")[0].strip())
    return jobs


def job(model: str, fold: int, batch: int | None = None) -> str:
    base = f"results/npt/breast_cancer/{model}/fold{fold}"
    return f"{base}/batch{batch}.json" if batch is not None else f"{base}/metrics.json"


def test_changed_knn_space_reruns_only_the_knn_jobs_and_the_tables(work):
    def edit(raw):
        raw["search_spaces"]["npt_small"]["knn"]["params"]["n_neighbors"] = {"choice": [3, 5, 7, 11]}

    with edited_params(work, edit):
        jobs = scheduled(work)
    assert jobs.pop(KNN_FOLDS) == [job("knn", 0)]  # one job for both folds (its first output)
    assert jobs.pop("tables_npt") == ["results/tables/npt/table8.md"]
    assert jobs.pop("scorecard") == ["results/scorecard/scorecard.md"]  # judges the tables' cells
    assert jobs.pop("report_html") == ["results/report/index.html"]  # built from the tables
    assert jobs.pop("all", None) is not None
    assert jobs == {}, f"jobs that do not depend on the k-NN space were scheduled: {jobs}"


def test_changed_npt_setting_reruns_only_npt_jobs_and_the_tables(work):
    def edit(raw):
        raw["profiles"]["reruns"]["model_overrides"]["npt"]["params"]["embed_dim"] = 16

    with edited_params(work, edit):
        jobs = scheduled(work)
    assert sorted(jobs.pop("train_batch")) == [job("npt", k, 0) for k in FOLDS]
    assert sorted(jobs.pop("select_config")) == [job("npt", k) for k in FOLDS]
    assert jobs.pop("tables_npt") == ["results/tables/npt/table8.md"]
    assert jobs.pop("scorecard") == ["results/scorecard/scorecard.md"]  # judges the tables' cells
    assert jobs.pop("report_html") == ["results/report/index.html"]  # built from the tables
    jobs.pop("all", None)
    assert jobs == {}, f"jobs that do not depend on NPT's settings were scheduled: {jobs}"


def test_change_to_a_model_outside_the_profile_reruns_nothing(work):
    def edit(raw):
        raw["search_spaces"]["baselines"]["mlp"]["params"]["alpha"] = {"choice": [0.0, 0.5]}

    with edited_params(work, edit):
        assert scheduled(work) == {}


def test_rerun_triggers_without_params_ignore_a_changed_hyperparameter(work):
    def edit(raw):
        raw["search_spaces"]["npt_small"]["knn"]["params"]["n_neighbors"] = {"choice": [3, 5, 7, 11]}

    with edited_params(work, edit):
        assert scheduled(work, "--rerun-triggers", "mtime", "input", "code", "software-env") == {}


def test_changed_split_protocol_reruns_the_split_and_everything_after_it(work):
    def edit(raw):
        raw["protocols"]["npt_cv10"]["val_fraction"] = 0.25

    with edited_params(work, edit):
        jobs = scheduled(work)
    assert jobs.get("split") == ["data/splits/npt/breast_cancer/splits.json"]
    assert sorted(jobs.get("train", [])) == [job("random_forest", k) for k in FOLDS]
    assert jobs.get(KNN_FOLDS) == [job("knn", 0)]


def test_rerun_after_a_changed_npt_setting_trains_the_new_configuration(work):
    # Last in this module: it really runs the rescheduled jobs.
    def edit(raw):
        raw["profiles"]["reruns"]["model_overrides"]["npt"]["params"]["embed_dim"] = 16

    with edited_params(work, edit):
        snakemake(work, "all")
        assert "Nothing to be done" in snakemake(work, "-n", "--", "all")
