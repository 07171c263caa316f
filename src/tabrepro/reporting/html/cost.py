"""A paper's compute cost per model and dataset, beside the paper's own where it reports one
(the reference CSV's cost rows, see tabrepro.reference.reported_costs)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tabrepro import figures
from tabrepro.reference import ReportedCost, reported_costs
from tabrepro.reporting.html.page import Page, as_float, slug, table_html
from tabrepro.reporting.tables import DASH

DURATION_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def cost_block(
    page: Page, params: Any, paper: str, paper_cfg: Mapping[str, Any], results: list[dict[str, Any]]
) -> None:
    page.section(f"{paper}-cost", f"{paper}: compute cost")
    if not results:
        page.empty("No results yet.")
        return
    labels = paper_cfg.get("models", {})
    costs = reported_costs(paper, source=paper_cfg.get("reference"))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault((result["dataset"], result["model"]), []).append(result)
    rows, chart = [], []
    for (dataset, model), members in sorted(groups.items()):
        wall = _numbers(members, "wall_time_s")
        memory = _numbers(members, "peak_memory_mb")
        gpu = _numbers(members, "peak_gpu_memory_mb")
        variants = _variant_wall_time(params, paper, dataset, model)
        label = labels.get(model, model)
        rows.append(
            [
                dataset,
                label,
                len(members),
                DASH if not wall else f"{np.mean(wall):.1f}",
                DASH if not wall else f"{np.sum(wall) + variants:.1f}",
                DASH if not memory else f"{np.max(memory):.0f}",
                DASH if not gpu else f"{np.max(gpu):.0f}",
            ]
            + ([_cost_text(costs.get((dataset, label)))] if costs else [])
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
        "models trained one configuration per job, those jobs' own wall time. " + _paper_note(costs, labels)
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
            ]
            + ([f"Paper ({', '.join(_methods(costs))})"] if costs else []),
            rows,
            2,
        )
    )
    name = f"{slug(paper)}_cost.png"
    figures.cost_chart(chart, page.out_dir / name, f"{paper}: compute cost per model and dataset")
    page.figure(name, "Mean wall time per fold (log scale) and peak memory.")


def _numbers(results: list[dict[str, Any]], key: str) -> list[float]:
    """The results' values of `key` that are numbers (as_float), in order."""
    values = [as_float(result.get(key)) for result in results]
    return [value for value in values if value is not None]


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


def _methods(costs: Mapping[tuple[str, str], ReportedCost]) -> list[str]:
    return list(dict.fromkeys(method for _, method in costs))


def _paper_note(costs: Mapping[tuple[str, str], ReportedCost], labels: Mapping[str, str]) -> str:
    """What the paper's column holds: its tables, the methods they cover, whether on GPUs."""
    if not costs:
        return "The paper reports no compute cost."
    tables = list(dict.fromkeys(cost.table for cost in costs.values()))
    methods = _methods(costs)
    scope = f" exist for {', '.join(methods)} only" if set(methods) < set(labels.values()) else " cover every method"
    on_gpus = all("peak_gpu_memory_gb" in cost.values for cost in costs.values())
    return f"The paper's numbers ({_tables_text(tables)}){scope}{' and were measured on GPUs' if on_gpus else ''}."


def _tables_text(tables: list[str]) -> str:
    """['6', '7'] -> 'Tables 6-7'; ['6'] -> 'Table 6'; others listed."""
    if len(tables) == 1:
        return f"Table {tables[0]}"
    if all(t.isdigit() for t in tables) and [int(t) for t in tables] == list(
        range(int(tables[0]), int(tables[0]) + len(tables))
    ):
        return f"Tables {tables[0]}-{tables[-1]}"
    return "Tables " + ", ".join(tables)


def _cost_text(cost: ReportedCost | None) -> str:
    """'11 h 51 m, 6.17 GB (GPU)': the run's duration and its peak memory (GPU memory where given)."""
    if cost is None:
        return DASH
    time = cost.values.get("execution_time_s")
    gpu, main = cost.values.get("peak_gpu_memory_gb"), cost.values.get("peak_main_memory_gb")
    memory = f"{gpu.value_text} GB (GPU)" if gpu else (f"{main.value_text} GB" if main else None)
    parts = [_duration_text(time.value) if time else None, memory]
    return ", ".join(p for p in parts if p) or DASH


def _duration_text(seconds: float) -> str:
    """The two largest units of a duration: 42685 s -> '11 h 51 m', 511927 s -> '5 d 22 h'."""
    left = int(round(seconds))
    amounts = []
    for unit, size in DURATION_UNITS:
        amounts.append((left // size, unit))
        left %= size
    first = next((i for i, (amount, _) in enumerate(amounts) if amount), len(amounts) - 1)
    return " ".join(f"{amount} {unit}" for amount, unit in amounts[first : first + 2])
