"""The papers' own numbers (reported_results.csv), for printing beside ours.

The CSV ships as package data so that tables can be built from any working directory. A paper
added through params.yaml alone may name its own CSV of the same columns instead
(`papers.<paper>.reference`, relative to params.yaml): every function here takes that file as
`source` (None: the packaged CSV). Values are kept twice: as floats (for the tidy CSV and
comparisons) and as the paper's exact text, so a quoted "94.20" is not reprinted as "94.2" or
padded to false precision. Besides the papers' result tables the CSV holds the compute cost a
paper reports (metrics in COST_METRICS, e.g. NPT's Tables 6-7), read by `reported_costs`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from tabrepro.errors import InputError

PACKAGE = "tabrepro.reporting"  # the CSV ships with the report's package data
RESOURCE = "reported_results.csv"
COLUMNS = ["paper", "table", "dataset", "method", "metric", "value", "spread", "spread_kind"]
# Where each number comes from: the paper's own run, or quoted from another paper (the BiSHop thesis
# marks those in Fig. 4.1 and quotes every Table 4.1 baseline), and how its configuration was chosen.
PROVENANCE_COLUMNS = ["origin", "quoted_from", "selected_on"]
ORIGINS = ("own run", "quoted")
# A paper's reported compute cost: wall time of the run, peak main memory and peak GPU memory.
COST_METRICS = ("execution_time_s", "peak_main_memory_gb", "peak_gpu_memory_gb")

Key = tuple[str, str, str, str, str]  # (paper, table, dataset, method, metric)


@dataclass(frozen=True)
class PaperValue:
    """One number quoted from a paper, with its spread if the paper gives one."""

    value: float
    spread: float | None
    spread_kind: str | None  # "se", "sd" or None
    value_text: str
    spread_text: str | None
    origin: str = "own run"
    quoted_from: str | None = None
    selected_on: str | None = None

    @property
    def quoted(self) -> bool:
        """Whether the paper quotes this number from another paper (another protocol's run)."""
        return self.origin == "quoted"


class ReferenceFileError(InputError, ValueError):
    """A reference CSV that cannot be read or has malformed rows; the message names the file."""


def load_reference(source: str | Path | None = None) -> pd.DataFrame:
    """All reported numbers as strings (a copy: callers may modify it freely)."""
    return _frame(_key(source)).copy()


def _key(source: str | Path | None) -> str | None:
    return None if source is None else str(source)


@functools.cache
def _frame(source: str | None) -> pd.DataFrame:
    name = RESOURCE if source is None else source
    try:
        opened = resources.files(PACKAGE).joinpath(RESOURCE) if source is None else Path(source)
        with opened.open("r", encoding="utf-8") as handle:
            frame = pd.read_csv(handle, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError) as error:
        raise ReferenceFileError(f"{name}: cannot read the reference CSV: {error}") from None
    missing = set(COLUMNS + PROVENANCE_COLUMNS) - set(frame.columns)
    if missing:
        raise ReferenceFileError(f"{name}: missing columns {sorted(missing)}")
    frame = frame[COLUMNS + PROVENANCE_COLUMNS].apply(lambda column: column.str.strip())
    unknown = sorted(set(frame["origin"]) - set(ORIGINS))
    if unknown:
        raise ReferenceFileError(f"{name}: unknown origin {unknown} (known: {', '.join(ORIGINS)})")
    unsourced = frame[(frame["origin"] == "quoted") & (frame["quoted_from"] == "")]
    if not unsourced.empty:
        raise ReferenceFileError(f"{name}: quoted numbers without their source:\n{unsourced.to_string()}")
    duplicated = frame.duplicated(subset=["paper", "table", "dataset", "method", "metric"])
    if duplicated.any():
        raise ReferenceFileError(f"{name}: duplicate keys:\n{frame[duplicated].to_string()}")
    return frame


@functools.cache
def _index(source: str | None) -> dict[Key, PaperValue]:
    frame = _frame(source)
    index: dict[Key, PaperValue] = {}
    for row in frame.itertuples(index=False):
        key = (row.paper, row.table, row.dataset, row.method, row.metric)
        value = _paper_value(row.value, row.spread, row.spread_kind, key, source)
        index[key] = replace(
            value, origin=row.origin, quoted_from=row.quoted_from or None, selected_on=row.selected_on or None
        )
    return index


def _paper_value(value: str, spread: str, kind: str, key: Key, source: str | None) -> PaperValue:
    try:
        number = float(value)
        spread_number = float(spread) if spread else None
    except ValueError:
        raise ReferenceFileError(f"{source or RESOURCE}: non-numeric value or spread for {key}") from None
    return PaperValue(
        value=number,
        spread=spread_number,
        spread_kind=(kind or None) if spread else None,
        value_text=value,
        spread_text=spread or None,
    )


def lookup(
    paper: str, table: str, dataset: str, method: str, metric: str, *, source: str | Path | None = None
) -> PaperValue | None:
    """The paper's number for this cell, or None when the paper does not report it."""
    return _index(_key(source)).get((paper, str(table), dataset, method, metric))


def reference_methods(
    paper: str, table: str, metric: str, datasets: Iterable[str] | None = None, *, source: str | Path | None = None
) -> list[str]:
    """Methods the paper reports in `table` for `metric`, in the order the CSV lists them."""
    frame = _select(paper, table, metric, source)
    if datasets is not None:
        frame = frame[frame["dataset"].isin(list(datasets))]
    return list(dict.fromkeys(frame["method"]))


def reference_datasets(paper: str, table: str, metric: str, *, source: str | Path | None = None) -> list[str]:
    """Datasets the paper reports in `table` for `metric`, in the order the CSV lists them."""
    return list(dict.fromkeys(_select(paper, table, metric, source)["dataset"]))


def _select(paper: str, table: str, metric: str, source: str | Path | None) -> pd.DataFrame:
    frame = _frame(_key(source))
    mask = (frame["paper"] == paper) & (frame["table"] == str(table)) & (frame["metric"] == metric)
    return frame[mask]


@dataclass(frozen=True)
class ReportedCost:
    """The compute cost a paper reports for one method on one dataset, and the table it is from."""

    table: str
    values: Mapping[str, PaperValue]  # COST_METRICS -> value


def reported_costs(paper: str, *, source: str | Path | None = None) -> dict[tuple[str, str], ReportedCost]:
    """(dataset, method) -> the paper's reported compute cost, in the order the CSV lists them."""
    frame = _frame(_key(source))
    index = _index(_key(source))
    tables: dict[tuple[str, str], str] = {}
    values: dict[tuple[str, str], dict[str, PaperValue]] = {}
    for row in frame[(frame["paper"] == paper) & frame["metric"].isin(COST_METRICS)].itertuples(index=False):
        tables.setdefault((row.dataset, row.method), row.table)
        values.setdefault((row.dataset, row.method), {})[row.metric] = index[
            (row.paper, row.table, row.dataset, row.method, row.metric)
        ]
    return {key: ReportedCost(tables[key], values[key]) for key in values}


_TABLE_KEY = re.compile(r"^(?P<prefix>table|fig)?(?P<number>\d+(?:_\d+)*)(?:_[A-Za-z].*)?$")


def reference_table_id(table_key: str, table_cfg: Mapping[str, Any] | None = None) -> str:
    """Map a params.yaml table key to the CSV's `table` id.

    params.yaml keys must be identifiers ("table8", "fig4_1", "table4_1_r2") while the paper
    numbers its tables "8", "fig4.1", "4.1"; an explicit `reference_table` entry wins.
    """
    if table_cfg is not None and table_cfg.get("reference_table") is not None:
        return str(table_cfg["reference_table"])
    match = _TABLE_KEY.match(table_key)
    if match is None:
        raise ValueError(f"cannot derive the paper's table id from {table_key!r}; set `reference_table`")
    number = match["number"].replace("_", ".")
    return f"fig{number}" if match["prefix"] == "fig" else number
