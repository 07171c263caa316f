"""The compute plan: job and fit counts, the cost model's calibration and monotonicity, resources."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tabrepro.config import Job, Params
from tabrepro.costmodel import (
    RUNTIME_PRIORS,
    CostModel,
    MeasuredJob,
    TableShape,
    calibrate,
    family_of,
    fit_terms,
    job_terms,
    memory_terms,
)
from tabrepro.models.registry import get_model_class
from tabrepro.plan import Planner, compare, format_plan, memory_over_cap, within
from tabrepro.plan_inputs import DatasetFacts, load_measured, split_sizes
from tabrepro.resource_policy import policy
from tabrepro.splits import make_split

REPO = Path(__file__).resolve().parents[2]
PARAMS = REPO / "params.yaml"


def _shape(rows: int, width: int = 20, classes: int = 2) -> TableShape:
    return TableShape(rows, int(rows * 0.7), int(rows * 0.1), int(rows * 0.2), width, width, classes, "test")


def _prior_model() -> CostModel:
    return CostModel(calibrate([]))


@pytest.fixture(scope="module")
def quick_planner() -> Planner:
    params = Params.from_file(PARAMS, profile="quick")
    return Planner(params, _prior_model(), DatasetFacts([], None))


# ----------------------------------------------------------------------------------------------
# counts


def test_plan_rows_count_every_workflow_job_and_fit_once(quick_planner):
    params = quick_planner.params
    rows = quick_planner.rows()
    expected_jobs = 0
    for job in params.jobs():
        if get_model_class(job.model).per_config_jobs:
            expected_jobs += params.n_configs(job.paper, job.dataset, job.model) + 1
        elif job.fold == 0:  # the quick profile trains an in-job model's ten folds in one job
            expected_jobs += 1
    assert sum(r.jobs for r in rows) == expected_jobs
    assert {(r.paper, r.dataset, r.model) for r in rows} == {(j.paper, j.dataset, j.model) for j in params.jobs()}
    for row in rows:
        assert row.folds == len(
            [j for j in params.jobs() if (j.paper, j.dataset, j.model) == (row.paper, row.dataset, row.model)]
        )
        assert row.configs == params.n_configs(row.paper, row.dataset, row.model)
        repeats = params.repeats(row.paper, row.dataset)
        assert row.fits == row.folds * (row.configs + repeats - 1)
        assert row.cpu_hours >= 0 and row.gpu_hours >= 0 and row.peak_mb > 0


def test_gpu_models_count_gpu_hours_and_cpu_models_cpu_hours(quick_planner):
    for row in quick_planner.rows():
        gpu = get_model_class(row.model).accelerator == "gpu"
        assert (row.gpu_hours > 0) == gpu and (row.cpu_hours > 0) == (not gpu), row.model


def test_the_plan_uses_the_jobs_own_candidate_lists(quick_planner):
    from tabrepro.job_spec import resolve_job
    from tabrepro.tuning import job_configs

    spec = resolve_job(quick_planner.params, Job("npt", "breast_cancer", "xgboost", 3))
    assert quick_planner.configs("npt", "breast_cancer", "xgboost") == job_configs(spec, "binary")


ENTRY_POINTS = {
    "tabrepro plan": lambda profile: [sys.executable, "-m", "tabrepro", "--profile", profile, "plan"],
    "python -m tabrepro.plan": lambda profile: [sys.executable, "-m", "tabrepro.plan", "--profile", profile],
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_the_paper_profile_plans_in_seconds_and_counts_its_training_jobs(entry):
    done = subprocess.run(
        ENTRY_POINTS[entry]("paper"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    params = Params.from_file(PARAMS, profile="paper")
    batch = policy(params)["training"]["configs_per_job"]

    def workflow_jobs(j):  # train_batch jobs of `configs_per_job` configurations, then select
        return -(-params.n_configs(j.paper, j.dataset, j.model) // batch.get(j.model, 1)) + 1

    # in-job models listed in `folds_in_one_job` train a dataset's folds in one job when it has several
    together = policy(params)["training"]["folds_in_one_job"]
    n_folds = Counter((j.paper, j.dataset, j.model) for j in params.jobs())
    grouped = {k for k, n in n_folds.items() if n > 1 and k[2] in together}
    assert grouped  # the paper profile has some (NPT's 10-fold datasets)
    jobs = len(grouped) + sum(
        workflow_jobs(j) if get_model_class(j.model).per_config_jobs else 1
        for j in params.jobs()
        if (j.paper, j.dataset, j.model) not in grouped
    )
    total = next(line for line in done.stdout.splitlines() if line.startswith("| **total**"))
    assert f"| {jobs:,} |" in total
    for paper in ("npt", "bishop"):
        assert any(
            line.startswith(f"| {paper} | higgs |") or line.startswith(f"| {paper} |")
            for line in done.stdout.splitlines()
        )


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_bad_profile_is_one_line_and_exit_2(entry):
    done = subprocess.run(
        ENTRY_POINTS[entry]("nope"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "nope" in done.stderr


@pytest.mark.parametrize("protocol", ["npt_cv10", "npt_holdout", "npt_fixed_test_poker", "openml_benchmark"])
def test_split_sizes_match_the_real_splits(protocol):
    raw = Params.from_file(PARAMS).raw["protocols"][protocol]
    n, fixed = 5003, (1000 if raw["kind"] == "fixed_test" else 0)
    if raw.get("max_train_rows"):
        n = 20011
    y = np.arange(n) % 3
    counts = make_split(raw, n, fold=0, seed=1, y=y.astype(str), n_fixed_test_rows=fixed).counts()
    train, val, test = split_sizes(raw, n, fixed)
    assert abs(train - counts["train"]) <= 1 and abs(val - counts["val"]) <= 1 and abs(test - counts["test"]) <= 1


@pytest.mark.parametrize("n_rows", [12_001, 30_011])
def test_split_sizes_of_a_subsampled_holdout_are_the_subsample_s(n_rows):
    """Datasets II's protocol splits a 10,000-row subsample of a large table (7,000 / 900 / 2,100
    rows), a table whose 70 % stays under 10,000 rows whole: the plan prices the same rows."""
    raw = Params.from_file(PARAMS).raw["protocols"]["openml_benchmark"]
    assert raw["subsample_rows"] == 10_000
    y = (np.arange(n_rows) % 2).astype(str)
    counts = make_split(raw, n_rows, fold=0, seed=1, y=y).counts()
    assert split_sizes(raw, n_rows, 0) == (counts["train"], counts["val"], counts["test"])
    if n_rows * raw["train"] > raw["subsample_rows"]:
        assert split_sizes(raw, n_rows, 0) == (7_000, 900, 2_100)


# ----------------------------------------------------------------------------------------------
# the cost model


@pytest.mark.parametrize(
    "model, config",
    [
        ("xgboost", {"n_estimators": 100, "max_depth": 6}),
        ("lightgbm", {"n_estimators": 100, "num_leaves": 31}),
        ("catboost", {"n_estimators": 100, "max_depth": 6}),
        ("gradient_boosting", {"n_estimators": 50}),
        ("random_forest", {"n_estimators": 50, "max_features": "sqrt"}),
        ("knn", {"n_neighbors": 5}),
        ("mlp", {"hidden_layer_sizes": [100, 100]}),
        ("tabnet", {"n_d": 8}),
        ("ft_transformer", {}),
        ("resnet", {}),
        ("npt", {"batch_size": 512, "max_steps": 100}),
        ("bishop", {}),
    ],
)
def test_predictions_grow_with_the_data(model, config):
    cost = _prior_model()
    family = family_of(model)
    times, memory = [], []
    for rows in (1_000, 10_000, 100_000, 1_000_000):
        work = job_terms(model, "train", [config], _shape(rows))
        times.append(cost.cpu_seconds(family, work.terms))
        memory.append(cost.peak_mb(family, work.memory))
    assert all(a < b for a, b in zip(times, times[1:])), times
    assert all(a < b for a, b in zip(memory, memory[1:])), memory


@pytest.mark.parametrize(
    "model, key, small, large",
    [
        ("xgboost", "n_estimators", 10, 1000),
        ("random_forest", "n_estimators", 10, 1000),
        ("mlp", "hidden_layer_sizes", [25], [500, 500, 500]),
        ("npt", "max_steps", 100, 10_000),
        ("bishop", "d_model", 64, 1024),
        ("tabnet", "max_epochs", 10, 1000),
    ],
)
def test_predictions_grow_with_the_configuration(model, key, small, large):
    cost = _prior_model()
    shape = _shape(20_000)
    low = cost.cpu_seconds(family_of(model), job_terms(model, "train", [{key: small}], shape).terms)
    high = cost.cpu_seconds(family_of(model), job_terms(model, "train", [{key: large}], shape).terms)
    assert high > 2 * low


def test_bishop_epochs_of_a_few_batches_train_on_those_rows_only():
    """batches_per_epoch (the scale benchmark's 50 batches) bounds the rows an epoch trains on:
    counting every training row overestimated the benchmark's BiSHop jobs on the large tables 5-8x."""
    shape = _shape(400_000)
    whole = job_terms("bishop", "train_config", [{"max_epochs": 1}], shape).terms
    few = job_terms("bishop", "train_config", [{"max_epochs": 1, "batches_per_epoch": 50}], shape).terms
    one_row = job_terms("bishop", "train_config", [{"max_epochs": 1}], TableShape(1, 1, 0, 0, 20, 20, 2)).terms
    assert few["steps"] == pytest.approx(whole["steps"] * 50 * 32 / shape.n_train)
    # one training row costs one_row's flops (forward and backward); the scored rows are the same
    assert whole["flops"] - few["flops"] == pytest.approx(one_row["flops"] * (shape.n_train - 50 * 32))


def test_calibration_recovers_known_rates():
    rng = np.random.default_rng(0)
    truth = {"start": 2.0, "load": 0.5, "trees": 3.0, "score": 1.0}
    measured = []
    for i in range(30):
        shape = _shape(int(rng.integers(500, 200_000)), int(rng.integers(5, 100)))
        config = {"n_estimators": int(rng.integers(10, 1000)), "max_depth": int(rng.integers(2, 10))}
        work = job_terms("xgboost", "train", [config], shape)
        wall = sum(truth[k] * v for k, v in work.terms.items())
        measured.append(MeasuredJob(f"x/{i}", "boosting_hist", work.terms, work.memory, wall, 300.0, "test"))
    model = CostModel(calibrate(measured))
    ratios = [model.cpu_seconds(j.family, j.terms) / j.wall_s for j in measured]
    assert max(abs(np.log(ratios))) < 0.05
    assert within(ratios, 1.1) == 1.0


def test_families_without_measurements_keep_their_priors():
    calibration = calibrate([])
    assert calibration.runtime == {family: dict(prior) for family, prior in RUNTIME_PRIORS.items()}
    assert set(calibration.n_jobs.values()) == {0}


def _gpu_jobs(tflops: float, overhead_ms: float, n: int = 12) -> list[MeasuredJob]:
    """NPT jobs of varied sizes whose GPU time is exactly their flops at `tflops` plus
    `overhead_ms` per step (and the CPU priors' start-up and loading)."""
    rng = np.random.default_rng(1)
    jobs = []
    for i in range(n):
        shape = _shape(int(rng.integers(500, 50_000)), int(rng.integers(5, 60)))
        config = {
            "embed_dim": int(rng.choice([16, 64, 128])),
            "batch_size": 1024,
            "max_steps": int(rng.integers(50, 2000)),
        }
        work = job_terms("npt", "train_config", [config], shape)
        t = work.terms
        wall = (
            RUNTIME_PRIORS["npt"]["start"] * t["start"]
            + RUNTIME_PRIORS["npt"]["load"] * t["load"]
            + t["flops"] * 1e9 / (tflops * 1e12)
            + t["steps"] * overhead_ms
        )
        jobs.append(MeasuredJob(f"npt/d{i}/npt/fold0", "npt", t, work.memory, wall, 900.0, "test", gpu=True))
    return jobs


def test_gpu_jobs_calibrate_the_gpu_weights_and_leave_the_cpu_ones_alone():
    measured = _gpu_jobs(tflops=25.0, overhead_ms=3.0)
    calibration = calibrate(measured)
    assert calibration.runtime == calibrate([]).runtime  # no GPU job enters the CPU calibration
    assert calibration.memory == calibrate([]).memory
    assert calibration.n_gpu_jobs["npt"] == len(measured) and calibration.n_gpu_jobs["bishop"] == 0
    model = CostModel(calibration)
    ratios = [model.gpu_seconds("npt", j.terms) / j.wall_s for j in measured]
    assert max(abs(np.log(ratios))) < 0.1
    assert 1 / (calibration.gpu_runtime["npt"]["flops"] * 1e3) == pytest.approx(25.0, rel=0.15)
    # a family no GPU job measured keeps the assumed rate and overhead
    assumed = calibrate([]).gpu_runtime["bishop"]
    assert calibration.gpu_runtime["bishop"] == assumed
    assert assumed["flops"] == pytest.approx(1 / (model.gpu.tflops * 1e3))
    assert assumed["steps"] == pytest.approx(model.gpu.step_overhead_ms)
    report = compare(measured, model.gpu)
    assert "npt (GPU)" in report and "(GPU) | test |" in report


def test_jobs_that_used_a_gpu_are_read_as_gpu_jobs(tmp_path):
    params = Params.from_file(PARAMS, profile="quick")
    _write_metrics(
        tmp_path / "run", params, Job("npt", "breast_cancer", "tabnet", 0), gpu={"used": True, "name": "H100"}
    )
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "mlp", 0), gpu={"used": False})
    # a per-configuration job whose select step named no GPU, though its configurations trained on one
    cuda_fit = {"fit_info": {"device": "cuda"}}
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "npt", 0), selection=cuda_fit)
    facts = DatasetFacts(
        [],
        None,
        extra={"breast_cancer": {"n_rows": 569, "n_features": 30, "width": 30, "n_classes": 2, "n_fixed_test_rows": 0}},
    )
    jobs = {j.label: j.gpu for j in load_measured([tmp_path / "run"], [], PARAMS, facts)}
    assert jobs == {
        "npt/breast_cancer/tabnet/fold0": True,
        "npt/breast_cancer/mlp/fold0": False,
        "npt/breast_cancer/npt/fold0": True,
    }


def test_the_plan_names_the_cpu_types_its_cpu_hours_were_timed_on(tmp_path):
    params = Params.from_file(PARAMS, profile="quick")
    xeon = {"model": "Intel(R) Xeon(R) Processor", "isa_level": "AMX"}
    epyc = {"model": "AMD EPYC", "isa_level": "AVX2"}
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "mlp", 0), cpu=xeon)
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "knn", 0), cpu=epyc)
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "tabnet", 0), cpu=epyc)
    # a GPU job times the GPU, not its host's CPU: it is not counted
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "npt", 0), cpu=xeon, gpu={"used": True})
    facts = DatasetFacts(
        [],
        None,
        extra={"breast_cancer": {"n_rows": 569, "n_features": 30, "width": 30, "n_classes": 2, "n_fixed_test_rows": 0}},
    )
    calibration = calibrate(load_measured([tmp_path / "run"], [], PARAMS, facts))
    assert calibration.cpu_types == {"AMD EPYC · AVX2": 2, "Intel(R) Xeon(R) Processor · AMX": 1}
    header = format_plan([], params, CostModel(calibration)).splitlines()[1]
    assert "timed jobs ran on: AMD EPYC · AVX2 (2), Intel(R) Xeon(R) Processor · AMX (1)" in header
    assert "from the cost model's priors" in format_plan([], params, CostModel(calibrate([]))).splitlines()[1]


def test_jobs_stopped_at_a_time_limit_count_for_memory_only():
    shape = _shape(10_000)
    work = job_terms("npt", "train_config", [{"batch_size": 1024}], shape)
    stopped = MeasuredJob("bench/x@1/npt", "npt", work.terms, work.memory, None, 9000.0, "bench")
    calibration = calibrate([stopped])
    assert calibration.runtime["npt"] == RUNTIME_PRIORS["npt"]
    assert CostModel(calibration).peak_mb("npt", work.memory) == pytest.approx(9000.0, rel=0.2)
    assert "(time limit)" in compare([stopped], CostModel(calibration).gpu)


def test_equal_cost_configurations_are_priced_once_and_alike():
    shape = _shape(5_000)
    a = fit_terms("mlp", {"hidden_layer_sizes": (50,), "alpha": 0.1, "learning_rate_init": 0.01}, shape, score_rows=10)
    b = fit_terms("mlp", {"hidden_layer_sizes": [50], "alpha": 0.0, "learning_rate_init": 0.1}, shape, score_rows=10)
    assert a == b
    assert fit_terms("mlp", {"hidden_layer_sizes": (60,)}, shape, score_rows=10) != a


def test_random_forest_memory_grows_with_its_trees():
    shape = _shape(1_000_000)
    assert (
        memory_terms("random_forest", {"n_estimators": 1000}, shape)["state"]
        > 50 * memory_terms("random_forest", {"n_estimators": 10}, shape)["state"]
    )


# ----------------------------------------------------------------------------------------------
# measured jobs


def _write_metrics(
    root: Path,
    params: Params,
    job: Job,
    *,
    digest: str | None = None,
    gpu: dict | None = None,
    selection: dict | None = None,
    cpu: dict | None = None,
) -> Path:
    path = root / job.paper / job.dataset / job.model / f"fold{job.fold}" / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "paper": job.paper,
                "dataset": job.dataset,
                "model": job.model,
                "fold": job.fold,
                "task": "binary",
                "source": "breast_cancer",
                "profile": params.profile_name,
                "params_digest": digest or params.job_digest(job),
                "wall_time_s": 12.5,
                "peak_memory_mb": 300.0,
                "split": {"n_train": 399, "n_val": 114, "n_test": 56, "n_unused": 0},
                "provenance": {"gpu": gpu, **({"cpu": cpu} if cpu else {})},
                **({"selection": selection} if selection else {}),
            }
        )
    )
    return path


def test_measured_jobs_are_read_with_their_regenerated_candidates(tmp_path):
    params = Params.from_file(PARAMS, profile="quick")
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "xgboost", 0))
    _write_metrics(tmp_path / "run", params, Job("npt", "breast_cancer", "lightgbm", 0), digest="0" * 16)
    facts = DatasetFacts(
        [],
        None,
        extra={"breast_cancer": {"n_rows": 569, "n_features": 30, "width": 30, "n_classes": 2, "n_fixed_test_rows": 0}},
    )
    jobs = load_measured([tmp_path / "run", tmp_path / "run"], [], PARAMS, facts)
    assert [(j.label, j.wall_s, j.peak_mb) for j in jobs] == [("npt/breast_cancer/xgboost/fold0", 12.5, 300.0)]
    n_configs = params.n_configs("npt", "breast_cancer", "xgboost")
    assert jobs[0].terms["start"] == 1.0 and jobs[0].terms["trees"] > 0
    one = job_terms(
        "xgboost",
        "train",
        Planner(params, _prior_model(), facts).configs("npt", "breast_cancer", "xgboost"),
        TableShape(569, 399, 114, 56, 30, 30, 2),
    )
    assert jobs[0].terms == pytest.approx(one.terms) and n_configs > 1


def test_a_bench_stage_measured_in_parts_counts_its_summed_time_and_largest_peak(tmp_path):
    table = {"n_rows": 1000, "n_features": 10, "width": 10, "n_classes": 10, "n_fixed_test_rows": 0}
    job = {"config": {"max_epochs": 1}, "n_train": 700, "n_val": 100, "n_test": 200, "wall_time_s": 40.0}
    record = {
        "dataset": "poker_hand",
        "source": "poker_hand",
        "rows": 1000,
        "stage": "train-config",
        "model": "bishop",
        "status": "ok",
        "wall_s": 100.0,
        "peak_rss_mb": 900.0,
        "tree_peak_rss_mb": 950.0,
        "job": {**job, "peak_memory_mb": 800.0},
        "table": table,
    }
    one = tmp_path / "bench-one.json"
    one.write_text(json.dumps({"records": [record]}))
    parts = [{"wall_s": 60.0, "peak_rss_mb": 0.0, "tree_peak_rss_mb": 950.0}, {"wall_s": 40.0}]
    staged = tmp_path / "bench-parts.json"
    staged.write_text(json.dumps({"records": [{**record, "parts": parts}]}))
    facts = DatasetFacts([], None)
    [whole] = load_measured([], [one], PARAMS, facts)
    [in_parts] = load_measured([], [staged], PARAMS, facts)
    assert (whole.wall_s, whole.peak_mb) == (40.0, 800.0)  # one part: the job's own figures
    assert (in_parts.wall_s, in_parts.peak_mb) == (100.0, 950.0)  # the job saw its last part only


def test_npt_memory_counts_its_parameters_and_their_optimiser_copies():
    """A wide table makes NPT's parameters, not its activations, the memory: Income's 41
    attributes at e = 64 give ~358 M parameters, six fp32 copies of which are ~8 GiB."""
    import torch

    from tabrepro.costmodel import npt_parameters
    from tabrepro.features import categorical, continuous
    from tabrepro.models.npt import NPTConfig, NPTNetwork

    config = {"embed_dim": 16, "n_layers": 4, "n_heads": 4}
    attributes = [continuous() for _ in range(9)] + [categorical(2)]
    with torch.device("meta"):
        network = NPTNetwork(attributes, NPTConfig(**config, device="cpu"))
    actual = sum(p.numel() for p in network.parameters())
    assert abs(npt_parameters(config, len(attributes)) - actual) < 0.02 * actual
    income = _shape(299_285, width=41)
    held_gib = memory_terms("npt", {"embed_dim": 64, "n_layers": 8, "batch_size": 2048}, income)["held"] / 1024
    assert 7.5 < held_gib < 8.5
    # best_weights_on_disk: five copies in memory instead of six
    on_disk = {"embed_dim": 64, "n_layers": 8, "batch_size": 2048, "best_weights_on_disk": True}
    assert memory_terms("npt", on_disk, income)["held"] / 1024 == pytest.approx(held_gib * 5 / 6)


def test_calibration_never_scales_the_exactly_known_bytes_down():
    """Small NPT jobs whose estimates overshoot pull the fitted weights down; the parameter
    copies of a wide table must still count in full in its estimate."""
    from tabrepro.costmodel import MeasuredJob, calibrate, job_terms

    config = {"embed_dim": 64, "n_layers": 8, "batch_size": 2048}
    small = [
        MeasuredJob(
            f"small{i}",
            "npt",
            (w := job_terms("npt", "train_config", [config], _shape(500 + 100 * i, width=10))).terms,
            w.memory,
            60.0,
            300.0,
            "test",
        )
        for i in range(5)
    ]
    model = CostModel(calibrate(small))
    income = job_terms("npt", "train_config", [config], _shape(299_285, width=40))
    assert model.peak_mb("npt", income.memory) >= income.memory["held"] > 7 * 1024


@pytest.fixture(scope="module")
def committed_plan_block() -> str:
    """The plan page's block rendered once from the shipped calibration (it calibrates the cost
    model on every measured job and plans the paper profile)."""
    from tabrepro.plan import readme_block

    return readme_block()


@pytest.fixture
def rendered_once(monkeypatch, committed_plan_block):
    """`python -m tabrepro.plan --readme` renders that one block instead of rendering it again;
    it may ask only for the committed block (readme_block's default arguments)."""
    from tabrepro.plan import readme_block

    signature = inspect.signature(readme_block)

    def served(*args, **kwargs) -> str:
        asked, committed = signature.bind(*args, **kwargs), signature.bind()
        asked.apply_defaults()
        committed.apply_defaults()
        assert asked.arguments == committed.arguments, f"not the committed block: {asked.arguments}"
        return committed_plan_block

    monkeypatch.setattr("tabrepro.plan.readme_block", served)


def test_plan_page_block_is_generated_from_the_shipped_calibration(rendered_once):
    """The plan page's figures are a record: regenerated by python -m tabrepro.plan --readme,
    stale as soon as the calibration or the cost model changes; the README links to it."""
    from tabrepro.plan import PLAN_PAGE, README_BEGIN, main

    assert main(["--readme", str(REPO / PLAN_PAGE), "--check"]) == 0, (
        f"the plan block is stale: python -m tabrepro.plan --readme {PLAN_PAGE}"
    )
    readme = (REPO / "README.md").read_text()
    assert README_BEGIN not in readme and f"]({PLAN_PAGE.as_posix()})" in readme


def test_shipped_calibration_is_current_against_the_records():
    """data/cost_calibration.json is what `tabrepro calibrate records` writes from the committed
    records: a record, benchmark or facts file changed without recalibrating fails here."""
    from tabrepro.plan import write_calibration

    assert write_calibration(REPO / "records", PARAMS, check=True), (
        "src/tabrepro/data/cost_calibration.json is stale: tabrepro calibrate records"
    )


def test_calibrate_writes_what_the_planner_reads_and_notices_a_changed_record(tmp_path, capsys):
    """`tabrepro calibrate` writes the measured jobs of a records directory with repo-relative
    origins; the planner calibrated on that file equals one calibrated on the records themselves;
    a changed benchmark makes --check fail with one line."""
    import shutil

    from tabrepro.cli import main as cli
    from tabrepro.plan import default_planner
    from tabrepro.plan_inputs import calibration_inputs, read_calibration

    records = tmp_path / "repo" / "records"
    (records / "scale").mkdir(parents=True)
    shutil.copy(REPO / "records/scale/dataset-facts.json", records / "scale")
    shutil.copy(REPO / "records/scale/bench-income-1.json", records / "scale")
    output = tmp_path / "calibration.json"
    argv = ["--params", str(PARAMS), "calibrate", str(records), "--output", str(output)]
    assert cli(argv) == 0
    written = json.loads(output.read_text())
    assert written["sources"]["bench_files"] == ["records/scale/bench-income-1.json"]
    assert str(tmp_path) not in output.read_text()
    inputs = calibration_inputs(records)
    facts = DatasetFacts([], inputs["facts_file"])
    direct = load_measured([], inputs["bench_files"], PARAMS, facts)
    shipped = read_calibration(output)
    assert shipped.measured == direct and len(direct) > 3
    params = Params.from_file(PARAMS, profile="quick")
    planner = default_planner(params, calibration_file=output)
    assert planner.model.calibration == calibrate(direct)
    assert cli([*argv, "--check"]) == 0
    bench = json.loads((records / "scale/bench-income-1.json").read_text())
    bench["records"] = bench["records"][:-1]
    (records / "scale/bench-income-1.json").write_text(json.dumps(bench))
    capsys.readouterr()
    assert cli([*argv, "--check"]) == 2
    assert "stale" in capsys.readouterr().err


def test_readme_plan_block_check_fails_when_stale(tmp_path, rendered_once):
    from tabrepro.plan import README_BEGIN, README_END, main

    readme = tmp_path / "plan.md"
    readme.write_text(f"intro\n{README_BEGIN}\n| npt | 1 | 1 | 1.0 | 1.0 | 1.0 |\n{README_END}\n")
    assert main(["--readme", str(readme), "--check"]) == 1
    assert main(["--readme", str(readme)]) == 0
    assert "| **total** |" in readme.read_text()
    assert main(["--readme", str(readme), "--check"]) == 0
    readme.write_text("no markers\n")
    assert main(["--readme", str(readme)]) == 2


def test_every_registered_model_has_a_cost_family():
    """A model the cost model does not know cannot be sized, so no profile could run it under
    plan sizing (NPT-ISAB's jobs once failed at submission with KeyError: 'npt_isab')."""
    from tabrepro.costmodel import RUNTIME_PRIORS, family_of
    from tabrepro.models.registry import MODEL_NAMES

    assert {family_of(name) for name in MODEL_NAMES} <= set(RUNTIME_PRIORS)
    assert family_of("npt_isab") == "npt" and family_of("bishop_attention") == "bishop"
    assert family_of("bishop_default") == "bishop"


def test_the_cost_family_is_a_class_attribute(monkeypatch):
    """Adding a model names its family on the class (no table beside the registry); a subclass
    can price itself differently, and a class without a family is refused by name."""
    from tabrepro.costmodel import family_of
    from tabrepro.models import registry
    from tabrepro.models.base import TabularModel

    class Priced(registry.get_model_class("knn")):
        name = "priced"
        cost_family = "random_forest"

    class Unpriced(TabularModel):
        name = "unpriced"

    monkeypatch.setitem(registry.MODEL_REGISTRY, "priced", Priced)
    monkeypatch.setitem(registry.MODEL_REGISTRY, "unpriced", Unpriced)
    assert family_of("priced") == "random_forest"
    with pytest.raises(TypeError, match="Unpriced sets no cost_family"):
        family_of("unpriced")


def test_estimates_above_the_largest_memory_request_are_named(quick_planner):
    params = quick_planner.params
    cap = policy(params)["training"]["max_mem_mb"]
    rows = quick_planner.rows()[:2]
    assert memory_over_cap(rows, params) == ""
    too_big = dataclasses.replace(rows[0], peak_mb=2.0 * cap)
    line = memory_over_cap([too_big, rows[1]], params)
    assert f"{too_big.model} on {too_big.dataset} ({too_big.paper}), {2 * cap / 1024:,.1f} GiB" in line
    assert f"{rows[1].model} on {rows[1].dataset}" not in line
    assert line in format_plan([too_big, rows[1]], params, _prior_model())
    assert "largest memory request" not in format_plan(rows, params, _prior_model())
