"""The papers' headline claims: quoted as params.yaml states them (`papers.<paper>.claims`), read
against the paper's own printed numbers (printed.py: no compute), and judged on our runs (ours.py).

spec.py reads a claim and the numbers it rests on; logic.py says what each kind of claim asserts,
so that both checks read a sentence the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabrepro.reporting.claims.ours import (
    CONTRADICTED,
    INCONCLUSIVE,
    MIN_DATASETS,
    NOT_JUDGED,
    NOT_RUN,
    SUPPORTED,
    TOO_FEW,
    judge_ours,
)
from tabrepro.reporting.claims.printed import CONSISTENT, INCONSISTENT, NOT_CHECKABLE, check_printed
from tabrepro.reporting.claims.spec import KINDS, claims_of, printed_grid
from tabrepro.reporting.scorecard import Scorecard

__all__ = [
    "CLAIMS_HEADING",
    "CLAIM_HEADER",
    "CONSISTENT",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "INCONSISTENT",
    "KINDS",
    "MIN_DATASETS",
    "NOT_CHECKABLE",
    "NOT_JUDGED",
    "NOT_RUN",
    "SUPPORTED",
    "TOO_FEW",
    "ClaimVerdict",
    "claim_rows",
    "judge_claims",
]

CLAIMS_HEADING = "The papers' claims: against their own numbers and against our runs"
CLAIM_HEADER = ["Paper", "Claim (quoted)", "Rests on", "The paper's own numbers", "Our runs"]


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim, its check against the paper's printed numbers and its verdict on our runs."""

    paper: str
    name: str
    quote: str
    location: str
    kind: str
    rests_on: str
    paper_verdict: str
    paper_numbers: str
    verdict: str
    numbers: str
    datasets: tuple[str, ...]


def judge_claims(params: Any, card: Scorecard) -> list[ClaimVerdict]:
    """Every claim of the card's papers, in params.yaml order."""
    seed = int(params.raw["seed"])
    verdicts = []
    for paper in card.papers:
        for claim in claims_of(params, paper):
            printed = check_printed(params, claim, card.rules)
            grid = printed_grid(params, claim) if claim.kind != "unprinted" else {}
            methods = list(dict.fromkeys(m for row in grid.values() for m in row))
            m = len([d for d, row in grid.items() if not claim.method or claim.method in row])
            ours = judge_ours(params, claim, card.cells, card.rules, methods, m, seed)
            verdicts.append(
                ClaimVerdict(
                    paper=paper,
                    name=claim.name,
                    quote=claim.quote,
                    location=claim.location,
                    kind=claim.kind,
                    rests_on=claim.rests_on,
                    paper_verdict=printed.verdict,
                    paper_numbers=printed.numbers,
                    verdict=ours.verdict,
                    numbers=ours.numbers,
                    datasets=ours.datasets,
                )  # fmt: skip
            )
    return verdicts


def claim_rows(claims: Sequence[ClaimVerdict]) -> list[list[str]]:
    """Rows for the claims table (Markdown and HTML): the sentence, then both checks side by side."""
    return [
        [
            c.paper,
            f"“{c.quote}” ({c.location})",
            f"{c.rests_on}; {c.kind.replace('_', ' ')}",
            f"{c.paper_verdict}: {c.paper_numbers}",
            f"{c.verdict}: {c.numbers}",
        ]
        for c in claims
    ]
