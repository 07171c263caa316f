"""The papers' headline claims judged on our runs (tabrepro.reporting.claims)."""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace

import pytest

from tabrepro.reporting.claims import CONTRADICTED, SUPPORTED, judge_claims
from tabrepro.reporting.scorecard import Scorecard, ScoreCell
from tabrepro.reporting.verdicts import Margin, VerdictRules

RULES = VerdictRules({"auc_pct": Margin("auc_pct", 1.0, False, "test"), "rmse": Margin("rmse", 0.05, True, "t")})


def _cell(dataset: str, model: str, value: float, metric: str = "auc_pct", table: str = "t") -> ScoreCell:
    blank = {f.name: None for f in fields(ScoreCell)}
    return ScoreCell(**blank | dict(paper="p", table=table, metric=metric, column=dataset, method=model, model=model,
                                    ours_mean=value, verdict_class="reproduced", verdict="", count_group="own",
                                    notes=""))  # fmt: skip


def _params(claims: dict) -> SimpleNamespace:
    tables = {"t": {"metric": "auc_pct"}}
    return SimpleNamespace(paper=lambda name: {"claims": claims, "tables": tables}, raw={"seed": 0})


def _judge(values: dict[str, tuple[float, float]], metric: str = "auc_pct", **spec) -> object:
    cells = [_cell(d, "a", a, metric) for d, (a, _) in values.items()] + [
        _cell(d, "b", b, metric) for d, (_, b) in values.items()
    ]
    card = Scorecard(profile="x", papers=["p"], titles={}, rules=RULES, cells=cells)
    claim = {"text": "a beats b", "source": "§1", "table": "t", "model": "a", "over": ["b"], **spec}
    (verdict,) = judge_claims(_params({"c": claim}), card)
    return verdict


def test_a_consistent_advantage_is_supported_and_names_its_datasets():
    v = _judge({f"d{i}": (90.0 + i / 10, 88.0) for i in range(6)})
    assert v.verdict == SUPPORTED and v.datasets == tuple(f"d{i}" for i in range(6))
    assert v.mean_advantage == pytest.approx(2.25) and v.ci[0] > 0


def test_a_consistent_disadvantage_contradicts_it():
    assert _judge({f"d{i}": (85.0 + i / 10, 88.0) for i in range(6)}).verdict == CONTRADICTED


def test_lower_is_better_metrics_are_signed():
    assert _judge({f"d{i}": (3.0, 3.5 + i / 10) for i in range(5)}, metric="rmse").verdict == SUPPORTED


def test_by_a_margin_needs_the_ci_above_delta():
    values = {f"d{i}": (88.5 + i / 100, 88.0) for i in range(6)}
    assert _judge(values).verdict == SUPPORTED
    assert _judge(values, by_margin=True).verdict == "inconclusive"


def test_one_dataset_is_inconclusive_and_none_is_not_run():
    assert _judge({"d0": (95.0, 80.0)}).verdict == "inconclusive"
    card = Scorecard(profile="x", papers=["p"], titles={}, rules=RULES, cells=[_cell("d0", "a", 90.0)])
    claim = {"text": "a beats b", "source": "§1", "table": "t", "model": "a", "over": ["b"]}
    (v,) = judge_claims(_params({"c": claim}), card)
    assert v.verdict == "not run" and v.missing == ("d0",)
