"""What each kind of claim asserts, evaluated on one set of per-dataset numbers.

The same predicates read the paper's printed tables and each resample of our runs, so a claim means
one thing on both sides. Values are compared as "goodness" (sign × value, so larger is better for
every metric); ties in goodness share a rank, and a tie for best counts as best for every method in it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from tabrepro.reporting.claims.spec import goodness_sign

Values = Mapping[str, Mapping[str, float]]  # dataset -> method -> value
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Outcome:
    """Whether the claim holds on these numbers, the numbers behind it, and those that break it."""

    holds: bool
    numbers: str
    breaks: tuple[str, ...] = ()


def _good(values: Values, metrics: Mapping[str, str]) -> dict[str, dict[str, float]]:
    return {d: {m: goodness_sign(metrics[d]) * v for m, v in row.items()} for d, row in values.items()}


def average_ranks(values: Values, metrics: Mapping[str, str], datasets: Sequence[str]) -> dict[str, float]:
    """Each method's mean rank (1 = best) over the datasets, ranking the methods present on each."""
    good = _good(values, metrics)
    totals: dict[str, list[float]] = {}
    for dataset in datasets:
        methods = list(good[dataset])
        ranks = rankdata([-good[dataset][m] for m in methods])
        for method, rank in zip(methods, ranks, strict=True):
            totals.setdefault(method, []).append(float(rank))
    return {m: float(np.mean(r)) for m, r in totals.items()}


def rank_outcome(
    values: Values,
    metrics: Mapping[str, str],
    datasets: Sequence[str],
    method: str,
    ahead: Sequence[str],
    ties: Sequence[str],
    beats: Sequence[str],
) -> Outcome:
    """The rank claim on per-dataset values: their mean ranks over `datasets` (see `rank_facts`)."""
    outcome = rank_facts(average_ranks(values, metrics, datasets), method, ahead, ties, beats)
    return Outcome(outcome.holds, f"mean rank over {len(datasets)} datasets: {outcome.numbers}", outcome.breaks)


def rank_facts(
    ranks: Mapping[str, float], method: str, ahead: Sequence[str], ties: Sequence[str], beats: Sequence[str]
) -> Outcome:
    """Exactly `ahead` rank above `method`, `ties` share its mean rank, and `method` ranks above `beats`."""
    mine = ranks[method]
    breaks = []
    above = sorted(m for m, r in ranks.items() if r < mine - TOLERANCE)
    if set(above) != set(ahead):
        named = ", ".join(f"{m} {ranks[m]:.2f}" for m in above) or "none"
        breaks.append(f"ranked above {method} ({mine:.2f}): {named}; the claim: {', '.join(ahead) or 'none'}")
    breaks += [f"{m} {ranks[m]:.2f} ≠ {method} {mine:.2f}" for m in ties if abs(ranks[m] - mine) > TOLERANCE]
    breaks += [f"{m} {ranks[m]:.2f} not behind {method} {mine:.2f}" for m in beats if ranks[m] <= mine + TOLERANCE]
    numbers = ", ".join(f"{m} {ranks[m]:.2f}" for m in sorted(ranks, key=lambda m: ranks[m]))
    return Outcome(not breaks, numbers, tuple(breaks))


def winners(values: Values, metrics: Mapping[str, str], dataset: str) -> list[str]:
    """The methods best on the dataset (every method of a tie for best)."""
    good = _good(values, metrics)[dataset]
    top = max(good.values())
    return [m for m, v in good.items() if v >= top - TOLERANCE]


def best_count_outcome(
    values: Values,
    metrics: Mapping[str, str],
    datasets: Sequence[str],
    method: str,
    count: int | None,
    near_margin: float | None,
    near_count: int | None,
    more_than_any_other: bool,
    exact: bool,
    of: int | None = None,
) -> Outcome:
    """`method` is best on `count` datasets (at least that share of them unless `exact`), within
    `near_margin` of the best on the others (`near_count` of them), and best on more than any other.
    Not `exact`, the count is scaled to the share of the paper's `of` datasets that these are."""
    good = _good(values, metrics)
    best: dict[str, int] = {}
    gaps = {}
    for dataset in datasets:
        for m in winners(values, metrics, dataset):
            best[m] = best.get(m, 0) + 1
        if method not in winners(values, metrics, dataset):
            gaps[dataset] = max(good[dataset].values()) - good[dataset][method]
    mine = best.get(method, 0)
    breaks = []
    if count is not None:
        needed = count if exact or not of else math.ceil(count * len(datasets) / of)
        if (mine != needed) if exact else (mine < needed):
            breaks.append(f"best on {mine} of {len(datasets)}, the claim: {count}")
    if near_margin is not None:
        far = {d: g for d, g in gaps.items() if g > near_margin + TOLERANCE}
        near = len(gaps) - len(far)
        if far:
            breaks.append(f"{len(far)} beyond {near_margin:g}: " + ", ".join(f"{d} −{g:.2f}" for d, g in far.items()))
        if exact and near_count is not None and near != near_count:
            breaks.append(f"{near} within {near_margin:g}, the claim: {near_count}")
    if more_than_any_other:
        rivals = [m for m, n in best.items() if m != method and n >= mine]
        if rivals:
            breaks.append("as often best: " + ", ".join(f"{m} {best[m]}" for m in rivals))
    tally = ", ".join(f"{m} {n}" for m, n in sorted(best.items(), key=lambda kv: -kv[1]))
    numbers = f"best on {mine} of {len(datasets)} datasets (best counts: {tally})"
    if near_margin is not None:
        numbers += "; behind the best by " + (", ".join(f"{d} {g:.2f}" for d, g in gaps.items()) or "nothing")
    return Outcome(not breaks, numbers, tuple(breaks))


def advantages(
    values: Values, metrics: Mapping[str, str], datasets: Sequence[str], method: str, over: Sequence[str]
) -> dict[str, tuple[float, str]]:
    """Per dataset: goodness(method) − the best goodness of `over`, and which of them is best."""
    good = _good(values, metrics)
    found = {}
    for dataset in datasets:
        rivals = {m: good[dataset][m] for m in over if m in good[dataset]}
        strongest = max(rivals, key=rivals.__getitem__)
        found[dataset] = (good[dataset][method] - rivals[strongest], strongest)
    return found


def margin_outcome(
    values: Values,
    metrics: Mapping[str, str],
    datasets: Sequence[str],
    method: str,
    over: Sequence[str],
    margins: Mapping[str, float],
    most: bool,
) -> Outcome:
    """`method` beats the strongest of `over` by each dataset's margin on every dataset (or on most)."""
    adv = advantages(values, metrics, datasets, method, over)
    short = {d: (a, s) for d, (a, s) in adv.items() if a < margins[d] - TOLERANCE}
    cleared = len(datasets) - len(short)
    holds = cleared * 2 > len(datasets) if most else not short
    numbers = f"clears {'/'.join(sorted({f'{v:g}' for v in margins.values()}))} on {cleared} of {len(datasets)}; "
    numbers += "advantage over the strongest other: " + ", ".join(f"{d} {a:+.2f} ({s})" for d, (a, s) in adv.items())
    good = _good(values, metrics)
    means = {
        m: float(np.mean([good[d][m] for d in datasets]))
        for m in [method, *over]
        if all(m in good[d] for d in datasets)
    }
    if method in means and len(means) > 1:
        rival = max((m for m in means if m != method), key=means.__getitem__)
        numbers += f"; on the mean over datasets {means[method] - means[rival]:+.2f} over {rival}"
    breaks: tuple[str, ...] = ()
    if not holds:
        need = "on most datasets" if most else "on every dataset"
        shown = ", ".join(f"{d} {a:+.2f} < {margins[d]:g}" for d, (a, _) in short.items())
        breaks = (f"clears the margin on {cleared} of {len(datasets)} ({need} claimed): {shown}",)
    return Outcome(holds, numbers, breaks)


def ablation_outcome(
    values: Values,
    metrics: Mapping[str, str],
    datasets: Sequence[str],
    method: str,
    ablations: Sequence[str],
    most: bool,
    largest: Sequence[str],
) -> Outcome:
    """Removing each part makes things worse on every dataset (or more often than better), and the
    parts in `largest` cost the most on average."""
    good = _good(values, metrics)
    parts, breaks, drops = [], [], {}
    for ablation in ablations:
        diffs = {d: good[d][method] - good[d][ablation] for d in datasets if ablation in good[d]}
        wins = sum(v > TOLERANCE for v in diffs.values())
        losses = {d: v for d, v in diffs.items() if v < -TOLERANCE}
        drops[ablation] = float(np.mean(list(diffs.values()))) if diffs else math.nan
        parts.append(f"{ablation}: {wins} better, {len(diffs) - wins - len(losses)} tied, {len(losses)} worse")
        if not largest and ((wins <= len(losses)) if most else bool(losses)):
            breaks.append(f"{ablation} better on " + ", ".join(f"{d} ({-v:+.2f})" for d, v in losses.items()))
    if largest:
        order = sorted(drops, key=lambda a: -drops[a])
        top = set(order[: len(largest)])
        if top != set(largest):
            breaks.append("largest mean drops: " + ", ".join(f"{a} {drops[a]:.2f}" for a in order[: len(largest)]))
        parts.append("mean drop: " + ", ".join(f"{a} {drops[a]:.2f}" for a in order))
    return Outcome(not breaks, f"{method} against each ablation over {len(datasets)} datasets: " + "; ".join(parts),
                   tuple(breaks))  # fmt: skip
