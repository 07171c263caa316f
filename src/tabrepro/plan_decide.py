"""What the missing verdicts would cost: the runs that would decide a scorecard's undecided cells,
priced with the compute plan's cost model.

A scorecard cell that is `inconclusive`, `shifted` or `cannot be decided` carries `more_runs`: the
runs of our protocol (new split seeds) beyond the one there is that would decide it with 80 %
power (tabrepro.reporting.verdicts.runs_to_decide), or none where no number of runs would. One
run of a dataset × model decides every cell its fits stand in (accuracy, NLL and AUROC of one
fit), so cells are grouped by dataset × model and each group needs the most runs any of its cells
does. Groups are listed cheapest per decided cell first, with the running total: the cheapest set
of runs that decides the most cells is a prefix of that list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tabrepro.errors import InputError

__all__ = ["DecisionCost", "DecideError", "decision_costs", "format_decision_costs"]

UNDECIDED = ("inconclusive", "shifted", "cannot be decided")
NEEDED = ("paper", "table", "column", "model", "verdict_class", "count_group", "more_runs")


class DecideError(InputError, ValueError):
    """A scorecard the cost view cannot read; names it."""


@dataclass(frozen=True)
class DecisionCost:
    """The runs one dataset × model needs to decide its cells (each as `table: runs it needs`), and
    what they cost."""

    paper: str
    dataset: str
    model: str
    more_runs: int
    cells: tuple[str, ...]
    cpu_hours: float
    gpu_hours: float

    @property
    def hours_per_cell(self) -> float:
        return (self.cpu_hours + self.gpu_hours) / len(self.cells)


def read_scorecard(path: Path) -> pd.DataFrame:
    """A scorecard.csv with the columns the cost view needs."""
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as error:
        raise DecideError(f"{path}: cannot read the scorecard: {error}") from None
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise DecideError(
            f"{path}: not a scorecard with run counts (no column {', '.join(missing)}): "
            f"judge it again (`tabrepro record --rejudge` or `tabrepro scorecard`)"
        )
    return frame


def decision_costs(
    frame: pd.DataFrame, one_run: Mapping[tuple[str, str, str], tuple[float, float]]
) -> tuple[list[DecisionCost], list[str], list[str]]:
    """(priced groups, cells no number of runs decides, cells the profile has no job for) from a
    scorecard frame and the (CPU-hours, GPU-hours) of one run of each paper × dataset × model."""
    undecided = frame[frame["verdict_class"].isin(UNDECIDED) & frame["model"].notna()]
    if "counted_with" in undecided.columns:
        undecided = undecided[undecided["counted_with"].isna()]
    groups: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    never, unplanned = [], []
    for row in undecided.itertuples(index=False):
        name = f"{row.paper}/{row.table}/{row.column}/{row.model}"
        if pd.isna(row.more_runs):
            never.append(name)
            continue
        key = (str(row.paper), str(row.column), str(row.model))
        if key not in one_run:
            unplanned.append(name)
            continue
        groups.setdefault(key, []).append((str(row.table), int(row.more_runs)))
    priced = []
    for (paper, dataset, model), cells in groups.items():
        runs = max(n for _, n in cells)
        cpu, gpu = one_run[(paper, dataset, model)]
        named = tuple(f"{table}: {n}" for table, n in cells)
        priced.append(DecisionCost(paper, dataset, model, runs, named, runs * cpu, runs * gpu))
    priced.sort(key=lambda c: (c.hours_per_cell, c.paper, c.dataset, c.model))
    return priced, never, unplanned


def _hours(value: float) -> str:
    return "-" if value == 0 else f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def _names(items: Iterable[str], limit: int = 12) -> str:
    items = list(items)
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def format_decision_costs(
    priced: list[DecisionCost], never: list[str], unplanned: list[str], source: Path, profile: str
) -> str:
    """The cost view: per dataset × model the runs and hours, cheapest per decided cell first,
    with the running totals, then the cells no number of runs decides."""
    lines = [
        f"Runs that would decide the undecided cells of {source} (profile {profile!r}; 80 % power per "
        f"cell, simulated with the verdict engine; one run = the protocol once more on a new split seed)",
        "",
        "| paper | dataset | model | cells (table: more runs each needs) | more runs | CPU-h | GPU-h "
        "| cumulative cells | cumulative CPU-h | cumulative GPU-h |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    cells = cpu = gpu = 0.0
    for cost in priced:
        cells, cpu, gpu = cells + len(cost.cells), cpu + cost.cpu_hours, gpu + cost.gpu_hours
        lines.append(
            f"| {cost.paper} | {cost.dataset} | {cost.model} | {', '.join(cost.cells)} | {cost.more_runs} | "
            f"{_hours(cost.cpu_hours)} | {_hours(cost.gpu_hours)} | {int(cells)} | {_hours(cpu)} | {_hours(gpu)} |"
        )
    if not priced:
        lines.append("| _none_ | | | | | | | | | |")
    lines += [
        "",
        f"Total: {int(cells)} cells decided by {sum(c.more_runs for c in priced)} more runs, "
        f"{_hours(cpu)} CPU-hours and {_hours(gpu)} GPU-hours.",
    ]
    if never:
        lines.append(
            f"No number of runs decides {len(never)} cells (the paper's spread or Δ on the margin): {_names(never)}."
        )
    if unplanned:
        lines.append(
            f"The profile runs no job for {len(unplanned)} cells (rank cells or other models): {_names(unplanned)}."
        )
    return "\n".join(lines)


def one_run_hours(rows: Iterable[Any]) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(CPU-hours, GPU-hours) of one run of the protocol per paper × dataset × model, from the
    compute plan's rows (tabrepro.plan.PlanRow: every fold of the profile)."""
    out = {}
    for row in rows:
        if math.isfinite(row.cpu_hours) and math.isfinite(row.gpu_hours):
            out[(row.paper, row.dataset, row.model)] = (row.cpu_hours, row.gpu_hours)
    return out
