"""A paper's mean ranks, Friedman test and critical-difference diagram."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tabrepro import figures
from tabrepro.reporting.html.page import Page, slug, table_html
from tabrepro.reporting.rank_tests import OmnibusResult, complete_rank_matrix, friedman_test
from tabrepro.reporting.tables import DASH, rank_methods, summarize_folds


def _block_ranks(frame: pd.DataFrame, rank_metrics: Mapping[str, str]) -> tuple[pd.DataFrame, str]:
    """Ranks of methods per block: per dataset (mean over folds) when there are at least two
    datasets, else per fold of the one dataset. Returns (block, method, rank) and the block kind."""
    tasks = frame.groupby("dataset")["task"].first().to_dict()
    if len(tasks) >= 2:
        summary = summarize_folds(frame, "se")
        parts = []
        for dataset, task in tasks.items():
            metric = rank_metrics.get(task)
            if metric is None:
                continue
            ranked = rank_methods(summary[summary["dataset"] == dataset], metric)
            parts.append(ranked.assign(block=dataset)[["block", "method", "rank"]])
        return (pd.concat(parts) if parts else pd.DataFrame(columns=["block", "method", "rank"]), "datasets")
    parts = []
    for dataset, task in tasks.items():
        metric = rank_metrics.get(task)
        if metric is None:
            continue
        chosen = frame[(frame["dataset"] == dataset) & (frame["metric"] == metric)]
        for fold, group in chosen.groupby("fold"):
            per_fold = group.assign(dataset=f"{dataset}/fold{fold}", mean=group["value"])
            ranked = rank_methods(per_fold[["dataset", "method", "metric", "mean"]], metric)
            parts.append(ranked.assign(block=f"{dataset}/fold{fold}")[["block", "method", "rank"]])
    return (pd.concat(parts) if parts else pd.DataFrame(columns=["block", "method", "rank"]), "folds of one dataset")


def rank_block(page: Page, paper: str, paper_cfg: Mapping[str, Any], frame: pd.DataFrame | None) -> None:
    page.section(f"{paper}-ranks", f"{paper}: ranks and critical differences")
    rank_cfg = next((c for c in paper_cfg.get("tables", {}).values() if c.get("kind") == "rank"), None)
    if rank_cfg is not None:
        rank_metrics = dict(rank_cfg["rank_metrics"])
    else:  # no rank table: rank by each task's first listed metric
        rank_metrics = {}
        for cfg in paper_cfg.get("tables", {}).values():
            for task in cfg.get("tasks", []):
                rank_metrics.setdefault(task, cfg["metric"])
    if frame is None or frame.empty:
        page.empty("No results yet.")
        return
    ranks, kind = _block_ranks(frame, rank_metrics)
    if ranks.empty:
        page.empty("Nothing to rank.")
        return
    matrix = complete_rank_matrix(ranks)  # re-ranked among the methods present in every block
    n_blocks = len(matrix.index)
    left_out = sorted(set(ranks["method"]) - set(matrix.columns))
    table = [
        {
            "method": m,
            "mean_rank": float(matrix[m].mean()),
            "se": float(matrix[m].std(ddof=1)) / math.sqrt(n_blocks) if n_blocks > 1 else None,
        }
        for m in matrix.columns
    ]
    omnibus = friedman_test(matrix.to_numpy())
    independent = kind == "datasets"
    metrics_text = ", ".join(f"{t}: {m}" for t, m in rank_metrics.items())
    page.note(
        f"Methods are ranked within each block (1 = best; ties share the mean rank) by "
        f"{metrics_text}, among the methods with a result in every block"
        + (f" (left out: {', '.join(left_out)})" if left_out else "")
        + f". Blocks are {kind} ({n_blocks}). {omnibus.describe()}"
    )
    if not independent:
        page.note(
            "The blocks are the folds of one dataset, and these are not independent: their "
            "training sets overlap and all come from the same data, while the Friedman and "
            "Nemenyi tests assume independent blocks. The p-value therefore overstates the "
            "evidence and speaks for this one dataset at most; the ranks say how consistently "
            "methods differ across its folds, not across datasets, and the diagram below makes "
            "no significance claim."
        )
    page.add(
        table_html(
            ["Method", "Mean rank", "± SE"],
            [
                [r["method"], f"{r['mean_rank']:.2f}", DASH if r["se"] is None else f"{r['se']:.2f}"]
                for r in sorted(table, key=lambda r: r["mean_rank"])
            ],
        )
    )
    name = f"{slug(paper)}_mean_rank.png"
    figures.mean_rank_plot(table, page.out_dir / name, f"{paper}: mean rank over {kind}")
    page.figure(name, "Mean rank ± SE per method.")
    if len(table) >= 2:
        claims = independent and omnibus.significant()
        note, caption = cd_wording(omnibus, independent)
        name = f"{slug(paper)}_cd.png"
        figures.critical_difference_diagram(
            {r["method"]: r["mean_rank"] for r in table},
            n_blocks,
            page.out_dir / name,
            f"{paper}: critical differences",
            claims=claims,
            note=note,
        )
        page.figure(name, caption)


def cd_wording(omnibus: OmnibusResult, independent: bool) -> tuple[str | None, str]:
    """The diagram's own note and the caption: a CD claim only after a significant Friedman
    test over independent blocks; otherwise the figure is greyed and says why."""
    base = "Critical-difference diagram (Demšar 2006; two-tailed Nemenyi test, α = 0.05). "
    if omnibus.p_value is None:
        reason = f"there is no omnibus test ({omnibus.reason})"
    elif not omnibus.significant():
        reason = f"the {omnibus.test} is not significant (p = {omnibus.p_value:.3g})"
    elif not independent:
        reason = (
            f"the {omnibus.test} gives p = {omnibus.p_value:.3g}, but the blocks are "
            f"folds of one dataset, not independent"
        )
    else:
        return None, (
            base + f"Drawn because the {omnibus.test} rejected equal performance "
            f"(p = {omnibus.p_value:.3g}); methods joined by a grey bar do not differ "
            f"significantly."
        )
    return (
        f"Not a significance claim: {reason}.",
        base + f"Greyed, because {reason}: no difference between methods is claimed, and the "
        f"CD and joining bars are shown for scale only.",
    )
