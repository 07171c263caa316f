"""A paper's compute cost per model and dataset, beside the paper's own where it reports one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tabrepro.reporting import figures
from tabrepro.reporting.html.page import Page, as_float, slug, table_html
from tabrepro.reporting.tables import DASH

# NPT's own compute cost (the NPT paper's Tables 6-7, §B.6), for the cost section.
PAPER_NPT_COST = {"protein": ("11 h 51 m", "6.17 GB (GPU)"), "higgs": ("5 d 22 h", "19.18 GB (GPU)")}


def cost_block(
    page: Page, params: Any, paper: str, paper_cfg: Mapping[str, Any], results: list[dict[str, Any]]
) -> None:
    page.section(f"{paper}-cost", f"{paper}: compute cost")
    if not results:
        page.empty("No results yet.")
        return
    labels = paper_cfg.get("models", {})
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault((result["dataset"], result["model"]), []).append(result)
    rows, chart = [], []
    for (dataset, model), members in sorted(groups.items()):
        wall = [as_float(r.get("wall_time_s")) for r in members]
        wall = [w for w in wall if w is not None]
        memory = [as_float(r.get("peak_memory_mb")) for r in members]
        memory = [m for m in memory if m is not None]
        gpu = [as_float(r.get("peak_gpu_memory_mb")) for r in members]
        gpu = [g for g in gpu if g is not None]
        variants = _variant_wall_time(params, paper, dataset, model)
        label = labels.get(model, model)
        paper_cost = PAPER_NPT_COST.get(dataset) if model == "npt" else None
        rows.append(
            [
                dataset,
                label,
                len(members),
                DASH if not wall else f"{np.mean(wall):.1f}",
                DASH if not wall else f"{np.sum(wall) + variants:.1f}",
                DASH if not memory else f"{np.max(memory):.0f}",
                DASH if not gpu else f"{np.max(gpu):.0f}",
                DASH if paper_cost is None else f"{paper_cost[0]}, {paper_cost[1]}",
            ]
        )
        chart.append(
            {
                "dataset": dataset,
                "method": label,
                "wall_time_s": float(np.mean(wall)) if wall else None,
                "peak_memory_mb": float(np.max(memory)) if memory else None,
            }
        )
    page.note(
        "Wall time of each fold's job (tuning included) and the peak resident memory of its "
        "process (GPU memory where the job recorded it). 'Total' adds every fold and, for "
        "models trained one configuration per job, those jobs' own wall time. The paper's "
        "numbers (Tables 6-7) exist for NPT only and were measured on GPUs."
    )
    page.add(
        table_html(
            [
                "Dataset",
                "Method",
                "Folds",
                "Wall time per fold (s)",
                "Total (s)",
                "Peak memory (MB)",
                "Peak GPU memory (MB)",
                "Paper (NPT)",
            ],
            rows,
            2,
        )
    )
    name = f"{slug(paper)}_cost.png"
    figures.cost_chart(chart, page.out_dir / name, f"{paper}: compute cost per model and dataset")
    page.figure(name, "Mean wall time per fold (log scale) and peak memory.")


def _variant_wall_time(params: Any, paper: str, dataset: str, model: str) -> float:
    """Wall time of per-configuration jobs (results/.../foldK/config*/result.json), if any."""
    total = 0.0
    base = Path(params.results_dir) / paper / dataset / model
    for path in sorted(base.glob("fold*/config*/result.json")):
        try:
            total += as_float(json.loads(path.read_text(encoding="utf-8")).get("wall_time_s")) or 0.0
        except (OSError, ValueError):
            continue
    return total
