"""A paper's sections: each table with the paper's number beside ours, a paper-vs-ours scatter,
then its ranks (ranks.py) and compute cost (cost.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tabrepro import figures
from tabrepro.reporting.html.cost import cost_block
from tabrepro.reporting.html.page import Z_FAR, Page, ReportError, as_float, esc, fmt, se_of, se_units, slug, table_html
from tabrepro.reporting.html.ranks import rank_block
from tabrepro.reporting.tables import DASH, ResultsError, collect_current_results, decimals_for, fold_frame


def _selected_results(params: Any, paper: str) -> list[dict[str, Any]]:
    try:
        return collect_current_results(params, paper)
    except ResultsError as error:
        raise ReportError(str(error)) from None


def paper_sections(page: Page, params: Any, paper: str) -> list[dict[str, Any]]:
    paper_cfg = params.paper(paper)
    results = _selected_results(params, paper)
    title = paper_cfg.get("title", paper)
    page.section(f"{paper}-tables", f"{paper}: tables")
    page.note(
        f"{title}. Every table lists our mean over folds with its spread, the paper's number "
        f"beside it, their difference, and the difference in standard-error units "
        f"(SE = sqrt(SE_ours² + SE_paper²) from whichever SEs exist; an SD is turned into an SE "
        f"with the fold count, assuming the paper used as many folds). Cells with "
        f"|difference| > {Z_FAR:g} SE are red, within 1 SE green."
    )
    scatter_rows: list[dict[str, Any]] = []
    for key, table_cfg in paper_cfg.get("tables", {}).items():
        scatter_rows += _table_block(page, params, paper, key, table_cfg)
    page.section(f"{paper}-scatter", f"{paper}: paper vs ours")
    if scatter_rows:
        name = f"{slug(paper)}_scatter.png"
        figures.paper_vs_ours_scatter(scatter_rows, page.out_dir / name)
        page.figure(
            name,
            "Each point is one (dataset, method) cell with both numbers; the dashed line is equality; bars are ± SE.",
        )
    else:
        page.empty("No cell has both our number and the paper's yet.")
    frame = (
        fold_frame(results, paper, paper_cfg.get("models", {}), set(params.selected_datasets(paper)))
        if results
        else None
    )
    rank_block(page, paper, paper_cfg, frame)
    cost_block(page, params, paper, paper_cfg, results)
    return results


def _table_block(page: Page, params: Any, paper: str, key: str, table_cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One paper table from its tidy CSV; returns the rows for the scatter plot."""
    path = Path(params.tables_dir(paper)) / f"{key}.csv"
    page.add(f'<h3 id="{esc(slug(paper, key))}">{esc(key)}: {esc(table_cfg.get("title", key))}</h3>')
    if not path.is_file():
        page.empty(f"{path} does not exist yet (run `tabrepro tables {paper}`).")
        return []
    try:
        tidy = pd.read_csv(path)
    except (OSError, ValueError) as error:
        raise ReportError(f"{path}: cannot read table CSV: {error}") from None
    is_rank = table_cfg.get("kind", "metric") == "rank"
    if is_rank:
        tidy = tidy[tidy["dataset"] == "all"]
    if tidy.empty:
        page.empty("No results and no paper values for this table yet.")
        return []
    header = [
        "Dataset" if not is_rank else "Task",
        "Method",
        "Ours",
        "± (kind)",
        "n",
        "Paper",
        "±",
        "Ours − paper",
        "in SE units",
    ]
    rows, classes, chart, scatter = [], [], [], []
    for record in tidy.to_dict("records"):
        metric = str(record["metric"])
        n = record.get("n_datasets") if is_rank else record.get("n_folds")
        ours_se = se_of(record.get("ours_spread"), record.get("spread_kind"), n)
        paper_se = se_of(record.get("paper_spread"), record.get("paper_spread_kind"), n)
        ours, paper_value = as_float(record.get("ours_mean")), as_float(record.get("paper_value"))
        z = se_units(ours, ours_se, paper_value, paper_se)
        diff = None if ours is None or paper_value is None else ours - paper_value
        places = decimals_for(ours if ours is not None else (paper_value or 0.0), metric)
        column = metric if is_rank else record["dataset"]
        rows.append(
            [
                column,
                record["method"],
                fmt(ours, metric, places),
                f"{fmt(record.get('ours_spread'), metric, places)} ({record.get('spread_kind')})"
                if as_float(record.get("ours_spread")) is not None
                else DASH,
                DASH if as_float(n) is None else int(float(n)),
                fmt(paper_value, metric, places),
                fmt(record.get("paper_spread"), metric, places),
                fmt(diff, metric, places),
                DASH if z is None else f"{z:+.2f}",
            ]
        )
        css = "" if z is None else ("far" if abs(z) > Z_FAR else ("near" if abs(z) <= 1 else ""))
        classes.append([""] * 8 + [css])
        entry = {
            "dataset": column,
            "method": record["method"],
            "metric": metric,
            "ours_mean": ours,
            "ours_se": ours_se,
            "paper_value": paper_value,
            "paper_se": paper_se,
        }
        chart.append(entry)
        if ours is not None and paper_value is not None:
            scatter.append({**entry, "metric": f"{key}: {metric}"})
    page.add(table_html(header, rows, text_columns=2, classes=classes))
    if not is_rank and any(r["ours_mean"] is not None or r["paper_value"] is not None for r in chart):
        name = f"{slug(paper, key)}_bars.png"
        metric = str(table_cfg.get("metric", ""))
        figures.bar_chart_by_dataset(chart, page.out_dir / name, f"{key}: {table_cfg.get('title', key)}", metric)
        page.figure(
            name,
            f"{key}: ours (bars, ± SE over folds) and the paper (diamonds, ± its reported spread as SE) per dataset.",
        )
    return scatter
