"""The k-fold spread calibration: params.yaml's factors are what the committed split-seed record gives."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from conftest import REPO
from tabrepro.reporting.spreads import calibration_factors

SECTION = yaml.safe_load((REPO / "params.yaml").read_text())["verdicts"]["spread_calibration"]


def test_params_factors_match_the_committed_record():
    record = json.loads((REPO / SECTION["record"]).read_text())
    assert SECTION["kfold"] == calibration_factors(record["summary"])


def test_the_record_rests_on_at_least_twenty_split_seeds_per_cell():
    record = json.loads((REPO / SECTION["record"]).read_text())
    assert record["summary"] and min(row["n_seeds"] for row in record["summary"]) >= 20


def test_factors_are_the_root_mean_square_of_the_ratios():
    rows = [{"metric": "rmse", "ratio_assigned": 0.6}, {"metric": "rmse", "ratio_assigned": 0.8}]
    rows.append({"metric": "auroc", "ratio_assigned": 0.5})
    factors = calibration_factors(rows)
    assert factors["rmse"] == pytest.approx(round(math.sqrt((0.36 + 0.64) / 2), 2))
    assert factors["auc_pct"] == factors["auroc"] == 0.5  # the same metric on another scale
