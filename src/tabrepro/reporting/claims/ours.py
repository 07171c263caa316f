"""Each claim judged on our runs, across datasets, with every dataset's own spread.

A claim is judged only when at least MIN_DATASETS of the paper's datasets (all of them, if the paper
has fewer) have results of every method it names; below that it is `too few datasets`. Margin and
ablation claims: per dataset the advantage d over the strongest compared method, less the claim's
margin δ (relative margins taken of that method's value), in units of its own SE (z). A margin "on
every dataset" needs each dataset's one-sided test to clear it and is contradicted by one dataset
clearly short of it (Bonferroni); "on most datasets" needs a majority of the paper's datasets to
clear it. An ablation claim runs a one-sided exact Wilcoxon signed-rank test across datasets on the
z of each ablation's drop: `supported` when every drop is above 0, `contradicted` when one is below
(Bonferroni over the ablations); with fewer than five datasets it cannot reach α = 0.05. Rank, best-count and
largest-ablation claims hold or fail as a whole: every cell is redrawn from Normal(mean, SE), the
claim is re-evaluated, and it is `supported` when it holds in at least 1 − α of the redraws,
`contradicted` when in at most α.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from tabrepro.reporting.claims.logic import TOLERANCE, advantages, best_count_outcome, rank_outcome
from tabrepro.reporting.claims.printed import claim_margins
from tabrepro.reporting.claims.spec import Claim, Grid, goodness_sign, ours_grid
from tabrepro.reporting.verdicts import VerdictRules

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_RUN, NOT_JUDGED, TOO_FEW = "not run", "not judged on our runs", "too few datasets"
MIN_DATASETS = 5
REDRAWS = 2000


@dataclass(frozen=True)
class OursCheck:
    """The claim on our runs: its verdict, the numbers behind it and the datasets it rests on."""

    verdict: str
    numbers: str
    datasets: tuple[str, ...] = ()


def needed(paper_datasets: int) -> int:
    """Datasets with results a claim needs before it is judged."""
    return min(MIN_DATASETS, paper_datasets)


def _se(grid: Grid, dataset: str, method: str) -> float | None:
    se = grid[dataset][method].se
    return float(se) if se is not None and math.isfinite(se) and se > 0 else None


def _chosen_se(grid: Grid, dataset: str, method: str) -> float:
    """`_se` of a cell whose dataset was kept for having one (see ours_check)."""
    se = _se(grid, dataset, method)
    assert se is not None
    return se


def _redraws(grid: Grid, datasets: Sequence[str], seed: int) -> tuple[list[str], np.ndarray]:
    """Every method present on the datasets, and REDRAWS draws of each cell's goodness from
    Normal(mean, SE): an array (redraw, dataset, method), NaN where a method has no cell."""
    methods = list(dict.fromkeys(m for d in datasets for m in grid[d]))
    means = np.full((len(datasets), len(methods)), np.nan)
    ses = np.zeros_like(means)
    for i, d in enumerate(datasets):
        for j, m in enumerate(methods):
            if m in grid[d]:
                sign = goodness_sign(grid[d][m].metric)
                means[i, j], ses[i, j] = sign * grid[d][m].value, _se(grid, d, m)
    rng = np.random.default_rng(seed)
    return methods, rng.normal(means, ses, size=(REDRAWS, *means.shape))


def _rank_share(grid: Grid, datasets: Sequence[str], method: str, spec: Any, seed: int) -> float:
    """Share of redraws in which the rank claim holds (logic.rank_facts, over whole arrays)."""
    methods, good = _redraws(grid, datasets, seed)
    ranks = stats.rankdata(-good, axis=2, nan_policy="omit")
    mean = np.nanmean(ranks, axis=1)  # (redraw, method)
    me = mean[:, methods.index(method)]
    ahead = set(spec.get("ahead") or ())
    holds = np.ones(REDRAWS, dtype=bool)
    for j, m in enumerate(methods):
        if m != method:
            holds &= (mean[:, j] < me - TOLERANCE) == (m in ahead)
    for m in spec.get("ties") or ():
        holds &= np.abs(mean[:, methods.index(m)] - me) <= TOLERANCE
    for m in spec.get("beats") or ():
        holds &= mean[:, methods.index(m)] > me + TOLERANCE
    return float(holds.mean())


def _best_count_share(
    grid: Grid, datasets: Sequence[str], method: str, spec: Any, paper_datasets: int, seed: int
) -> float:
    """Share of redraws in which the best-count claim holds (logic.best_count_outcome, over arrays)."""
    methods, good = _redraws(grid, datasets, seed)
    top = np.nanmax(good, axis=2, keepdims=True)
    best = good >= top - TOLERANCE  # NaN compares False
    counts = best.sum(axis=1)  # (redraw, method)
    i = methods.index(method)
    holds = np.ones(REDRAWS, dtype=bool)
    if spec.get("count") is not None:
        holds &= counts[:, i] >= math.ceil(spec["count"] * len(datasets) / paper_datasets)
    if spec.get("near_margin") is not None:
        holds &= ((top[..., 0] - good[..., i]) <= spec["near_margin"] + TOLERANCE).all(axis=1)
    if spec.get("more_than_any_other"):
        others = np.delete(counts, i, axis=1)
        holds &= counts[:, i] > others.max(axis=1)
    return float(holds.mean())


def _largest_share(grid: Grid, datasets: Sequence[str], method: str, largest: Sequence[str], seed: int) -> float:
    """Share of redraws in which the named ablations have the largest mean drops."""
    methods, good = _redraws(grid, datasets, seed)
    drops = (good[..., [methods.index(method)]] - good).mean(axis=1)  # (redraw, method)
    ablations = [j for j, m in enumerate(methods) if m != method]
    order = np.argsort(-drops[:, ablations], axis=1)[:, : len(largest)]
    wanted = {ablations.index(methods.index(m)) for m in largest}
    return float(np.mean([set(row) == wanted for row in order.tolist()]))


def _by_share(share: float, alpha: float) -> str:
    if share >= 1.0 - alpha:
        return SUPPORTED
    return CONTRADICTED if share <= alpha else INCONCLUSIVE


def _wilcoxon(z: Sequence[float], alpha: float, contradict_alpha: float) -> tuple[str, float, float]:
    greater = float(stats.wilcoxon(z, alternative="greater").pvalue)
    less = float(stats.wilcoxon(z, alternative="less").pvalue)
    verdict = SUPPORTED if greater < alpha else CONTRADICTED if less < contradict_alpha else INCONCLUSIVE
    return verdict, greater, less


def judge_ours(
    params: Any, claim: Claim, cells: Sequence[Any], rules: VerdictRules, paper_methods: Sequence[str],
    paper_datasets: int, seed: int,
) -> OursCheck:  # fmt: skip
    """The claim on our runs; `paper_methods` are those the paper's tables print for it."""
    if claim.kind in ("unprinted", "direction", "hpo_share") or not claim.tables:
        return OursCheck(NOT_JUDGED, claim.spec.get("not_ours") or "no table of ours holds the numbers it rests on")
    grid = ours_grid(params, claim, cells)
    ran = set(m for row in grid.values() for m in row)
    method = claim.method or ""
    if method not in ran:
        return OursCheck(NOT_RUN, f"no results of {method} in {claim.rests_on}")
    if claim.kind == "rank":
        named = [method] + [m for k in ("ahead", "ties", "beats") for m in claim.spec.get(k) or ()]
        compared = [m for m in paper_methods if m != method]
    else:
        compared = list(claim.over) if claim.over is not None else [m for m in paper_methods if m != method]
        named = [method, *compared]
    absent = [m for m in named if m not in ran]
    if claim.kind == "rank" and absent:
        return OursCheck(NOT_RUN, f"no results of {', '.join(absent)}: the claim names them")
    compared = [m for m in compared if m in ran]
    if not compared:
        return OursCheck(NOT_RUN, f"no results of any of {', '.join(named[1:])}")
    required = [method, *compared] if claim.kind != "rank" else named
    datasets = [d for d in grid if all(m in grid[d] and _se(grid, d, m) is not None for m in required)]
    if claim.kind in ("rank", "best_count"):  # the other methods ranked there need a spread too
        datasets = [d for d in datasets if all(_se(grid, d, m) is not None for m in grid[d])]
    k = len(datasets)
    if k < needed(paper_datasets):
        why = (
            f"too few datasets ({k} of the paper's {paper_datasets}) with results and spreads of {', '.join(required)}"
        )
        return OursCheck(TOO_FEW, f"{why}; a verdict needs {needed(paper_datasets)}", tuple(datasets))
    missing = [m for m in (claim.over or ()) if m not in ran]
    scope = f" (over the {len(compared)} of its {len(compared) + len(missing)} methods we run)" if missing else ""
    verdict, numbers = _decide(claim, grid, datasets, method, compared, rules, paper_datasets, seed)
    if missing:
        numbers += f"; not run: {', '.join(missing)}"
    return OursCheck(verdict + (scope if verdict == SUPPORTED else ""), numbers, tuple(datasets))


def _values(grid: Grid, datasets: Sequence[str]) -> tuple[dict, dict]:
    values = {d: {m: c.value for m, c in grid[d].items()} for d in datasets}
    return values, {d: next(iter(grid[d].values())).metric for d in datasets}


def _decide(
    claim: Claim, grid: Grid, datasets: list[str], method: str, compared: list[str], rules: VerdictRules,
    paper_datasets: int, seed: int,
) -> tuple[str, str]:  # fmt: skip
    alpha = rules.alpha
    values, metrics = _values(grid, datasets)
    spec = claim.spec
    if claim.kind == "rank":
        ahead, ties, beats = (list(spec.get(k) or ()) for k in ("ahead", "ties", "beats"))
        observed = rank_outcome(values, metrics, datasets, method, ahead, ties, beats)
        share = _rank_share(grid, datasets, method, spec, seed)
    elif claim.kind == "best_count":
        args = (spec.get("count"), spec.get("near_margin"), None, bool(spec.get("more_than_any_other")))
        observed = best_count_outcome(values, metrics, datasets, method, *args, exact=False, of=paper_datasets)
        share = _best_count_share(grid, datasets, method, spec, paper_datasets, seed)
    elif claim.kind == "margin":
        return _margin(claim, grid, datasets, method, compared, rules, paper_datasets)
    else:
        return _ablation(claim, grid, datasets, method, compared, alpha, seed)
    return _by_share(share, alpha), f"ours: {observed.numbers}; holds in {share:.1%} of {REDRAWS} redraws of the cells"


def _z_advantages(
    grid: Grid, datasets: list[str], method: str, compared: list[str], margins: dict[str, float]
) -> tuple[list[float], dict]:
    values, metrics = _values(grid, datasets)
    adv = advantages(values, metrics, datasets, method, compared)
    z = []
    for d in datasets:
        a, rival = adv[d]
        se = math.hypot(_chosen_se(grid, d, method), _chosen_se(grid, d, rival))
        z.append((a - margins[d]) / se)
    return z, adv


def _margin(
    claim: Claim, grid: Grid, datasets: list[str], method: str, compared: list[str], rules: VerdictRules,
    paper_datasets: int,
) -> tuple[str, str]:  # fmt: skip
    margins = claim_margins(claim, {d: grid[d] for d in datasets}, compared, rules)
    z, adv = _z_advantages(grid, datasets, method, compared, margins)
    shown = ", ".join(
        f"{d} {adv[d][0]:+.3g} (δ {margins[d]:.3g}, z {zd:+.2f})" for d, zd in zip(datasets, z, strict=True)
    )
    if claim.spec.get("datasets", "every") == "most":
        majority = paper_datasets // 2 + 1
        cleared = sum(stats.norm.sf(zd) < rules.alpha for zd in z)
        short = sum(stats.norm.cdf(zd) < rules.alpha for zd in z)
        if cleared >= majority:
            verdict = SUPPORTED
        elif short > paper_datasets - majority:
            verdict = CONTRADICTED
        else:
            verdict = INCONCLUSIVE
        how = (f"one-sided test per dataset at α = {rules.alpha:g}: clears the margin on {cleared}, falls short on "
               f"{short}; most of the paper's {paper_datasets} is {majority}")  # fmt: skip
        return verdict, f"ours: advantage over the strongest other: {shown}; {how}"
    # "on every dataset": each dataset's own one-sided test must clear the margin (an intersection-
    # union test, level α without correction); one dataset clearly short of it contradicts the
    # claim (Bonferroni over the datasets)
    cleared = sum(stats.norm.sf(zd) < rules.alpha for zd in z)
    short = sum(stats.norm.cdf(zd) < rules.alpha / len(z) for zd in z)
    verdict = SUPPORTED if cleared == len(z) else CONTRADICTED if short else INCONCLUSIVE
    how = (f"one-sided test per dataset: clears the margin on {cleared} of {len(z)} at α = {rules.alpha:g}, "
           f"falls short on {short} at α/{len(z)}")  # fmt: skip
    return verdict, f"ours: advantage over the strongest other: {shown}; {how}"


def _ablation(
    claim: Claim, grid: Grid, datasets: list[str], method: str, compared: list[str], alpha: float, seed: int
) -> tuple[str, str]:
    """Each ablation's drop by the Wilcoxon test (all must be supported; one contradicts, Bonferroni
    over the ablations); a claim naming the `largest` drops is judged on those alone, by redraws."""
    largest = list(claim.spec.get("largest") or ())
    if largest:
        share = _largest_share(grid, datasets, method, largest, seed)
        values, metrics = _values(grid, datasets)
        drops = _drops(values, metrics, datasets, method, compared)
        shown = ", ".join(f"{a} {d:+.3g}" for a, d in sorted(drops.items(), key=lambda kv: -kv[1]))
        costliest = f"{', '.join(largest)} cost the most in {share:.1%} of {REDRAWS} redraws"
        return _by_share(share, alpha), f"ours: mean drop over {len(datasets)} datasets: {shown}; {costliest}"
    verdicts, parts = [], []
    for ablation in compared:
        z, adv = _z_advantages(grid, datasets, method, [ablation], dict.fromkeys(datasets, 0.0))
        verdict, greater, less = _wilcoxon(z, alpha, alpha / len(compared))
        mean = float(np.mean([adv[d][0] for d in datasets]))
        verdicts.append(verdict)
        parts.append(f"{ablation}: mean drop {mean:+.3g}, Wilcoxon p(>0) = {greater:.3g}, p(<0) = {less:.3g}")
    if CONTRADICTED in verdicts:
        verdict = CONTRADICTED
    elif all(v == SUPPORTED for v in verdicts):
        verdict = SUPPORTED
    else:
        verdict = INCONCLUSIVE
    return verdict, f"ours over {len(datasets)} datasets: " + "; ".join(parts)


def _drops(values: dict, metrics: dict, datasets: list[str], method: str, ablations: list[str]) -> dict[str, float]:
    return {
        a: float(np.mean([goodness_sign(metrics[d]) * (values[d][method] - values[d][a]) for d in datasets]))
        for a in ablations
    }
