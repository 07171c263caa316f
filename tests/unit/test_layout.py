"""The run layout (tabrepro.layout): every pattern spells the on-disk layout that earlier runs wrote,
so Snakemake reuses their files; patterns fill correctly; modules that name files agree with it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import REPO
from tabrepro import layout as layout_module
from tabrepro.config import Job, Params
from tabrepro.layout import PathPattern, RunLayout

# The layout as the workflow has always written it (changing a line here means existing runs are
# no longer found where they are: every job would rerun).
EXPECTED = {
    "raw_dir": "{data}/raw",
    "fetch_status": "{data}/raw/{source}/fetch_status.json",
    "availability": "{data}/raw/availability-{digest}.txt",
    "processed_dir": "{data}/processed/{source}",
    "processed_table": "{data}/processed/{source}/table.parquet",
    "processed_schema": "{data}/processed/{source}/schema.json",
    "split_dir": "{data}/splits/{paper}/{dataset}",
    "split_manifest": "{data}/splits/{paper}/{dataset}/splits.json",
    "split_fold": "{data}/splits/{paper}/{dataset}/fold{fold}.npy",
    "job_dir": "{results}/{paper}/{dataset}/{model}/fold{fold}",
    "job_metrics": "{results}/{paper}/{dataset}/{model}/fold{fold}/metrics.json",
    "job_weights": "{results}/{paper}/{dataset}/{model}/fold{fold}/weights.pt",
    "job_test_predictions": "{results}/{paper}/{dataset}/{model}/fold{fold}/test_predictions.npz",
    "config_batch": "{results}/{paper}/{dataset}/{model}/fold{fold}/batch{batch}.json",
    "config_dir": "{results}/{paper}/{dataset}/{model}/fold{fold}/config{config}",
    "config_result": "{results}/{paper}/{dataset}/{model}/fold{fold}/config{config}/result.json",
    "config_predictions": "{results}/{paper}/{dataset}/{model}/fold{fold}/config{config}/predictions.npz",
    "config_weights": "{results}/{paper}/{dataset}/{model}/fold{fold}/config{config}/weights.pt",
    "tables_dir": "{results}/tables/{paper}",
    "table": "{results}/tables/{paper}/{table}.{ext}",
    "scorecard_dir": "{results}/scorecard",
    "scorecard_paper_dir": "{results}/scorecard/{paper}",
    "scorecard_markdown": "{results}/scorecard/scorecard.md",
    "scorecard_csv": "{results}/scorecard/scorecard.csv",
    "scorecard_summary": "{results}/scorecard/summary.json",
    "report_dir": "{results}/report",
    "report_index": "{results}/report/index.html",
    "analysis_dir": "{results}/analysis",
    "analysis_fold_result": "{results}/analysis/{experiment}/{dataset}/fold{fold}/result.json",
    "analysis_lookup_result": "{results}/analysis/lookup/{dataset}/result.json",
    "sparsity_result": "{results}/feature_sparsity/{paper}/{dataset}/{model}/fold{fold}.json",
    "sparsity_curves_png": "{results}/feature_sparsity/{paper}/curves.png",
    "sparsity_curves_csv": "{results}/feature_sparsity/{paper}/curves.csv",
    "sparsity_summary": "{results}/feature_sparsity/{paper}/summary.json",
    "fetch_log": "{logs}/fetch/{source}.log",
    "availability_log": "{logs}/availability.log",
    "prepare_log": "{logs}/prepare/{source}.log",
    "split_log": "{logs}/split/{paper}/{dataset}.log",
    "train_log": "{logs}/train/{paper}/{dataset}/{model}/fold{fold}.log",
    "train_folds_log": "{logs}/train/{paper}/{dataset}/{model}/folds.log",
    "config_batch_log": "{logs}/train/{paper}/{dataset}/{model}/fold{fold}/batch{batch}.log",
    "select_log": "{logs}/train/{paper}/{dataset}/{model}/fold{fold}/select.log",
    "tables_log": "{logs}/tables/{paper}.log",
    "scorecard_log": "{logs}/scorecard.log",
    "report_log": "{logs}/report/html.log",
    "analysis_fold_log": "{logs}/analysis/{experiment}/{dataset}/fold{fold}.log",
    "analysis_lookup_log": "{logs}/analysis/lookup/{dataset}.log",
    "sparsity_log": "{logs}/feature_sparsity/{paper}/{dataset}/{model}/fold{fold}.log",
    "sparsity_folds_log": "{logs}/feature_sparsity/{paper}/{dataset}/{model}/folds.log",
    "sparsity_plot_log": "{logs}/feature_sparsity/{paper}/plot.log",
}


def test_every_entry_spells_the_layout_runs_were_written_with():
    assert RunLayout.entries() == EXPECTED


def test_patterns_are_rooted_and_keep_snakemake_wildcards(repo_params):
    layout = repo_params.layout
    assert layout == RunLayout(Path("data"), Path("results"), REPO / "logs")  # logs beside params.yaml
    assert layout.job_metrics == "results/{paper}/{dataset}/{model}/fold{fold}/metrics.json"
    assert isinstance(layout.job_metrics, str) and isinstance(layout.job_metrics, PathPattern)
    assert layout.job_metrics.wildcards == ("paper", "dataset", "model", "fold")
    assert layout.scorecard_log == f"{REPO}/logs/scorecard.log" and layout.scorecard_log.wildcards == ()
    # As the workflow loads it (params.yaml in the working directory): the historical spelling.
    assert Params(repo_params.raw, source="params.yaml").layout.train_log == (
        "logs/train/{paper}/{dataset}/{model}/fold{fold}.log"
    )
    # Roots are spelt one way, and braces in a root are not taken for wildcards.
    odd = RunLayout(Path("./runs/{x}/"), Path("/tmp/r/"), Path("logs"))
    assert odd.processed_table == "runs/{{x}}/processed/{source}/table.parquet"
    assert odd.processed_table.path(source="boston") == Path("runs/{x}/processed/boston/table.parquet")
    assert odd.report_dir.path() == Path("/tmp/r/report")


def test_filling_a_pattern_from_a_job_and_keywords(repo_params):
    layout = repo_params.layout
    job = Job("npt", "boston", "npt", 3)
    assert layout.config_result.path(job, config=2) == Path("results/npt/boston/npt/fold3/config2/result.json")
    assert layout.split_fold.path(job) == Path("data/splits/npt/boston/fold3.npy")  # extra job fields unused
    assert layout.table.path(paper="npt", table="table8", ext="md") == Path("results/tables/npt/table8.md")
    with pytest.raises(ValueError, match="needs config"):
        layout.config_result.path(job)
    with pytest.raises(ValueError, match="has no wildcard colour"):
        layout.job_metrics.path(job, colour="red")


def test_params_shorthands_and_environment_overrides(repo_params, monkeypatch, tmp_path):
    job = Job("npt", "boston", "knn", 0)
    assert repo_params.job_dir(job) == Path("results/npt/boston/knn/fold0")
    assert repo_params.config_dir(job, 4) == Path("results/npt/boston/knn/fold0/config4")
    assert repo_params.split_dir("npt", "boston") == Path("data/splits/npt/boston")
    assert repo_params.processed_dir("boston") == Path("data/processed/boston")
    assert repo_params.raw_dir() == Path("data/raw")
    assert repo_params.tables_dir("npt") == Path("results/tables/npt")
    monkeypatch.setenv("TABREPRO_RESULTS_DIR", str(tmp_path / "record" / "results"))
    assert repo_params.layout.job_metrics.path(job) == tmp_path / "record/results/npt/boston/knn/fold0/metrics.json"
    elsewhere = Params(repo_params.raw, source=str(tmp_path / "params.yaml"))
    assert elsewhere.logs_dir == tmp_path / "logs"  # logs beside the parameters file
    assert replace(elsewhere.layout, logs=Path("L")).train_log.path(job) == Path("L/train/npt/boston/knn/fold0.log")


def test_only_the_layout_spells_the_file_names():
    """Every module takes a run's file names from tabrepro.layout: none spells one as a literal."""
    names = [value for key, value in vars(layout_module).items() if key.endswith("_FILE") and isinstance(value, str)]
    assert "metrics.json" in names and "splits.json" in names
    src = Path(layout_module.__file__).parent
    offenders = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "layout.py":
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [
            f"{path.relative_to(src)}: {name}" for name in names if f'"{name}"' in text or f"'{name}'" in text
        ]
    assert offenders == []


def test_split_fold_path_matches_the_layout():
    from tabrepro import splits

    assert splits.fold_path(Path("d"), 7) == RunLayout(Path("x"), Path("r"), Path("l")).split_fold.path(
        paper="p", dataset="d", fold=7
    ).relative_to("x/splits/p")
