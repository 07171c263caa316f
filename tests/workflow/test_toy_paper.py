"""A third paper added through configuration alone: a `papers.toy` entry in params.yaml (one
registry dataset, two cheap models, one table, one claim), its own reference CSV, a profile that
selects it, and nothing else. Its jobs train, and its tables, scorecard and report build through
the CLI; the workflow and dvc.yaml's generated blocks pick it up too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO, copy_workflow, snakemake
from tabrepro.cli import main as tabrepro_main

PROFILE = "toy_only"
REFERENCE = """paper,table,dataset,method,metric,value,spread,spread_kind,origin,quoted_from,selected_on
toy,1,breast_cancer,k-NN,auroc,0.990,0.004,se,own run,,validation
toy,1,breast_cancer,Random Forest,auroc,0.991,0.003,se,own run,,validation
toy,1,breast_cancer,TabNet,auroc,0.970,0.010,se,quoted,A quoted source (2020),
"""
FOLDS = [0, 1, 2]


def add_toy_paper(raw: dict, root: Path | None = None) -> None:
    """params.yaml with the toy paper, its protocol and search space, and a profile running it."""
    raw["protocols"]["toy_cv3"] = {"kind": "kfold", "n_folds": 3, "val_fraction": 0.2}
    raw["search_spaces"]["toy"] = {
        "knn": {"n_configs": 2, "params": {"n_neighbors": {"choice": [5, 15]}}},
        "random_forest": {"n_configs": 2, "params": {"n_estimators": {"choice": [10, 20]}}},
    }
    raw["papers"]["toy"] = {
        "title": "A toy paper (test only)",
        "reference": "toy_reference.csv",
        "models": {"knn": "k-NN", "random_forest": "Random Forest"},
        "claims": {
            "forest_beats_knn": {
                "quote": "The forest beats k-NN on every dataset.",
                "location": "Table 1",
                "kind": "margin",
                "tables": ["table1"],
                "method": "Random Forest",
                "over": ["k-NN"],
                "datasets": "every",
            }
        },
        "datasets": {"breast_cancer": {"source": "breast_cancer", "protocol": "toy_cv3", "search_space": "toy"}},
        "tables": {"table1": {"title": "Test AUROC", "metric": "auroc", "tasks": ["binary"]}},
    }
    raw["profiles"][PROFILE] = {
        "description": "the toy paper only",
        "max_configs": 2,
        "folds": FOLDS,
        "papers": {"toy": {"datasets": "all", "models": "all"}},
    }
    raw["profile"] = PROFILE
    if root is not None:
        raw["paths"] = {"data": str(root / "data"), "results": str(root / "results")}


def _cli(params: Path, *args: str) -> None:
    assert tabrepro_main(["--params", str(params), "-q", *args]) == 0, args


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """The toy paper's jobs trained and its tables, scorecard and report built, all by the CLI."""
    root = tmp_path_factory.mktemp("toy")
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    add_toy_paper(raw, root)
    params = root / "params.yaml"
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    (root / "toy_reference.csv").write_text(REFERENCE)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TABREPRO_DATA_DIR", raising=False)
        patch.delenv("TABREPRO_RESULTS_DIR", raising=False)
        _cli(params, "prepare", "breast_cancer")
        _cli(params, "split", "toy", "breast_cancer")
        for model in ("knn", "random_forest"):
            for fold in FOLDS:
                _cli(params, "train", "toy", "breast_cancer", model, str(fold))
        _cli(params, "tables", "toy")
        _cli(params, "scorecard")
        _cli(params, "report")
    return root


def test_the_toy_papers_table_puts_ours_beside_its_own_reference_numbers(toy_run):
    tidy = pd.read_csv(toy_run / "results/tables/toy/table1.csv")
    rows = {row.method: row for row in tidy.itertuples(index=False)}
    assert set(rows) == {"k-NN", "Random Forest", "TabNet"}
    for method in ("k-NN", "Random Forest"):
        assert rows[method].n_folds == len(FOLDS) and 0.5 < rows[method].ours_mean <= 1.0
    assert rows["k-NN"].paper_value == pytest.approx(0.990) and rows["TabNet"].paper_value == pytest.approx(0.970)
    assert pd.isna(rows["TabNet"].ours_mean)  # the paper's number only
    markdown = (toy_run / "results/tables/toy/table1.md").read_text()
    assert "A toy paper (test only), Table 1." in markdown and "0.990 ± 0.004" in markdown
    assert "toy-table1" in (toy_run / "results/tables/toy/table1.tex").read_text()


def test_the_toy_paper_is_judged_in_the_scorecard_with_its_claim(toy_run):
    summary = json.loads((toy_run / "results/scorecard/summary.json").read_text())
    assert list(summary["papers"]) == ["toy"]
    own, quoted = summary["papers"]["toy"]["table1"]["own"], summary["papers"]["toy"]["table1"]["quoted"]
    assert own["cells"] == 2 and own["not_run"] == 0  # both of our models ran and were judged
    assert quoted["cells"] == 1 and quoted["not_run"] == 1  # TabNet: the paper's (quoted) number only
    cells = pd.read_csv(toy_run / "results/scorecard/scorecard.csv")
    assert set(cells["paper"]) == {"toy"} and set(cells["reference_table"].astype(str)) == {"1"}
    card = (toy_run / "results/scorecard/scorecard.md").read_text()
    assert "The forest beats k-NN on every dataset." in card


def test_the_report_has_the_toy_papers_sections(toy_run):
    page = (toy_run / "results/report/index.html").read_text(encoding="utf-8")
    for anchor in ("toy-tables", "toy-scatter", "toy-ranks", "toy-cost"):
        assert f'id="{anchor}"' in page
    assert "The paper reports no compute cost." in page
    assert (toy_run / "results/report/forest-toy_table1.png").is_file()


def test_dvc_yaml_blocks_and_the_workflow_take_the_toy_paper(tmp_path):
    from tabrepro.dvc_blocks import update_dvc_yaml

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    add_toy_paper(raw)
    dvc_yaml = tmp_path / "dvc.yaml"
    shutil.copy(REPO / "dvc.yaml", dvc_yaml)
    assert "vars" in update_dvc_yaml(raw, dvc_yaml) and update_dvc_yaml(raw, dvc_yaml, check=True) == []
    spec = yaml.safe_load(dvc_yaml.read_text())
    assert "papers.toy.datasets" in spec["stages"]["data"]["params"]
    assert {"${paths.results}/toy": {"persist": True}} in spec["stages"]["train"]["outs"]
    assert spec["vars"][0]["tables_rules"].split()[-1] == "tables_toy"
    assert any("${paths.results}/tables/toy/table1.csv" in plot for plot in spec["plots"])

    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(work, add_toy_paper)
    (work / "toy_reference.csv").write_text(REFERENCE)
    dry = snakemake(work, "-n", "--quiet", "rules", "--", "all", timeout=300)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert "tables_toy" in dry.stdout + dry.stderr
