"""The reproduction scorecard: for every cell of every paper table, do we reproduce the paper?

The tables put ours beside the paper's number; this package judges each pair with the rules of
tabrepro.reporting.verdicts (a declared margin δ per metric, two one-sided tests for `reproduced`,
Benjamini–Hochberg within the table for `differs`), from the spread that two independent runs of
each side's protocol would show (sides.py, with tabrepro.reporting.spreads). Numbers the paper
quotes from other papers keep a verdict but are counted apart; rows the paper does not have are
`ours only` and not counted. A cell that cannot be judged says why: `not comparable` (substitute
data), `not run` with the reason found on disk (context.py: the dataset's fetch error, the
profile's `not_run` entry, a failed job's log, nothing run yet), or `inconclusive` with how many
runs of ours would decide it. judge.py builds the card; card.py holds it and its tallies.
Rendering lives in tabrepro.reporting.scorecard_markdown.

Outputs carry no timestamps, so DVC sees summary.json change only when a verdict changes.
"""

from tabrepro.reporting.scorecard.card import (
    CAPPED,
    COUNT_GROUPS,
    COUNT_KEYS,
    OWN,
    QUOTED,
    UNCOUNTED,
    VERDICTS,
    Scorecard,
    ScorecardError,
    ScoreCell,
    cells_frame,
    counts,
    higher_is_better,
    summary,
)
from tabrepro.reporting.scorecard.judge import build_scorecard, rules_of

__all__ = [
    "COUNT_GROUPS",
    "COUNT_KEYS",
    "CAPPED",
    "OWN",
    "QUOTED",
    "UNCOUNTED",
    "VERDICTS",
    "ScoreCell",
    "Scorecard",
    "ScorecardError",
    "build_scorecard",
    "cells_frame",
    "counts",
    "higher_is_better",
    "rules_of",
    "summary",
]
