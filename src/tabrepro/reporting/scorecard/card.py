"""What a scorecard holds: the judged cells, the verdicts' tallies, and the DVC metrics summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pandas as pd

from tabrepro.errors import InputError
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.reporting.verdicts import (
    DIFFERS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_RUN,
    OURS_ONLY,
    REPRODUCED,
    SHIFTED,
    UNDECIDABLE,
    VerdictRules,
)

VERDICTS = (REPRODUCED, DIFFERS, SHIFTED, UNDECIDABLE, INCONCLUSIVE, NOT_COMPARABLE, NOT_RUN, OURS_ONLY)
COUNT_KEYS = {v: v.replace(" ", "_") for v in VERDICTS}


# Which tally a cell enters: the paper's own runs at the paper's protocol; numbers it quotes from
# other papers; cells our run made below the paper's protocol (a capped search, fixed settings:
# another experiment); or none (rows the paper does not have). Each is also its own
# Benjamini–Hochberg family within a table.
OWN, QUOTED, CAPPED, UNCOUNTED = "own", "quoted", "capped", "none"
COUNT_GROUPS = (OWN, QUOTED, CAPPED)


class ScorecardError(InputError, ValueError):
    """An input the scorecard cannot use (unknown paper, unreadable fetch record); names it."""


@dataclass(frozen=True)
class ScoreCell:
    """One judged cell: a paper's table × dataset (or task type, for ranks) × method."""

    paper: str
    table: str
    reference_table: str
    metric: str
    column: str
    method: str
    model: str | None
    ours_mean: float | None
    ours_se: float | None
    ours_se_basis: str | None
    n: int | None
    n_expected: int | None
    paper_value: float | None
    paper_text: str | None
    paper_se: float | None
    paper_se_basis: str | None
    paper_origin: str | None
    quoted_from: str | None
    paper_selected_on: str | None
    margin: float | None
    margin_text: str | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    ci90_low: float | None
    ci90_high: float | None
    p_difference: float | None
    p_adjusted: float | None
    p_minimum_effect: float | None
    p_minimum_effect_adjusted: float | None
    margin_needed: float | None
    more_runs: int | None
    verdict_class: str
    verdict: str
    better_or_worse: str | None
    count_group: str
    counted_with: str | None
    budget: str | None
    reason: str | None
    notes: str


@dataclass
class Scorecard:
    """Every judged cell of the papers a profile selects, and the datasets it could not obtain."""

    profile: str
    papers: list[str]
    titles: dict[tuple[str, str], str]
    rules: VerdictRules
    cells: list[ScoreCell] = field(default_factory=list)
    unobtainable: dict[str, dict[str, str]] = field(default_factory=dict)


def higher_is_better(metric: str) -> bool | None:
    """The metric's direction; ranks are better when lower; None when unknown."""
    if metric in HIGHER_IS_BETTER:
        return HIGHER_IS_BETTER[metric]
    return False if metric.startswith("rank") else None


def counts(cells: Iterable[ScoreCell]) -> dict[str, Any]:
    """Cells per verdict, the paper's own runs apart from the numbers it quotes and from our capped
    runs; `ours only` cells (rows the paper lacks) are listed but enter no tally, and a cell that is
    another table's fit on another scale (`counted_with`, MSE = RMSE²) is counted there, once."""
    cells = [c for c in cells if c.counted_with is None]

    def tally(group: Iterable[ScoreCell]) -> dict[str, int]:
        found = Counter(c.verdict_class for c in group)
        out = {COUNT_KEYS[v]: found.get(v, 0) for v in VERDICTS if v != OURS_ONLY}
        out["cells"] = sum(out.values())
        out["better"] = sum(1 for c in group if c.verdict_class == DIFFERS and c.better_or_worse == "better")
        out["worse"] = sum(1 for c in group if c.verdict_class == DIFFERS and c.better_or_worse == "worse")
        return out

    result: dict[str, Any] = {group: tally([c for c in cells if c.count_group == group]) for group in COUNT_GROUPS}
    result["ours_only"] = sum(1 for c in cells if c.verdict_class == OURS_ONLY)
    return result


def summary(card: Scorecard) -> dict[str, Any]:
    """The DVC metrics file: counts nested by paper and table, and the unobtainable datasets."""
    papers: dict[str, Any] = {}
    for paper in card.papers:
        mine = [c for c in card.cells if c.paper == paper]
        tables = dict.fromkeys(c.table for c in mine)
        papers[paper] = {"all": counts(mine), **{t: counts(c for c in mine if c.table == t) for t in tables}}
    return {
        "profile": card.profile,
        "margins": {
            m.metric: m.describe(1.0) if not m.relative else f"±{m.value:g} × |paper|"
            for m in card.rules.margins.values()
        },
        "all": counts(card.cells),
        "papers": papers,
        "unobtainable": card.unobtainable,
    }


def cells_frame(card: Scorecard) -> pd.DataFrame:
    """One row per cell with every field (the CSV)."""
    return pd.DataFrame([asdict(c) for c in card.cells], columns=[f.name for f in fields(ScoreCell)])
