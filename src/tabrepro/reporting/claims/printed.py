"""Each claim read against the paper's own printed numbers (reported_results.csv): no compute.

`consistent` when the printed tables bear the sentence out, `inconsistent` with the numbers that
break it, `not checkable from the paper` when no printed number can (a figure's curves, a p-value
with no table behind it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tabrepro.reference import lookup, reference_table_id
from tabrepro.reporting.claims.logic import (
    Outcome,
    ablation_outcome,
    best_count_outcome,
    margin_outcome,
    rank_facts,
    rank_outcome,
)
from tabrepro.reporting.claims.spec import Claim, Grid, compared_methods, goodness_sign, printed_grid
from tabrepro.reporting.verdicts import VerdictRules

CONSISTENT, INCONSISTENT, NOT_CHECKABLE = "consistent", "inconsistent", "not checkable from the paper"


@dataclass(frozen=True)
class PrintedCheck:
    """The claim against the paper's own numbers."""

    verdict: str
    numbers: str


def _values(grid: Grid) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    values = {d: {m: c.value for m, c in row.items()} for d, row in grid.items()}
    metrics = {d: next(iter(row.values())).metric for d, row in grid.items()}
    return values, metrics


def claim_margins(claim: Claim, grid: Grid, over: list[str], rules: VerdictRules) -> dict[str, float]:
    """Per dataset, the margin the claim asks for: its own `margin` (in the metric's units) or the
    metric's declared δ, relative ones taken of the strongest compared method's value there."""
    found = {}
    for dataset, row in grid.items():
        rivals = [row[m] for m in over if m in row]
        if claim.spec.get("margin") is not None:
            found[dataset] = float(claim.spec["margin"])
            continue
        cell = max(rivals, key=lambda c: goodness_sign(c.metric) * c.value) if rivals else None
        margin = rules.margin(cell.metric) if cell else None
        found[dataset] = margin.width(cell.value) if margin and cell else 0.0
    return found


def _printed_ranks(params: Any, claim: Claim) -> tuple[dict[str, float], str] | None:
    key = claim.spec.get("ranks_table")
    if not key or len(claim.tasks) != 1:
        return None
    cfg = params.paper(claim.paper)
    table_cfg = cfg["tables"][key]
    metric = table_cfg["paper_metrics"][claim.tasks[0]]
    table = reference_table_id(key, table_cfg)
    source = cfg.get("reference")
    labels = dict(cfg.get("models") or {}).values()
    ranks = {}
    for label in labels:
        value = lookup(claim.paper, table, "all", label, metric, source=source)
        if value is not None:
            ranks[label] = value.value
    return ranks, f"Table {table} ({metric})"


def _rank(params: Any, claim: Claim, grid: Grid) -> PrintedCheck:
    assert claim.method is not None  # the schema requires it of every kind but unprinted
    values, metrics = _values(grid)
    ahead = list(claim.spec.get("ahead") or ())
    ties = list(claim.spec.get("ties") or ())
    beats = list(claim.spec.get("beats") or ())
    named = [claim.method, *ahead, *ties, *beats]
    datasets = [d for d in values if all(m in values[d] for m in named)]
    recomputed = rank_outcome(values, metrics, datasets, claim.method, ahead, ties, beats)
    outcomes = [("recomputed from " + ", ".join(claim.tables), recomputed)]
    printed = _printed_ranks(params, claim)
    if printed:
        ranks, where = printed
        outcome = rank_facts(ranks, claim.method, ahead, ties, beats)
        outcomes.append((where + " prints", Outcome(outcome.holds, f"mean rank: {outcome.numbers}", outcome.breaks)))
    return _combine(outcomes)


def _combine(outcomes: list[tuple[str, Outcome]]) -> PrintedCheck:
    holds = all(o.holds for _, o in outcomes)
    parts = []
    for where, o in outcomes:
        parts.append(f"{where}: {o.numbers}" + (f" — breaks: {'; '.join(o.breaks)}" if o.breaks else ""))
    return PrintedCheck(CONSISTENT if holds else INCONSISTENT, ". ".join(parts))


def _hpo_share(claim: Claim, grid: Grid) -> PrintedCheck:
    spec = claim.spec
    runs = {d: row[claim.method].value for d, row in grid.items() if claim.method in row}
    shares = {d: n / float(spec["baseline_runs"]) for d, n in runs.items()}
    limit = float(spec["share"])
    mean = float(np.mean(list(shares.values())))
    over_limit = {d: s for d, s in shares.items() if s > limit}
    holds = mean < limit if spec.get("aggregate", "each") == "mean" else not over_limit
    top = max(shares, key=shares.__getitem__)
    numbers = (
        f"{claim.method}'s runs over {len(shares)} datasets: mean {np.mean(list(runs.values())):.1f} = "
        f"{mean:.1%} of the baselines' {spec['baseline_runs']:g} ({spec['baseline_runs_source']}); "
        f"most {runs[top]:g} = {shares[top]:.1%} ({top})"
    )
    if not holds:
        shown = ", ".join(f"{d} {s:.1%}" for d, s in over_limit.items()) if over_limit else f"mean {mean:.1%}"
        numbers += f" — breaks: above {limit:.0%}: {shown}"
    return PrintedCheck(CONSISTENT if holds else INCONSISTENT, numbers)


def _direction(claim: Claim, grid: Grid) -> PrintedCheck:
    spec = claim.spec
    below = float(spec.get("below", 0.0))
    values = {d: row[claim.method].value for d, row in grid.items() if claim.method in row}
    moved = [d for d, v in values.items() if v < below]
    most = spec.get("datasets", "every") == "most"
    holds = len(moved) * 2 > len(values) if most else len(moved) == len(values)
    numbers = f"below {below:g} on {len(moved)} of {len(values)}: " + ", ".join(f"{d} {v:g}" for d, v in values.items())
    if spec.get("unprinted"):
        numbers += f". {spec['unprinted']}"
    return PrintedCheck(CONSISTENT if holds else INCONSISTENT, numbers)


def check_printed(params: Any, claim: Claim, rules: VerdictRules) -> PrintedCheck:
    """The claim against the paper's own tables."""
    if claim.kind == "unprinted":
        return PrintedCheck(NOT_CHECKABLE, claim.spec["unprinted"])
    grid = printed_grid(params, claim)
    if not grid:
        return PrintedCheck(NOT_CHECKABLE, f"the reference numbers hold none of {claim.rests_on}")
    if claim.kind == "rank":
        return _rank(params, claim, grid)
    if claim.kind == "hpo_share":
        return _hpo_share(claim, grid)
    if claim.kind == "direction":
        return _direction(claim, grid)
    values, metrics = _values(grid)
    method, over = compared_methods(claim, grid)
    most = claim.spec.get("datasets", "every") == "most"
    if claim.kind == "best_count":
        datasets = [d for d in values if method in values[d]]
        outcome = best_count_outcome(
            values, metrics, datasets, method, claim.spec.get("count"), claim.spec.get("near_margin"),
            claim.spec.get("near_count"), bool(claim.spec.get("more_than_any_other")), exact=True,
        )  # fmt: skip
    elif claim.kind == "margin":
        datasets = [d for d in values if method in values[d] and any(m in values[d] for m in over)]
        margins = claim_margins(claim, grid, over, rules)
        outcome = margin_outcome(values, metrics, datasets, method, over, margins, most)
    else:  # ablation
        datasets = [d for d in values if method in values[d]]
        largest = list(claim.spec.get("largest") or ())
        outcome = ablation_outcome(values, metrics, datasets, method, over, most, largest)
    return _combine([("printed", outcome)])


def printed_datasets(params: Any, claim: Claim) -> list[str]:
    """The paper's datasets for the claim: those its printed tables report for the claimed method."""
    grid = printed_grid(params, claim)
    return [d for d, row in grid.items() if not claim.method or claim.method in row]
