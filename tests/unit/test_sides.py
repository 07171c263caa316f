"""Each side's spread (tabrepro.reporting.scorecard.sides): sampling SEs at the pooled value, the
k-fold factor only where a qualifying split-seed record measured it and never on the paper's side."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from scipy import stats

from conftest import REPO
from tabrepro.reference import PaperValue
from tabrepro.reporting.scorecard import sides
from tabrepro.reporting.spreads import qualified_factors
from tabrepro.reporting.tables import Cell

SETTINGS = {"min_datasets": 4, "min_split_seeds": 20, "level": 0.90}


class FakeParams:
    """What the side functions read of a Params: the verdicts section, protocols, search budget."""

    def __init__(self, root: Path, record: str, kind: str = "kfold", max_configs: int = 6):
        self.source = str(root / "params.yaml")
        self.raw = {
            "verdicts": {"spread_calibration": {"record": record, **SETTINGS}},
            "search_spaces": {"space": {"knn": {"n_configs": 20}}},
        }
        self.kind, self.max_configs = kind, max_configs

    def protocol(self, paper: str, dataset: str) -> dict[str, Any]:
        return {"kind": self.kind, "n_folds": 10} if self.kind == "kfold" else {"kind": "holdout"}

    def repeats(self, paper: str, dataset: str) -> int:
        return 3

    def dataset_entry(self, paper: str, dataset: str) -> dict[str, str]:
        return {"search_space": "space"}

    def n_configs(self, paper: str, dataset: str, model: str) -> int:
        return self.max_configs


def _row(dataset: str, ratio: float, seeds: int = 40, metric: str = "rmse") -> dict[str, Any]:
    return {
        "dataset": dataset,
        "model": "knn",
        "metric": metric,
        "n_seeds": seeds,
        "empirical_sd": ratio * 0.5,
        "assigned_se_mean": 0.5,
    }


def _record(tmp_path: Path, rows: list[dict[str, Any]], max_configs: int = 6) -> str:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"settings": {"max_configs": max_configs}, "summary": rows}))
    sides._read_record.cache_clear()
    return path.name


def _upper(ratio: float, seeds: int) -> float:
    return ratio * math.sqrt((seeds - 1) / stats.chi2.ppf(0.10, seeds - 1))


FOUR = ["a", "b", "c", "d"]


def test_a_factor_needs_four_datasets_twenty_seeds_and_the_same_budget(tmp_path):
    rows = [_row(d, r) for d, r in zip(FOUR, (0.5, 0.6, 0.55, 0.62), strict=True)]
    found = qualified_factors({"settings": {"max_configs": 6}, "summary": rows}, max_configs=6, source="r", **SETTINGS)
    factor = found[("knn", "rmse")]
    assert factor.factor == pytest.approx(round(_upper(0.62, 40), 2)) and factor.factor < 1
    assert factor.datasets == tuple(FOUR) and "upper 90 % bound" in factor.basis
    kw = dict(source="r", **SETTINGS)
    assert not qualified_factors({"settings": {"max_configs": 6}, "summary": rows[:3]}, max_configs=6, **kw)
    few_seeds = [*rows[:3], _row("d", 0.62, seeds=19)]
    assert not qualified_factors({"settings": {"max_configs": 6}, "summary": few_seeds}, max_configs=6, **kw)
    assert not qualified_factors({"settings": {"max_configs": 6}, "summary": rows}, max_configs=50, **kw)
    near_one = [_row(d, 0.95) for d in FOUR]  # its upper bound is above 1: no shrinking
    assert not qualified_factors({"settings": {"max_configs": 6}, "summary": near_one}, max_configs=6, **kw)


def test_the_committed_record_qualifies_no_factor():
    """The split-seed record measures two datasets: every k-fold SE stays plain SD/√n."""
    section = yaml.safe_load((REPO / "params.yaml").read_text())["verdicts"]["spread_calibration"]
    record = json.loads((REPO / section["record"]).read_text())
    settings = {k: section[k] for k in ("min_datasets", "min_split_seeds", "level")}
    for budget in (None, record["settings"]["max_configs"]):
        assert qualified_factors(record, max_configs=budget, source="r", **settings) == {}


def test_our_kfold_se_uses_a_factor_only_with_its_record(tmp_path):
    cell = Cell("rmse", ours_mean=4.0, ours_spread=0.3, count=10)  # SE over 10 folds
    good = FakeParams(tmp_path, _record(tmp_path, [_row(d, 0.6) for d in FOUR]))
    shrunk = sides.ours_side(good, "npt", "boston", "knn", cell, "se", {})
    assert shrunk.se == pytest.approx(round(_upper(0.6, 40), 2) * 0.3) and "upper 90 %" in shrunk.basis
    # while the qualifying record is in place (the records below are written to the same file)
    other_model = sides.ours_side(good, "npt", "boston", "xgboost", cell, "se", {})
    assert other_model.se == pytest.approx(0.3)
    missing = FakeParams(tmp_path, "no-such-record.json")
    assert sides.ours_side(missing, "npt", "boston", "knn", cell, "se", {}).se == pytest.approx(0.3)
    short = FakeParams(tmp_path, _record(tmp_path, [_row(d, 0.6) for d in FOUR[:2]]))
    assert sides.ours_side(short, "npt", "boston", "knn", cell, "se", {}).se == pytest.approx(0.3)


def test_the_papers_kfold_spread_is_never_shrunk(tmp_path):
    params = FakeParams(tmp_path, _record(tmp_path, [_row(d, 0.6) for d in FOUR]))
    value = PaperValue(4.2, 0.5, "sd", "4.2", "0.5")
    paper = sides.paper_side(params, "npt", "boston", {"metric": "rmse"}, value, None, {})
    assert paper.se == pytest.approx(0.5 / math.sqrt(10)) and paper.df == 9
    value_se = PaperValue(4.2, 0.2, "se", "4.2", "0.2")
    assert sides.paper_side(params, "npt", "boston", {"metric": "rmse"}, value_se, None, {}).se == 0.2


def _holdout_folds(n_test: int, counts: dict[str, int] | None = None) -> dict[int, dict[str, Any]]:
    split: dict[str, Any] = {"n_test": n_test}
    if counts:
        split["test_class_counts"] = counts
    return {0: {"split": split}}


def test_one_split_sampling_se_is_taken_at_the_pooled_value(tmp_path):
    """A printed 100.00 does not carry SE 0: both sides' binomial SE is at their mean."""
    params = FakeParams(tmp_path, "none.json", kind="holdout")
    folds = _holdout_folds(400)
    cell = Cell("accuracy_pct", ours_mean=100.0, count=1)
    ours = sides.ours_side(params, "bishop", "spambase", "xgboost", cell, "se", folds, paper_value=98.0)
    expected = 100 * math.sqrt(0.99 * 0.01 / 400)
    assert ours.se == pytest.approx(expected) and "pooled value 99" in ours.basis
    value = PaperValue(98.0, None, None, "98.0", None)
    paper = sides.paper_side(params, "bishop", "spambase", {"metric": "accuracy_pct"}, value, ours, folds)
    assert paper.se == pytest.approx(expected)


def test_auroc_at_one_hundred_gets_the_pooled_hanley_mcneil_se(tmp_path):
    params = FakeParams(tmp_path, "none.json", kind="holdout")
    folds = _holdout_folds(461, {"0": 280, "1": 181})
    cell = Cell("auc_pct", ours_mean=99.0, count=1)
    value = PaperValue(100.0, None, None, "100.00", None)
    ours = sides.ours_side(params, "bishop", "spambase", "xgboost", cell, "se", folds, paper_value=100.0)
    paper = sides.paper_side(params, "bishop", "spambase", {"metric": "auc_pct"}, value, ours, folds)
    assert paper.se > 0 and paper.se == pytest.approx(ours.se)


def test_a_bootstrap_se_is_carried_to_the_pooled_value(tmp_path):
    """NLL has no closed form: the saved predictions' bootstrap SE, scaled to the pooled value."""
    params = FakeParams(tmp_path, "none.json", kind="holdout")
    cell = Cell("nll", ours_mean=0.10, count=1)
    boot = {"nll": (0.02, "stratified bootstrap")}.get
    ours = sides.ours_side(params, "npt", "breast_cancer", "npt", cell, "se", _holdout_folds(57), 0.14, boot)
    assert ours.se == pytest.approx(0.02 * 0.12 / 0.10) and "carried to the pooled value" in ours.basis
    without = sides.ours_side(params, "npt", "breast_cancer", "npt", cell, "se", _holdout_folds(57), 0.14)
    assert without.se is None and "no saved test predictions" in without.basis
