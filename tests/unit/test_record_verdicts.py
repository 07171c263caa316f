"""What every committed record's scorecard must show under the verdict rules: a `differs` only
with its 95 % CI wholly outside ±δ, no k-fold SE shrunk by a factor no record measured, and no
one-split sampling SE taken at a side's own value."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import REPO

SCORECARDS = sorted((REPO / "records" / "runs").glob("*/results/scorecard/scorecard.csv"))


@pytest.fixture(scope="module", params=SCORECARDS, ids=lambda p: p.parts[-4])
def card(request) -> pd.DataFrame:
    return pd.read_csv(request.param)


def test_every_differs_has_its_ci_wholly_outside_the_margin(card):
    differs = card[card["verdict_class"] == "differs"]
    outside = (differs["ci_low"] > differs["margin"]) | (differs["ci_high"] < -differs["margin"])
    assert outside.all(), differs[~outside][["table", "column", "method"]]


def test_no_spread_rests_on_an_unmeasured_factor(card):
    for column in ("ours_se_basis", "paper_se_basis"):
        bases = card[column].dropna().astype(str)
        assert not bases.str.contains("×").any() or bases[bases.str.contains("×")].str.contains("upper 90 %").all()
    assert not card["paper_se_basis"].dropna().astype(str).str.contains("upper 90 %").any()


def test_one_split_sampling_ses_are_at_the_pooled_value(card):
    compared = card[card["paper_value"].notna() & card["ours_se_basis"].notna()]
    sampled = compared[compared["ours_se_basis"].astype(str).str.contains("test rows")]
    assert sampled["ours_se_basis"].str.contains("pooled value|bootstrap").all()
    assert (sampled["ours_se"] > 0).all()


def test_undecidable_cells_are_counted_and_name_their_margin(card):
    undecidable = card[card["verdict_class"] == "cannot be decided"]
    assert (undecidable["margin_needed"] >= undecidable["margin"]).all()
