"""dvc.yaml's per-paper lines, generated from params.yaml's `papers`.

DVC has no loop over the papers inside a stage (its `foreach` makes a stage per item, and the
job matrix stays in Snakemake), so the lines that name a paper — the stages' `papers.<paper>.*`
params, each paper's results directory as an output or dependency, the tables rules the
`tables` stage may run, and a `dvc plots` scatter per table — sit in marked blocks of dvc.yaml
(`# papers:begin <name>` ... `# papers:end <name>`) that `update_dvc_yaml` rewrites from
params.yaml. Everything else in dvc.yaml is written by hand. Paths in stage fields keep DVC's
`${paths.*}`; the `vars` block holds literal strings for the commands, as DVC interpolates nothing
inside `vars`, so a stage's resolved command (what dvc.lock records) reads as if written out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tabrepro.readme_blocks import ReadmeBlockError, replace_block
from tabrepro.reference import reference_table_id

DVC_FILE = Path("dvc.yaml")
BEGIN, END = "# papers:begin", "# papers:end"


def _vars(raw: Mapping[str, Any]) -> list[str]:
    results = raw["paths"]["results"]
    return [
        f"- paper_results: {' '.join(f'{results}/{paper}' for paper in raw['papers'])}",
        f"  tables_rules: {' '.join(f'tables_{paper}' for paper in raw['papers'])}",
    ]


def _data_params(raw: Mapping[str, Any]) -> list[str]:
    return [f"- papers.{paper}.datasets" for paper in raw["papers"]]


def _train_params(raw: Mapping[str, Any]) -> list[str]:
    return [f"- papers.{paper}.{key}" for paper in raw["papers"] for key in ("datasets", "models")]


def _results_outs(raw: Mapping[str, Any]) -> list[str]:
    return [line for paper in raw["papers"] for line in (f"- ${{paths.results}}/{paper}:", "    persist: true")]


def _results_deps(raw: Mapping[str, Any]) -> list[str]:
    return [f"- ${{paths.results}}/{paper}" for paper in raw["papers"]]


def plotted_tables(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(paper, table) of each scatter: per-dataset tables of the paper's own methods. Rank tables
    have no per-dataset paper values; ablation tables (their own `models`) compare variants of
    one model, judged cell by cell in the scorecard."""
    return [
        (paper, key)
        for paper, cfg in raw["papers"].items()
        for key, table in cfg["tables"].items()
        if table.get("kind", "metric") == "metric" and not table.get("models")
    ]


def _plot_title(paper: str, key: str, table: Mapping[str, Any]) -> str:
    number = reference_table_id(key, table)
    label = f"Fig. {number[3:]}" if number.startswith("fig") else f"Table {number}"
    return f"{paper} {label}, {table['title']}: ours vs paper"


def _plots(raw: Mapping[str, Any]) -> list[str]:
    lines = []
    for paper, key in plotted_tables(raw):
        title = json.dumps(_plot_title(paper, key, raw["papers"][paper]["tables"][key]), ensure_ascii=False)
        lines += [
            f"- ${{paths.results}}/tables/{paper}/{key}.csv:",
            "    template: scatter",
            "    x: paper_value",
            "    y: ours_mean",
            f"    title: {title}",
        ]
    return lines


BLOCKS: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "vars": _vars,
    "data-params": _data_params,
    "train-params": _train_params,
    "train-outs": _results_outs,
    "tables-deps": _results_deps,
    "report-deps": _results_deps,
    "plots": _plots,
}


def _indent(text: str, marker: str, path: Path) -> str:
    """The indentation of the line holding `marker`: the block's lines get the same."""
    for line in text.splitlines():
        if line.strip() == marker:
            return line[: len(line) - len(line.lstrip())]
    raise ReadmeBlockError(f"{path}: no line `{marker}`")


def update_dvc_yaml(raw: Mapping[str, Any], path: Path = DVC_FILE, *, check: bool = False) -> list[str]:
    """Rewrite dvc.yaml's paper blocks from params.yaml's content `raw`; with `check`, write
    nothing. Returns the names of the blocks that were (or, with `check`, would be) changed."""
    path = Path(path)
    changed = []
    for name, lines_of in BLOCKS.items():
        begin, end = f"{BEGIN} {name}", f"{END} {name}"
        indent = _indent(path.read_text(encoding="utf-8"), begin, path)
        block = "\n".join([begin, *(indent + line for line in lines_of(raw)), indent + end])
        if not replace_block(path, block, begin, end, check=True):
            changed.append(name)
            if not check:
                replace_block(path, block, begin, end)
    return changed
