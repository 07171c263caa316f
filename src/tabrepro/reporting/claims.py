"""The papers' headline claims, written as data (params.yaml `papers.<paper>.claims`) and judged on our runs.

A claim says that one model beats others on a table's metric. Per dataset where every model of the
claim ran, d = ours(model) − ours(the strongest of the others), signed so that d > 0 means the
claimed model is better. Over those datasets a bootstrap 95 % CI of the mean d decides:
`supported` (the CI lies above 0, or above the metric's margin δ for a claim "by a margin"),
`contradicted` (the CI lies below 0), `inconclusive` (neither, or too few datasets to bootstrap),
`not run` (no dataset has every model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from tabrepro.data.registry import get_source
from tabrepro.reporting.scorecard import Scorecard, higher_is_better

__all__ = ["SUPPORTED", "CONTRADICTED", "ClaimVerdict", "judge_claims"]

SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_RUN = "supported", "contradicted", "inconclusive", "not run"
BOOTSTRAP_RESAMPLES = 9999
MIN_DATASETS = 2


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim's verdict and the datasets it rests on."""

    paper: str
    name: str
    text: str
    source: str
    verdict: str
    mean_advantage: float | None
    ci: tuple[float, float] | None
    datasets: tuple[str, ...]
    missing: tuple[str, ...]
    detail: str


def _ours_by_model(card: Scorecard, paper: str, table: str) -> tuple[str, dict[str, dict[str, float]]]:
    """table metric and {dataset: {model: our mean}} from the card's cells of one table."""
    metric, found = "", {}
    for cell in card.cells:
        if cell.paper == paper and cell.table == table and cell.model and cell.ours_mean is not None:
            metric = cell.metric
            found.setdefault(cell.column, {})[cell.model] = cell.ours_mean
    return metric, found


def _judge(params: Any, paper: str, name: str, spec: Mapping[str, Any], card: Scorecard) -> ClaimVerdict:
    metric, ours = _ours_by_model(card, paper, spec["table"])
    if spec.get("tasks"):
        ours = {d: m for d, m in ours.items() if get_source(params.source_of(paper, d)).task in spec["tasks"]}
    seed = int(params.raw["seed"])
    model, others = spec["model"], list(spec["over"])
    datasets = sorted(d for d, models in ours.items() if model in models and all(o in models for o in others))
    missing = tuple(sorted(set(ours) - set(datasets)))
    base = dict(paper=paper, name=name, text=spec["text"], source=spec["source"], missing=missing)
    if not datasets:
        detail = f"no dataset has results of {model} and every one of {', '.join(others)}"
        return ClaimVerdict(**base, verdict=NOT_RUN, mean_advantage=None, ci=None, datasets=(), detail=detail)
    sign = 1.0 if higher_is_better(metric) is not False else -1.0  # "goodness" = sign × value
    advantage = np.array([sign * ours[d][model] - max(sign * ours[d][o] for o in others) for d in datasets])
    threshold = card.rules.margin(metric).width(0.0) if spec.get("by_margin") and card.rules.margin(metric) else 0.0
    mean = float(advantage.mean())
    if len(datasets) < MIN_DATASETS:
        return ClaimVerdict(**base, verdict=INCONCLUSIVE, mean_advantage=mean, ci=None, datasets=tuple(datasets),
                            detail=f"rests on {len(datasets)} dataset: a CI needs at least {MIN_DATASETS}")  # fmt: skip
    boot = stats.bootstrap((advantage,), np.mean, n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=0.95,
                           method="percentile", random_state=np.random.default_rng(seed))  # fmt: skip
    low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    if low > threshold:
        verdict = SUPPORTED
    elif high < 0.0:
        verdict = CONTRADICTED
    else:
        verdict = INCONCLUSIVE
    need = f" (the claim needs the CI above δ = {threshold:g})" if threshold else ""
    detail = f"bootstrap 95 % CI of the mean advantage over {len(datasets)} datasets{need}"
    return ClaimVerdict(
        **base, verdict=verdict, mean_advantage=mean, ci=(low, high), datasets=tuple(datasets), detail=detail
    )


def judge_claims(params: Any, card: Scorecard) -> list[ClaimVerdict]:
    """Every claim of the card's papers, in params.yaml order."""
    verdicts = []
    for paper in card.papers:
        for name, spec in (params.paper(paper).get("claims") or {}).items():
            verdicts.append(_judge(params, paper, name, spec, card))
    return verdicts


def claim_rows(claims: Sequence[ClaimVerdict]) -> list[list[str]]:
    """Rows for the claims table (Markdown and HTML)."""
    rows = []
    for c in claims:
        advantage = "—" if c.mean_advantage is None else f"{c.mean_advantage:+.3g}"
        if c.ci is not None:
            advantage += f" [{c.ci[0]:+.3g}, {c.ci[1]:+.3g}]"
        rests = ", ".join(c.datasets) or "—"
        rows.append([c.paper, f"{c.text} ({c.source})", c.verdict, advantage, rests, c.detail])
    return rows


CLAIM_HEADER = ["Paper", "Claim", "Verdict", "mean advantage [95 % CI]", "datasets it rests on", "how"]
