"""What the workflow's jobs ask a scheduler for (tabrepro.resources, params.yaml `resources`)."""

from __future__ import annotations

import copy
import re
import subprocess

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, copy_workflow
from tabrepro.config import Job, Params, ParamsError
from tabrepro.costmodel import CostModel, calibrate
from tabrepro.plan import JobEstimate, Planner
from tabrepro.plan_inputs import DatasetFacts
from tabrepro.resource_policy import fold_groups, policy
from tabrepro.resources import RULES, JobSizer, Request, combine_sequential, size_job

PARAMS = REPO / "params.yaml"


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(PARAMS.read_text())


def _sizer(params: Params) -> JobSizer:
    """A sizer whose cost model has only its priors (no measured runs), so the test is fixed."""
    return JobSizer(params, Planner(params, CostModel(calibrate([])), DatasetFacts([], None)))


def _train(dataset: str, model: str, fold: int = 0, paper: str = "npt") -> dict:
    return {"paper": paper, "dataset": dataset, "model": model, "fold": fold}


def test_training_jobs_grow_with_the_dataset_and_folds_share_a_request():
    sizer = _sizer(Params.from_file(PARAMS, profile="paper"))
    small = sizer.request("train", _train("breast_cancer", "xgboost"))
    large = sizer.request("train", _train("higgs", "xgboost"))
    assert large.mem_mb > small.mem_mb and large.runtime_min > small.runtime_min
    assert large.threads > small.threads == 1
    assert sizer.request("train", _train("higgs", "xgboost", fold=3)) == large
    config = sizer.request("train_batch", {**_train("higgs", "npt"), "batch": "0"})
    select = sizer.request("select_config", _train("higgs", "npt"))
    assert select.runtime_min < config.runtime_min


def test_a_batch_asks_for_its_configurations_summed_time_and_largest_memory():
    params = Params.from_file(PARAMS, profile="paper")
    sizer = _sizer(params)
    batches = sizer.config_batches("bishop", "adult", "bishop")
    assert [len(b) for b in batches] == [20] * 10 and batches[3] == range(60, 80)
    job = Job("bishop", "adult", "bishop", 0)
    singles = [sizer.planner.estimate(job, "train_config", c, bound=True) for c in batches[3]]
    combined = combine_sequential(singles)
    assert combined.gpu_seconds == pytest.approx(sum(e.gpu_seconds for e in singles))
    assert combined.peak_mb == max(e.peak_mb for e in singles)
    request = sizer.request("train_batch", {**_train("adult", "bishop", paper="bishop"), "batch": "3"})
    assert request == size_job(combined, policy(params)["training"])
    assert sizer.config_batches("npt", "higgs", "npt") == [range(0, 1)]  # NPT: a job per variant


@pytest.mark.parametrize(
    ("model", "message"),
    [("bishopp", r"unknown model 'bishopp'"), ("xgboost", r"'xgboost' tunes all its configurations inside one")],
)
def test_configs_per_job_names_only_per_configuration_models(raw, model, message):
    edited = copy.deepcopy(raw)
    edited["resources"]["training"]["configs_per_job"] = {model: 5}
    with pytest.raises(ParamsError, match=message):
        Params(edited, source="params.yaml")
    edited = copy.deepcopy(raw)
    edited["profiles"]["quick"]["resources"] = {"training": {"configs_per_job": {model: 5}}}
    with pytest.raises(ParamsError, match=r"profiles\.quick\.resources\.training\.configs_per_job"):
        Params(edited, source="params.yaml")


def test_folds_train_together_where_params_say_so_and_ask_for_their_summed_time():
    quick = Params.from_file(PARAMS, profile="quick")  # folds_in_one_job: all
    groups = fold_groups(quick, policy(quick))
    assert [(g.paper, g.dataset, g.folds) for g in groups] == [("npt", "breast_cancer", tuple(range(10)))]
    assert "tabnet" in groups[0].models and "npt" not in groups[0].models  # NPT: train_batch jobs
    paper = Params.from_file(PARAMS, profile="paper")  # the cheap models, on the 10-fold datasets only
    groups = {(g.paper, g.dataset): g for g in fold_groups(paper, policy(paper))}
    assert {"breast_cancer", "boston"} <= {d for _, d in groups} and ("npt", "higgs") not in groups
    assert "xgboost" in groups["npt", "boston"].models and "mlp" not in groups["npt", "boston"].models
    sizer = _sizer(paper)
    single = sizer.planner.estimate(Job("npt", "boston", "xgboost", 0), "train", bound=True)
    request = sizer.request("train_folds", {"paper": "npt", "dataset": "boston", "model": "xgboost"})
    assert request == size_job(combine_sequential([single] * 10), policy(paper)["training"])
    assert request.runtime_min >= sizer.request("train", _train("boston", "xgboost")).runtime_min
    assert ("train_folds", "npt", "boston", "xgboost", None) in sizer.training_keys()
    assert ("train", "npt", "boston", "mlp", None) in sizer.training_keys()
    # the feature-sparsity curves group their folds by the same list (quick: XGBoost and LightGBM)
    from tabrepro.bishop.feature_sparsity import plan_jobs, sparsity_settings

    curves = fold_groups(quick, policy(quick), plan_jobs(quick, sparsity_settings(quick)))
    assert [(g.dataset, g.models, len(g.folds)) for g in curves] == [("breast_cancer", ("xgboost", "lightgbm"), 10)]
    assert fold_groups(paper, policy(paper), plan_jobs(paper, sparsity_settings(paper))) == []  # one fold each


@pytest.mark.parametrize(
    ("models", "message"),
    [(["knnn"], r"unknown model 'knnn'.*knn"), (["npt"], r"'npt' trains one job per configuration")],
)
def test_folds_in_one_job_names_only_in_job_models(raw, models, message):
    edited = copy.deepcopy(raw)
    edited["profiles"]["quick"]["resources"] = {"training": {"folds_in_one_job": models}}
    with pytest.raises(ParamsError, match=r"profiles\.quick\.resources\.training\.folds_in_one_job.*" + message):
        Params(edited, source="params.yaml")
    edited["profiles"]["quick"]["resources"] = {"training": {"folds_in_one_job": "some"}}
    with pytest.raises(ParamsError, match="folds_in_one_job"):
        Params(edited, source="params.yaml")


def test_sizes_are_kept_between_runs_until_what_they_depend_on_changes(tmp_path, raw):
    """The workflow's sizer (cache_dir) prices the profile once; the next Snakemake start reads
    the same requests back without building the planner; other parameters miss the cache."""
    params = Params(raw, source="params.yaml", profile="paper")
    first = JobSizer(params, cache_dir=tmp_path)
    wildcards = {**_train("adult", "bishop", paper="bishop"), "batch": "2"}
    asked = first.request("train_batch", wildcards), first.request("train", _train("higgs", "xgboost"))
    (cached,) = tmp_path.glob("sizes-*.json")

    class NoPlanner(JobSizer):
        @property
        def planner(self):
            raise AssertionError("the cache should have answered")

    again = NoPlanner(params, cache_dir=tmp_path)
    assert (again.request("train_batch", wildcards), again.request("train", _train("higgs", "xgboost"))) == asked
    assert again.request("train_batch", wildcards) == first._planned("train_config", "bishop", "adult", "bishop", 2)

    edited = copy.deepcopy(raw)
    edited["resources"]["training"]["runtime_safety"] = 3.0
    other = JobSizer(Params(edited, source="params.yaml", profile="paper"), cache_dir=tmp_path)
    assert other.request("train", _train("higgs", "xgboost")).runtime_min > asked[1].runtime_min
    assert [p.name for p in tmp_path.glob("sizes-*.json")] != [cached.name]  # replaced, not added


def test_the_rules_callables_scale_with_the_attempt():
    sizer = _sizer(Params.from_file(PARAMS, profile="paper"))
    first = sizer.request("train", _train("higgs", "xgboost"))
    wildcards = _train("higgs", "xgboost")
    assert sizer.threads("train")(wildcards) == first.threads
    assert sizer.mem_mb("train")(wildcards, 2) == 2 * first.mem_mb
    assert sizer.runtime("train")(wildcards, 3) == 3 * first.runtime_min


def test_other_rules_take_their_entry_or_the_default(raw):
    params = Params(raw, source="params.yaml", profile="paper")
    sizer = JobSizer(params)
    assert sizer.request("prepare") == Request(1, raw["resources"]["rules"]["prepare"]["mem_mb"], 120)
    default = raw["resources"]["default"]
    assert sizer.request("scorecard") == Request(default["threads"], default["mem_mb"], default["runtime_min"])
    with pytest.raises(ValueError, match="unknown workflow rule 'prepar'"):
        sizer.request("prepar")


def test_long_cpu_jobs_get_more_threads_within_the_caps(raw):
    training = raw["resources"]["training"]
    short = size_job(JobEstimate("train", "boosting_hist", False, 600.0, 0.0, 100.0, 1), training)
    long = size_job(JobEstimate("train", "boosting_hist", False, 40 * 3600.0, 0.0, 100.0, 1), training)
    serial = size_job(JobEstimate("train", "boosting_exact", False, 40 * 3600.0, 0.0, 100.0, 1), training)
    assert short.threads == 1 and 1 < long.threads <= training["max_threads"] and serial.threads == 1
    assert long.runtime_min < serial.runtime_min
    assert short.mem_mb % 256 == 0 and short.mem_mb >= 100 * training["memory_safety"] + training["memory_floor_mb"]
    huge = size_job(JobEstimate("train", "boosting_exact", False, 1e9, 0.0, 1e9, 1), training)
    assert huge.mem_mb == training["max_mem_mb"] and huge.runtime_min == training["max_runtime_min"]
    capped = size_job(
        JobEstimate("train", "boosting_hist", False, 40 * 3600.0, 0.0, 100.0, 1), {**training, "max_threads": 1}
    )
    assert capped.threads == 1


def test_gpu_jobs_get_host_memory_for_cuda_besides_their_estimate(raw):
    """A CUDA process holds its context and libraries in host memory (up to 3.2 GiB above the CPU
    estimate on the H100 jobs measured): a GPU job's request adds gpu_memory_floor_mb."""
    training = raw["resources"]["training"]
    gpu = size_job(JobEstimate("train", "bishop", True, 0.0, 60.0, 200.0, 1), training)
    cpu = size_job(JobEstimate("train", "bishop", False, 60.0, 0.0, 200.0, 1), training)
    assert gpu.mem_mb >= 200 * training["memory_safety"] + training["gpu_memory_floor_mb"] > cpu.mem_mb


def test_profiles_override_key_by_key_and_fixed_sizing_ignores_the_plan(raw):
    quick = Params(raw, source="params.yaml", profile="quick")
    merged = policy(quick)
    assert merged["training"]["max_threads"] == 1
    assert merged["training"]["memory_safety"] == raw["resources"]["training"]["memory_safety"]
    edited = copy.deepcopy(raw)
    edited["profiles"]["quick"]["resources"] = {"training": {"sizing": "fixed", "fixed": {"mem_mb": 3000}}}
    sizer = JobSizer(Params(edited, source="params.yaml", profile="quick"))
    fixed = raw["resources"]["training"]["fixed"]
    assert sizer.request("train", _train("breast_cancer", "xgboost")) == Request(
        fixed["threads"], 3000, fixed["runtime_min"]
    )


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("resources", "rules"), {"prepar": {"mem_mb": 1}}, r"prepar"),
        (("resources", "training"), {"max_thread": 4}, r"max_thread"),
        (("resources", "default"), {"threads": 0}, r"threads"),
    ],
)
def test_a_misspelt_or_bad_resource_key_is_refused(raw, where, value, message):
    edited = copy.deepcopy(raw)
    section = edited
    for key in where[:-1]:
        section = section[key]
    section[where[-1]] = {**section[where[-1]], **value}
    with pytest.raises(ParamsError, match=message):
        Params(edited, source="params.yaml")


def test_every_workflow_rule_is_known_and_every_known_rule_exists():
    """RULES (what params.yaml's resources.rules may name) is exactly the workflow's job rules."""
    text = "\n".join(p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))])
    named = set(re.findall(r"^(?:rule|checkpoint) (\w+):", text, re.MULTILINE)) - {"all", "tables"}
    assert 'f"tables_{_paper}"' in text  # one tables rule per paper; params.yaml calls them `tables`
    assert 'f"train_folds_{_group.paper}_{_group.dataset}"' in text  # one per fold group: `train_folds`
    assert named | {"tables", "train_folds"} == set(RULES)


def test_a_paper_dry_run_asks_more_for_a_large_dataset_than_for_a_small_one(tmp_path):
    """What Snakemake itself would submit (threads and resources of the planned jobs). CatBoost:
    its Higgs job stays long enough for more threads whatever the committed runs calibrate (the
    committed runs put XGBoost's Higgs job under `long_job_hours`, on one thread)."""
    copy_workflow(tmp_path, lambda raw: raw.update(profile="paper"))
    targets = [f"results/npt/{dataset}/catboost/fold0/metrics.json" for dataset in ("breast_cancer", "higgs")]
    dry = subprocess.run(
        [str(SNAKEMAKE), "-n", "--cores", "64", *targets],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    requested = {}
    for block in re.split(r"\n(?=\S*rule \w+:)", dry.stdout + dry.stderr):
        found = re.search(r"dataset=(\w+), model=catboost", block)
        if found and re.search(r"rule train(_folds_\w+)?:", block):  # breast cancer: its folds in one job
            threads = re.search(r"threads: (\d+)", block)
            resources = dict(re.findall(r"(mem_mb|runtime)=(\d+)", block))
            requested[found.group(1)] = (
                int(threads.group(1)) if threads else 1,
                int(resources["mem_mb"]),
                int(resources["runtime"]),
            )
    small, large = requested["breast_cancer"], requested["higgs"]
    assert large[0] > small[0] and large[1] > small[1] and large[2] > small[2], requested


@pytest.mark.parametrize("profile", sorted(yaml.safe_load(PARAMS.read_text())["profiles"]))
def test_every_job_of_every_profile_can_be_sized(profile):
    """Every training job a profile runs gets a request (a model unknown to the cost model once
    stopped the isab profile's NPT-ISAB jobs at submission)."""
    params = Params.from_file(PARAMS, profile=profile)
    sizer = _sizer(params)
    from tabrepro.models.registry import get_model_class

    for job in {(j.paper, j.dataset, j.model) for j in params.jobs()}:
        paper, dataset, model = job
        wildcards = {"paper": paper, "dataset": dataset, "model": model, "fold": 0, "batch": 0}
        rules = ("train_batch", "select_config") if get_model_class(model).per_config_jobs else ("train",)
        for rule in rules:
            request = sizer.request(rule, wildcards)
            assert request.threads >= 1 and request.mem_mb > 0 and request.runtime_min > 0, (profile, job, rule)
