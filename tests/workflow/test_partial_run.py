"""A run where one dataset cannot be downloaded still finishes everything else.

The BiSHop paper gets two datasets: the embedded breast-cancer set and Blastchar, whose registry
entry has no public URL (mirror only). The mirror given is an empty directory, so Blastchar's fetch
fails wherever the test runs, network or not. The workflow must record that, train and tabulate
the other datasets of both papers, and end with a scorecard that names Blastchar and its error.
"""

from __future__ import annotations

import json

import pytest

from conftest import copy_workflow, snakemake, tiny_profile


def partial_profile(raw: dict) -> None:
    raw["profiles"]["partial"] = tiny_profile(
        ["knn"],
        bishop={"datasets": ["breast_cancer", "blastchar"], "models": ["knn", "xgboost"]},
        description="one dataset cannot be downloaded",
        max_configs=2,
        folds=[0, 1],
        not_run={"npt": "needs a GPU (test)"},
    )
    raw["profile"] = "partial"
    raw["fetch"].update(retries=0, timeout_seconds=5)
    raw["papers"]["bishop"]["datasets"]["breast_cancer"] = {
        "source": "breast_cancer",
        "protocol": "bishop_holdout",
        "search_space": "bishop_i",
        "group": "i",
    }
    raw["papers"]["bishop"]["models"]["knn"] = "k-NN"  # a cheap model; BiSHop's spaces have none for it
    raw["search_spaces"]["bishop_i"]["knn"] = raw["search_spaces"]["npt_small"]["knn"]


@pytest.mark.slow
def test_unobtainable_dataset_is_recorded_and_the_rest_finishes(tmp_path):
    work = copy_workflow(tmp_path, partial_profile)
    mirror = tmp_path / "empty_mirror"
    mirror.mkdir()

    run = snakemake(work, "--keep-going", "all", env={"TABREPRO_DATA_MIRROR": str(mirror)})
    assert run.returncode == 0, run.stderr[-4000:]

    status = json.loads((work / "data/raw/telco_churn/fetch_status.json").read_text())
    assert status["ok"] is False and "telco_churn" in status["error"]
    assert not (work / "results/bishop/blastchar").exists()  # no job was even attempted
    for paper, table in (("npt", "table10"), ("bishop", "fig4_1")):
        assert (work / f"results/{paper}/breast_cancer/knn/fold0/metrics.json").is_file()
        assert "breast_cancer" in (work / f"results/tables/{paper}/{table}.csv").read_text()

    summary = json.loads((work / "results/scorecard/summary.json").read_text())
    unobtainable = json.dumps(summary.get("unobtainable"))
    assert "blastchar" in unobtainable and "telco_churn" in unobtainable
    card = (work / "results/scorecard/scorecard.md").read_text()
    assert "blastchar" in card and "not obtainable" in card.lower()
    assert "needs a GPU (test)" in card  # NPT's cells say why they did not run
    assert (work / "results/report/index.html").is_file()

    # Nothing left to do: the recorded failure is not retried until its record is deleted.
    dry = snakemake(work, "-n", "all", env={"TABREPRO_DATA_MIRROR": str(mirror)})
    assert "Nothing to be done" in dry.stdout + dry.stderr
