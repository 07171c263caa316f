"""A claim as params.yaml states it (`papers.<paper>.claims`), and the per-dataset numbers it rests on.

Every claim quotes the paper's sentence and says where it is; `kind` names the comparison the
sentence makes, and the remaining fields are that comparison's terms. Methods are named by the
labels the paper prints (the reference CSV's `method`, the scorecard cells' `method`), so one claim
is read the same way from the paper's tables and from our runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabrepro.data.registry import get_source
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.reference import lookup, reference_datasets, reference_methods, reference_table_id

# The comparisons a sentence can make (see `check_printed` and `judge_ours` for how each is read).
KINDS = ("rank", "best_count", "margin", "ablation", "direction", "hpo_share", "unprinted")


@dataclass(frozen=True)
class Cell:
    """One method on one dataset: its value, the value's standard error (None: unknown), its metric."""

    value: float
    se: float | None
    metric: str


Grid = dict[str, dict[str, Cell]]  # dataset -> method label -> cell


@dataclass(frozen=True)
class Claim:
    """One claim of one paper, with the comparison its sentence makes."""

    paper: str
    name: str
    quote: str
    location: str
    kind: str
    spec: Mapping[str, Any]
    tables: tuple[str, ...] = ()
    paper_tables: tuple[tuple[str, str], ...] = ()  # (reference table id, metric) the paper alone prints
    tasks: tuple[str, ...] = ()
    method: str | None = None
    over: tuple[str, ...] | None = None  # None: every other method the table prints
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rests_on(self) -> str:
        """The tables (and task types) the claim rests on, in words."""
        names = [*self.tables, *(f"Table {t} ({m})" for t, m in self.paper_tables)]
        tasks = f", {'/'.join(self.tasks)} datasets" if self.tasks else ""
        return (", ".join(names) or "no printed table") + tasks


def claims_of(params: Any, paper: str) -> list[Claim]:
    """The paper's claims in params.yaml order."""
    found = []
    for name, spec in (params.paper(paper).get("claims") or {}).items():
        found.append(
            Claim(
                paper=paper,
                name=name,
                quote=spec["quote"],
                location=spec["location"],
                kind=spec["kind"],
                spec=spec,
                tables=tuple(spec.get("tables") or ()),
                paper_tables=tuple((str(t["table"]), t["metric"]) for t in spec.get("paper_tables") or ()),
                tasks=tuple(spec.get("tasks") or ()),
                method=spec.get("method"),
                over=tuple(spec["over"]) if "over" in spec else None,
            )
        )
    return found


def goodness_sign(metric: str) -> float:
    """+1 where a higher value is better, −1 where lower is (unknown metrics count as higher-better)."""
    return -1.0 if HIGHER_IS_BETTER.get(metric) is False else 1.0


def _task_of(params: Any, paper: str, dataset: str) -> str | None:
    try:
        return get_source(params.source_of(paper, dataset)).task
    except Exception:  # a dataset the paper's config does not list (e.g. Table 2's image sets)
        return None


def table_for(params: Any, claim: Claim, dataset: str) -> str | None:
    """Which of the claim's tables a dataset is read from: the first whose task types include the
    dataset's (Table 1's ranks read binary sets from Table 10, multi-class ones from Table 8)."""
    task = _task_of(params, claim.paper, dataset)
    if claim.tasks and task not in claim.tasks:
        return None
    tables = params.paper(claim.paper)["tables"]
    for key in claim.tables:
        if not tables[key].get("tasks") or task in tables[key]["tasks"]:
            return key
    return None


def printed_grid(params: Any, claim: Claim) -> Grid:
    """The paper's own numbers the claim rests on, per dataset and method label."""
    cfg = params.paper(claim.paper)
    source = cfg.get("reference")
    coordinates = [
        (reference_table_id(key, cfg["tables"][key]), cfg["tables"][key]["metric"], True) for key in claim.tables
    ] + [(table, metric, False) for table, metric in claim.paper_tables]
    grid: Grid = {}
    for (table, metric, by_task), key in zip(coordinates, [*claim.tables, *([None] * len(claim.paper_tables))]):
        methods = reference_methods(claim.paper, table, metric, source=source)
        for dataset in reference_datasets(claim.paper, table, metric, source=source):
            if by_task and table_for(params, claim, dataset) != key:
                continue
            for method in methods:
                value = lookup(claim.paper, table, dataset, method, metric, source=source)
                if value is not None:
                    se = value.spread if value.spread_kind == "se" else None
                    grid.setdefault(dataset, {})[method] = Cell(value.value, se, metric)
    return grid


def ours_grid(params: Any, claim: Claim, cells: Sequence[Any]) -> Grid:
    """Our means (and their SEs) of the cells the claim rests on, per dataset and method label."""
    grid: Grid = {}
    for cell in cells:
        if cell.paper != claim.paper or cell.ours_mean is None or table_for(params, claim, cell.column) != cell.table:
            continue
        grid.setdefault(cell.column, {})[cell.method] = Cell(float(cell.ours_mean), cell.ours_se, cell.metric)
    return grid


def compared_methods(claim: Claim, grid: Grid) -> tuple[str, list[str]]:
    """The claimed method and the methods it is compared with (`over`, or every other one printed)."""
    method = claim.method or ""
    if claim.over is not None:
        return method, list(claim.over)
    printed = dict.fromkeys(m for row in grid.values() for m in row)
    return method, [m for m in printed if m != method]
