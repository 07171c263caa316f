"""The real Snakemake workflow, end to end, on tiny data; and the paper profile's dry run."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from conftest import SHARED_DATASETS, copy_workflow, repo_raw_params, snakemake, tiny_profile


def end_to_end_profile(raw: dict, datasets: list[str]) -> None:
    # Two NPT variants exercise the per-configuration jobs and the selection on validation;
    # a tiny BiSHop its protocol (selection, then the winner retrained with 3 seeds).
    raw["profiles"]["tiny"] = tiny_profile(
        ["knn", "random_forest", "npt"],
        datasets,
        bishop={"datasets": ["breast_cancer"], "models": ["bishop"]},
        description="end-to-end test",
        max_configs=2,
        folds=[0, 1],
        model_overrides={
            "npt": {
                "max_configs": 2,
                "params": {
                    "embed_dim": 8,
                    "n_layers": 2,
                    "n_heads": 2,
                    "max_steps": 6,
                    "eval_every_epochs": 2,
                    "checkpoint_every_steps": 3,
                },
            },
            "bishop": {
                "max_configs": 2,
                "params": {
                    "embed_dim": 8,
                    "patch_size": 4,
                    "n_decoded": 4,
                    "d_model": 16,
                    "n_heads": 2,
                    "ffn_dim": 16,
                    "n_pooling": 5,
                    "n_levels": 2,
                    "merge_factor": 2,
                    "max_epochs": 2,
                    "checkpoint_every_epochs": 1,
                },
            },
        },
    )
    # k-NN trains its folds in one train_folds job, the random forest a train job per fold.
    raw["profiles"]["tiny"]["resources"] = {"training": {"folds_in_one_job": ["knn"]}}
    raw["profile"] = "tiny"
    # BiSHop's datasets all need downloads: the test gives its paper the embedded breast cancer set.
    raw["papers"]["bishop"]["datasets"]["breast_cancer"] = {
        "source": "breast_cancer",
        "protocol": "bishop_holdout",
        "search_space": "bishop_i",
        "group": "i",
    }
    raw["feature_sparsity"]["tiny"] = {
        "paper": "bishop",
        "models": ["bishop"],
        "fractions": [0.0, 0.5],
        "orders": ["random", "most_important"],
        "importance_trees": 10,
    }
    # Keep forests small so the test takes seconds (the baselines space serves both papers).
    raw["search_spaces"]["baselines"]["random_forest"]["params"]["n_estimators"] = {"choice": [20, 40]}


def _assert_kept_test_rows(job_dir, result):
    """Every training rule leaves the test rows as scored beside metrics.json; they recompute it."""
    from tabrepro.evaluation.job_predictions import read_predictions

    kept = read_predictions(job_dir / "test_predictions.npz")
    assert kept.n_rows == result["split"]["n_test"] and kept.fold == result["fold"]
    for metric, value in kept.metrics().items():
        assert value == pytest.approx(result["metrics"]["test"][metric], rel=1e-5, abs=1e-6), metric
    return kept


@pytest.mark.slow
def test_workflow_end_to_end_on_tiny_data(tmp_path):
    datasets = ["breast_cancer"]
    env = {}
    if SHARED_DATASETS is not None and (SHARED_DATASETS / "boston" / "housing.data").is_file():
        datasets.append("boston")  # exercises the fetch rule through a directory mirror
        env["TABREPRO_DATA_MIRROR"] = str(SHARED_DATASETS)
    work = copy_workflow(tmp_path, lambda raw: end_to_end_profile(raw, datasets))

    run = snakemake(work, "all", env=env)
    assert run.returncode == 0, run.stderr[-4000:]

    for dataset in datasets:
        for fold in (0, 1):
            job = work / f"results/npt/{dataset}/npt/fold{fold}"
            npt = json.loads((job / "metrics.json").read_text())
            assert npt["selection"]["n_configs"] == 2 and npt["selection"]["variant"] in ("vanilla", "layers16")
            chosen = json.loads((job / f"config{npt['selection']['best_index']}/result.json").read_text())
            assert chosen["metrics"]["val"] == npt["metrics"]["val"]  # chosen on validation
            assert (job / "weights.pt").read_bytes() == (
                job / f"config{npt['selection']['best_index']}/weights.pt"
            ).read_bytes()
            assert not (job / "config0/state").exists()  # resumable until its result was written
            _assert_kept_test_rows(job, npt)
        for model in ("knn", "random_forest"):
            for fold in (0, 1):
                result = json.loads((work / f"results/npt/{dataset}/{model}/fold{fold}/metrics.json").read_text())
                assert result["selection"]["n_configs"] == 2
                assert result["split"]["sha256"] and result["provenance"]["packages"]["scikit-learn"]
                key = "auroc" if dataset == "breast_cancer" else "rmse"
                assert result["metrics"]["test"][key] > 0
                _assert_kept_test_rows(work / f"results/npt/{dataset}/{model}/fold{fold}", result)
    table10 = (work / "results/tables/npt/table10.md").read_text()
    assert "k-NN" in table10 and "Random Forest" in table10 and "0.98" in table10  # paper value beside ours
    assert "NPT" in table10
    for name in ("table1", "table8", "table9", "table11", "table12"):
        for ext in ("md", "tex", "csv"):
            assert (work / f"results/tables/npt/{name}.{ext}").is_file()
    assert (work / "logs/train/npt/breast_cancer/knn/folds.log").is_file()  # both folds, one job
    assert (work / "logs/train/npt/breast_cancer/random_forest/fold0.log").is_file()

    # BiSHop: two configurations, the winner (chosen on validation) retrained with 3 seeds.
    bishop = json.loads((work / "results/bishop/breast_cancer/bishop/fold0/metrics.json").read_text())
    assert bishop["selection"]["n_configs"] == 2 and len(bishop["test_repeats"]) == 3
    assert bishop["metrics"]["test"]["auroc"] == pytest.approx(np.mean([r["auroc"] for r in bishop["test_repeats"]]))
    assert _assert_kept_test_rows(work / "results/bishop/breast_cancer/bishop/fold0", bishop).n_runs == 3
    assert "BiSHop" in (work / "results/tables/bishop/fig4_1.md").read_text()
    # Its feature-sparsity curve, averaged into a plot and shown in the report.
    curve = json.loads((work / "results/feature_sparsity/bishop/breast_cancer/bishop/fold0.json").read_text())
    assert curve["selected_config"] == bishop["selected_config"] and len(curve["points"]) == 4
    assert (work / "results/feature_sparsity/bishop/curves.png").read_bytes()[:4] == b"\x89PNG"
    report = (work / "results/report/index.html").read_text()
    assert "Feature sparsity (BiSHop Fig. 4.1, right)" in report and "feature_sparsity.png" in report

    # Nothing left to do; then one target rerun on its own, through each kind of training job.
    assert "Nothing to be done" in snakemake(work, "-n", "all").stdout + snakemake(work, "-n", "all").stderr
    for model in ("knn", "random_forest"):
        target = f"results/npt/breast_cancer/{model}/fold1/metrics.json"
        before = json.loads((work / target).read_text())
        rerun = snakemake(work, "--forcerun", target, "--", target)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        after = json.loads((work / target).read_text())
        assert after["metrics"] == before["metrics"]  # deterministic on CPU
        assert after["selected_config"] == before["selected_config"]


def test_paper_profile_dry_run_lists_every_job_quickly(tmp_path):
    work = copy_workflow(tmp_path)
    started = time.perf_counter()
    run = snakemake(work, "-n", "--config", "profile=paper", "--", "all", timeout=120)
    elapsed = time.perf_counter() - started
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout + run.stderr
    raw = repo_raw_params()
    for paper in ("npt", "bishop"):
        for dataset in raw["papers"][paper]["datasets"]:
            assert f"results/{paper}/{dataset}/" in out, f"no job for {paper}/{dataset}"
    print(f"dry run of the paper profile: {elapsed:.1f} s (goal: < 5 s; see `make dryrun-paper`)")


def test_a_misspelt_key_in_params_yaml_stops_the_workflow_with_one_line(tmp_path):
    work = copy_workflow(tmp_path, lambda raw: raw.update(sede=1))
    run = snakemake(work, "-n", "--", "all", timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "tabrepro: error: params.yaml: at <top level>: Additional properties are not allowed ('sede' was unexpected)"
    ]


def test_config_override_other_than_profile_is_refused(tmp_path):
    work = copy_workflow(tmp_path)
    run = snakemake(work, "-n", "--config", "seed=3", "--", "all", timeout=120)
    assert run.returncode != 0
    assert "--config may only set 'profile'" in run.stdout + run.stderr


@pytest.mark.slow
def test_folds_in_one_job_train_and_draw_curves_through_the_workflow(tmp_path):
    """folds_in_one_job through Snakemake: k-NN's two folds trained by one train_folds job, their
    feature-sparsity curves by one feature_sparsity_folds job; one fold's file is still a target."""

    def profile(raw: dict) -> None:
        raw["profiles"]["grouped"] = tiny_profile(
            ["knn"], description="fold groups", max_configs=2, folds=[0, 1],
            resources={"training": {"folds_in_one_job": ["knn"]}},
        )  # fmt: skip
        raw["profile"] = "grouped"
        raw["feature_sparsity"]["grouped"] = {
            "paper": "npt", "models": ["knn"], "fractions": [0.0, 0.5], "orders": ["random"], "importance_trees": 5,
        }  # fmt: skip

    work = copy_workflow(tmp_path, profile)
    curves = "results/feature_sparsity/npt/curves.csv"
    run = snakemake(work, curves)
    assert run.returncode == 0, run.stderr[-4000:]
    out = run.stdout + run.stderr
    assert "rule train_folds_npt_breast_cancer:" in out and "rule feature_sparsity_folds_npt_breast_cancer:" in out
    assert "rule train:" not in out and "rule feature_sparsity:" not in out
    for fold in (0, 1):
        assert json.loads((work / f"results/npt/breast_cancer/knn/fold{fold}/metrics.json").read_text())["metrics"]
        curve = json.loads((work / f"results/feature_sparsity/npt/breast_cancer/knn/fold{fold}.json").read_text())
        assert len(curve["points"]) == 2
    assert (work / "logs/train/npt/breast_cancer/knn/folds.log").is_file()
    assert (work / "logs/feature_sparsity/npt/breast_cancer/knn/folds.log").is_file()
    target = "results/feature_sparsity/npt/breast_cancer/knn/fold1.json"
    rerun = snakemake(work, "--forcerun", target, "--", target)
    assert rerun.returncode == 0 and "rule feature_sparsity_folds_npt_breast_cancer:" in rerun.stdout + rerun.stderr
