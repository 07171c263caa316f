"""One static HTML page (plus its PNGs) that shows every result of a profile's run.

Sections: first the reproduction scorecard (the papers' claims, a forest plot per table, every
table cell judged, see scorecard.py); the papers' tables with the paper's number beside ours
and the difference in SE units;
per-dataset bar charts; a paper-vs-ours scatter; mean ranks, a Friedman test and a
critical-difference diagram; compute cost per model and dataset (like NPT's Tables 6-7); NPT's
analysis experiments (Tables 2 and 3 and their figures); provenance (commits, package versions,
profile, and which results ran on which CPU type / ISA level / GPU, warning when they differ).

Inputs are only files the workflow wrote (results/<paper>/.../metrics.json,
results/tables/<paper>/<table>.csv, results/analysis/**/result.json and their PNGs), so the page
can be rebuilt at any time without rerunning anything. Results of datasets or models outside
the active profile, and analysis results written under another profile, are left out.

The page is built in a temporary sibling directory and swapped in at the end, so a reader never
sees half a report. `screenshot` renders it with headless Chromium (used by the tests).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import numpy as np
import pandas as pd

from tabrepro.analysis.settings import LOOKUP_VARIANTS
from tabrepro.errors import InputError
from tabrepro.layout import REPORT_INDEX_FILE
from tabrepro.reporting import figures
from tabrepro.reporting.rank_tests import OmnibusResult, complete_rank_matrix, friedman_test
from tabrepro.reporting.tables import (
    DASH,
    ResultsError,
    collect_current_results,
    decimals_for,
    fold_frame,
    format_value,
    rank_methods,
    summarize_folds,
)

__all__ = ["ReportError", "build_report", "se_units", "find_chromium", "screenshot", "BrowserError", "INDEX"]

INDEX = REPORT_INDEX_FILE
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")
# NPT's own compute cost (the NPT paper's Tables 6-7, §B.6), for the cost section.
PAPER_NPT_COST = {"protein": ("11 h 51 m", "6.17 GB (GPU)"), "higgs": ("5 d 22 h", "19.18 GB (GPU)")}
Z_FAR = 2.0  # |difference| above this many SE is highlighted


class ReportError(InputError, ValueError):
    """A result file the report cannot use; the message names it."""


class BrowserError(InputError, RuntimeError):
    """Headless Chromium is missing or failed."""


# ---------------------------------------------------------------------------- small helpers
def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _fmt(value: Any, metric: str = "", decimals: int | None = None) -> str:
    number = _float(value)
    return DASH if number is None else format_value(number, metric, decimals)


def _se(spread: Any, kind: Any, n: Any) -> float | None:
    """A spread as a standard error: SE as is, SD / sqrt(n)."""
    spread = _float(spread)
    if spread is None:
        return None
    if kind == "se":
        return spread
    count = _float(n)
    if kind == "sd" and count and count > 0:
        return spread / math.sqrt(count)
    return None


def se_units(ours: Any, ours_se: float | None, paper: Any, paper_se: float | None) -> float | None:
    """(ours - paper) / sqrt(SE_ours^2 + SE_paper^2), using whichever SEs exist (None if none)."""
    a, b = _float(ours), _float(paper)
    parts = [s for s in (ours_se, paper_se) if s is not None and s > 0]
    if a is None or b is None or not parts:
        return None
    return (a - b) / math.sqrt(sum(s * s for s in parts))


def _table_html(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    text_columns: int = 1,
    classes: Iterable[Sequence[str]] | None = None,
) -> str:
    """A plain HTML table; the first `text_columns` columns are left-aligned text."""
    head = "".join(f'<th class="{"text" if i < text_columns else ""}">{_e(h)}</th>' for i, h in enumerate(header))
    body = []
    class_rows = list(classes) if classes is not None else None
    for r, row in enumerate(rows):
        cells = []
        for i, cell in enumerate(row):
            css = ["text"] if i < text_columns else []
            if class_rows is not None and class_rows[r][i]:
                css.append(class_rows[r][i])
            cells.append(f'<td class="{" ".join(css)}">{_e(cell)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


@dataclass
class _Page:
    """What the sections contribute: HTML blocks, navigation entries and figure files."""

    out_dir: Path
    blocks: list[str] = field(default_factory=list)
    nav: list[tuple[str, str]] = field(default_factory=list)

    def section(self, anchor: str, title: str) -> None:
        self.nav.append((anchor, title))
        self.blocks.append(f'<h2 id="{_e(anchor)}">{_e(title)}</h2>')

    def add(self, text: str) -> None:
        self.blocks.append(text)

    def note(self, text: str) -> None:
        self.blocks.append(f'<p class="note">{_e(text)}</p>')

    def empty(self, text: str) -> None:
        self.blocks.append(f'<p class="empty">{_e(text)}</p>')

    def figure(self, name: str, caption: str) -> None:
        self.blocks.append(
            f'<figure><img src="{_e(name)}" alt="{_e(caption)}"><figcaption>{_e(caption)}</figcaption></figure>'
        )

    def copy_figure(self, source: Path, name: str, caption: str) -> None:
        if source.is_file():
            shutil.copyfile(source, self.out_dir / name)
            self.figure(name, caption)


def _slug(*parts: Any) -> str:
    text = "_".join(str(p) for p in parts)
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)


# ---------------------------------------------------------------------------- entry point
def build_report(params: Any, out_dir: Path) -> Path:
    """Write `out_dir/index.html` and its PNGs from the results tree; returns the index path."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp-"))
    try:
        page = _Page(staging)
        provenance_records: list[dict[str, Any]] = []
        _scorecard_section(page, params)
        for paper in params.papers:
            if not params.selected_datasets(paper):
                continue
            provenance_records += _paper_sections(page, params, paper)
        provenance_records += _analysis_sections(page, params)
        _sparsity_section(page, params)
        _provenance_section(page, params, provenance_records)
        _write_index(page, params)
        _swap_in(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir / INDEX


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Replace out_dir by staging with two renames (the old copy is removed afterwards)."""
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        os.replace(out_dir, old)
    os.replace(staging, out_dir)
    os.chmod(out_dir, 0o755)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _write_index(page: _Page, params: Any) -> None:
    template = resources.files("tabrepro.reporting").joinpath("templates", "report.html").read_text("utf-8")
    nav = "".join(f'<a href="#{_e(a)}">{_e(t)}</a>' for a, t in page.nav)
    profile = params.profile_name
    subtitle = (
        f"Profile {profile!r}: {params.profile.get('description', '')} "
        f"— built by `tabrepro report` from {params.results_dir}/"
    )
    text = Template(template).substitute(
        title=_e("tabrepro: reproduction report"), subtitle=_e(subtitle), nav=nav, body="\n".join(page.blocks)
    )
    (page.out_dir / INDEX).write_text(text, encoding="utf-8")


# ---------------------------------------------------------------------------- scorecard
def _scorecard_section(page: _Page, params: Any) -> None:
    """The scorecard first: the papers' claims, a forest plot per table, the counts, then the judged
    cells (collapsed) and one line per reason for the cells that did not run. Built in memory from
    the same results as the tables, so it can never disagree with them; results/scorecard/summary.json
    is only checked for being current."""
    from tabrepro.reporting import scorecard as sc
    from tabrepro.reporting import scorecard_markdown as scm
    from tabrepro.reporting.claims import CLAIM_HEADER, claim_rows, judge_claims
    from tabrepro.reporting.figures import forest_plot

    try:
        card = sc.build_scorecard(params)
    except ResultsError as error:
        raise ReportError(str(error)) from None
    page.section("scorecard", "Reproduction scorecard")
    if not card.papers:
        page.empty("The profile selects no dataset of any paper: nothing to judge.")
        return
    page.add('<h3 id="scorecard-claims">The papers\' claims, judged on our runs</h3>')
    page.add(_table_html(CLAIM_HEADER, claim_rows(judge_claims(params, card)), 6))
    for (paper, table), title in card.titles.items():
        mine = [c for c in card.cells if c.paper == paper and c.table == table and c.ci_low is not None]
        if mine:
            name = f"forest-{_slug(paper, table)}.png"
            forest_plot(mine, page.out_dir / name, f"{paper} {table}: {title}")
            page.figure(name, f"{paper} {table}: Δ per cell in units of δ, 95 % CI, coloured by verdict")
    page.note(" ".join(scm.rule_text(card)[0].replace("**", "").split()))
    page.note(_scorecard_file_state(params, sc.summary(card)))
    page.add(_table_html(["Paper", "Table", "numbers", *scm.TALLY_VERDICTS, "cells"], scm.count_rows(card), 3))
    for paper, items in card.unobtainable.items():
        for dataset, error in items.items():
            page.add(f'<p class="warning">{_e(paper)}/{_e(dataset)}: data not obtainable: {_e(error)}</p>')
    judged = [c for c in card.cells if c.verdict_class != sc.NOT_RUN]
    page.add(f'<h3 id="scorecard-judged">Judged cells ({len(judged)})</h3>')
    page.add(_scorecard_table(judged, scm) if judged else '<p class="empty">None.</p>')
    idle = [c for c in card.cells if c.verdict_class == sc.NOT_RUN]
    page.add(f"<details><summary>Not run ({len(idle)} cells), by reason</summary>")
    page.add("<ul>" + "".join(f"<li>{_e(line[2:])}</li>" for line in scm.not_run_lines(idle)) + "</ul></details>")


def _scorecard_file_state(params: Any, current: Mapping[str, Any]) -> str:
    path = params.layout.scorecard_summary.path()
    if not path.is_file():
        return f"{path} has not been written: run `tabrepro scorecard` (this section was built in memory)."
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        written = None
    if written != json.loads(json.dumps(current)):
        return f"{path} is out of date: run `tabrepro scorecard` (this section was built in memory)."
    return f"Also written to {path.parent}/ (scorecard.md, scorecard.csv, summary.json)."


def _scorecard_table(cells: Sequence[Any], scm: Any) -> str:
    css = {"differs": "far", "reproduced": "near"}
    rows = [
        [
            c.paper,
            c.table,
            c.column,
            c.method,
            scm.ours_text(c),
            scm.n_text(c),
            scm.paper_text(c),
            scm.margin_text(c),
            scm.delta_text(c),
            scm.verdict_text(c),
            scm.notes_text(c),
        ]
        for c in cells
    ]
    classes = [[""] * 9 + [f"text {css.get(c.verdict_class, '')}".strip(), "text"] for c in cells]
    return _table_html(
        ["Paper", "Table", "Column", "Method", "Ours (± SE)", "n", "Paper", "δ", "Δ [95 % CI]", "Verdict", "Notes"],
        rows,
        text_columns=4,
        classes=classes,
    )


# ---------------------------------------------------------------------------- paper results
def _selected_results(params: Any, paper: str) -> list[dict[str, Any]]:
    try:
        return collect_current_results(params, paper)
    except ResultsError as error:
        raise ReportError(str(error)) from None


def _paper_sections(page: _Page, params: Any, paper: str) -> list[dict[str, Any]]:
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
        name = f"{_slug(paper)}_scatter.png"
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
    _rank_block(page, paper, paper_cfg, frame)
    _cost_block(page, params, paper, paper_cfg, results)
    return results


def _table_block(page: _Page, params: Any, paper: str, key: str, table_cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One paper table from its tidy CSV; returns the rows for the scatter plot."""
    path = Path(params.tables_dir(paper)) / f"{key}.csv"
    page.add(f'<h3 id="{_e(_slug(paper, key))}">{_e(key)}: {_e(table_cfg.get("title", key))}</h3>')
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
        ours_se = _se(record.get("ours_spread"), record.get("spread_kind"), n)
        paper_se = _se(record.get("paper_spread"), record.get("paper_spread_kind"), n)
        ours, paper_value = _float(record.get("ours_mean")), _float(record.get("paper_value"))
        z = se_units(ours, ours_se, paper_value, paper_se)
        diff = None if ours is None or paper_value is None else ours - paper_value
        places = decimals_for(ours if ours is not None else (paper_value or 0.0), metric)
        column = metric if is_rank else record["dataset"]
        rows.append(
            [
                column,
                record["method"],
                _fmt(ours, metric, places),
                f"{_fmt(record.get('ours_spread'), metric, places)} ({record.get('spread_kind')})"
                if _float(record.get("ours_spread")) is not None
                else DASH,
                DASH if _float(n) is None else int(float(n)),
                _fmt(paper_value, metric, places),
                _fmt(record.get("paper_spread"), metric, places),
                _fmt(diff, metric, places),
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
    page.add(_table_html(header, rows, text_columns=2, classes=classes))
    if not is_rank and any(r["ours_mean"] is not None or r["paper_value"] is not None for r in chart):
        name = f"{_slug(paper, key)}_bars.png"
        metric = str(table_cfg.get("metric", ""))
        figures.bar_chart_by_dataset(chart, page.out_dir / name, f"{key}: {table_cfg.get('title', key)}", metric)
        page.figure(
            name,
            f"{key}: ours (bars, ± SE over folds) and the paper (diamonds, ± its reported spread as SE) per dataset.",
        )
    return scatter


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


def _rank_block(page: _Page, paper: str, paper_cfg: Mapping[str, Any], frame: pd.DataFrame | None) -> None:
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
        _table_html(
            ["Method", "Mean rank", "± SE"],
            [
                [r["method"], f"{r['mean_rank']:.2f}", DASH if r["se"] is None else f"{r['se']:.2f}"]
                for r in sorted(table, key=lambda r: r["mean_rank"])
            ],
        )
    )
    name = f"{_slug(paper)}_mean_rank.png"
    figures.mean_rank_plot(table, page.out_dir / name, f"{paper}: mean rank over {kind}")
    page.figure(name, "Mean rank ± SE per method.")
    if len(table) >= 2:
        claims = independent and omnibus.significant()
        note, caption = _cd_wording(omnibus, independent)
        name = f"{_slug(paper)}_cd.png"
        figures.critical_difference_diagram(
            {r["method"]: r["mean_rank"] for r in table},
            n_blocks,
            page.out_dir / name,
            f"{paper}: critical differences",
            claims=claims,
            note=note,
        )
        page.figure(name, caption)


def _cd_wording(omnibus: OmnibusResult, independent: bool) -> tuple[str | None, str]:
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


def _cost_block(
    page: _Page, params: Any, paper: str, paper_cfg: Mapping[str, Any], results: list[dict[str, Any]]
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
        wall = [_float(r.get("wall_time_s")) for r in members]
        wall = [w for w in wall if w is not None]
        memory = [_float(r.get("peak_memory_mb")) for r in members]
        memory = [m for m in memory if m is not None]
        gpu = [_float(r.get("peak_gpu_memory_mb")) for r in members]
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
        _table_html(
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
    name = f"{_slug(paper)}_cost.png"
    figures.cost_chart(chart, page.out_dir / name, f"{paper}: compute cost per model and dataset")
    page.figure(name, "Mean wall time per fold (log scale) and peak memory.")


def _variant_wall_time(params: Any, paper: str, dataset: str, model: str) -> float:
    """Wall time of per-configuration jobs (results/.../foldK/config*/result.json), if any."""
    total = 0.0
    base = Path(params.results_dir) / paper / dataset / model
    for path in sorted(base.glob("fold*/config*/result.json")):
        try:
            total += _float(json.loads(path.read_text(encoding="utf-8")).get("wall_time_s")) or 0.0
        except (OSError, ValueError):
            continue
    return total


# ---------------------------------------------------------------------------- analysis results
def _analysis_results(params: Any) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    """Analysis result files written under the active profile, by experiment."""
    root = params.layout.analysis_dir.path()
    found: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for path in sorted(root.glob("*/*/result.json")) + sorted(root.glob("*/*/fold*/result.json")):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise ReportError(f"{path}: cannot read analysis result: {error}") from None
        if not isinstance(payload, dict) or "experiment" not in payload:
            raise ReportError(f"{path}: not an analysis result (no 'experiment')")
        if payload.get("profile") != params.profile_name:
            continue
        found.setdefault(payload["experiment"], []).append((path, payload))
    return found


def _analysis_sections(page: _Page, params: Any) -> list[dict[str, Any]]:
    found = _analysis_results(params)
    page.section("analysis", "NPT analysis experiments")
    if not found:
        page.empty("No analysis results for this profile yet.")
        return []
    _corruption_block(page, found.get("corruption", []))
    _lookup_block(page, found.get("lookup", []))
    _deletion_block(page, found.get("deletion", []))
    _attention_block(page, found.get("attention", []))
    return [payload for entries in found.values() for _, payload in entries]


def _mean_se(values: Sequence[float | None]) -> tuple[float | None, float | None, int]:
    clean = [v for v in values if v is not None]
    if not clean:
        return None, None, 0
    se = float(np.std(clean, ddof=1) / math.sqrt(len(clean))) if len(clean) > 1 else None
    return float(np.mean(clean)), se, len(clean)


def _corruption_block(page: _Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:
    page.add('<h3 id="corruption">Corruption of the other datapoints (Alg. 1, Table 2)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    page.note(
        "For each test row every attribute of the other rows in its batch is permuted "
        "independently (values with their mask bits), and the row is predicted again. "
        "Δ is the accuracy change in points (classification) or (RMSE_clean − RMSE_corrupt) / "
        "RMSE_clean in % (regression): negative means the model needed the other rows. Mean ± "
        "SE over folds."
    )
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for _, payload in entries:
        if payload.get("n_test_rows"):
            by_dataset.setdefault(payload["dataset"], []).append(payload)
    rows, chart = [], []
    for dataset, payloads in sorted(by_dataset.items()):
        metric_delta = payloads[0]["table2"]["metric"]
        base_metric = "rmse" if metric_delta.startswith("delta_rmse") else "accuracy_pct"
        clean, clean_se, n = _mean_se([p["clean"].get(base_metric) for p in payloads])
        corrupt, corrupt_se, _ = _mean_se([p["corrupted"].get(base_metric) for p in payloads])
        delta, delta_se, _ = _mean_se([p["table2"]["ours"] for p in payloads])
        paper_value = payloads[0]["table2"].get("paper")
        z = se_units(delta, delta_se, paper_value, None)
        extra = []
        for other in ("auroc", "nll"):
            c, _, _ = _mean_se([p["clean"].get(other) for p in payloads])
            k, _, _ = _mean_se([p["corrupted"].get(other) for p in payloads])
            if c is not None and k is not None:
                extra.append(f"{other} {c:.3f} → {k:.3f}")
        rows.append(
            [
                dataset,
                metric_delta,
                n,
                sum(p["n_test_rows"] for p in payloads),
                _fmt(clean, base_metric),
                _fmt(corrupt, base_metric),
                f"{_fmt(delta, '', 2)}" + ("" if delta_se is None else f" ± {delta_se:.2f}"),
                _fmt(paper_value, "", 1),
                DASH if z is None else f"{z:+.2f}",
                "; ".join(extra) or DASH,
            ]
        )
        chart.append(
            {
                "dataset": dataset,
                "metric": base_metric,
                "clean": clean or 0.0,
                "corrupted": corrupt or 0.0,
                "clean_se": clean_se,
                "corrupted_se": corrupt_se,
                "delta_text": f"{_fmt(delta, '', 2)} (paper {_fmt(paper_value, '', 1)})",
            }
        )
    page.add(
        _table_html(
            [
                "Dataset",
                "Δ metric",
                "Folds",
                "Test rows",
                "Clean",
                "Corrupted",
                "Δ ours",
                "Δ paper",
                "in SE units",
                "Other metrics",
            ],
            rows,
            2,
        )
    )
    if chart:
        figures.corruption_chart(chart, page.out_dir / "corruption.png")
        page.figure("corruption.png", "Clean vs corrupted test metric (mean ± SE over folds).")


def _lookup_block(page: _Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:
    page.add('<h3 id="lookup">Semi-synthetic lookup (Table 3, Fig. 3)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    for path, payload in entries:
        comparable = payload.get("paper_values_comparable", False)
        paper_values = {(p["variant"], p["method"]): p["rmse"] for p in payload.get("paper_values", [])}
        page.note(
            f"Data: {payload.get('source')} ({payload.get('n_train_rows')} training rows, "
            f"{payload.get('n_features')} features). Each batch holds originals with hidden "
            f"targets and duplicates with revealed targets; test rows are fresh. 1-NN and k-NN "
            f"(k chosen on validation rows) are fitted on the test duplicates and predict the "
            f"originals. RMSE in target units"
            + (
                "."
                if comparable
                else "; the data are not Protein, so the paper's numbers "
                "(shown for reference) are on another scale: compare ratios, not values."
            )
        )
        rows = []
        order = [v for v in LOOKUP_VARIANTS if v in payload["variants"]]
        for variant in order:
            result = payload["variants"][variant]
            for method in ("NPT", "1-NN", "k-NN"):
                ours = result["rmse"][method]
                extra = ""
                if method == "NPT":
                    slopes = [run["slope"] for run in result.get("interventions", [])]
                    on_dup = result.get("attention_on_duplicate") or []
                    last = np.mean(on_dup[-1]) if on_dup else None
                    extra = (
                        f"r = {result['pearson_r']['NPT']:.3f}; intervention slope {np.mean(slopes):.2f}"
                        if slopes
                        else ""
                    ) + ("" if last is None else f"; attention on own duplicate {last:.2f}")
                elif method == "k-NN":
                    extra = f"k = {result['knn']['best_k']}"
                rows.append(
                    [
                        variant.replace("_", " "),
                        method,
                        f"{ours:.3f}",
                        _fmt(paper_values.get((variant, method)), "", 2),
                        f"{ours / max(result['rmse']['NPT'], 1e-12):.1f}" if method != "NPT" else "1.0",
                        extra,
                    ]
                )
        page.add(_table_html(["Variant", "Method", "RMSE ours", "RMSE paper", "÷ NPT (ours)", "Notes"], rows, 2))
        for name in payload.get("figures", []):
            target = name if name.startswith("lookup_") else f"lookup_{name}"
            page.copy_figure(path.parent / name, target, _lookup_caption(name))


def _lookup_caption(name: str) -> str:
    if name.startswith("lookup_rmse"):
        return "Test RMSE per variant: NPT vs 1-NN and k-NN (ours), paper values as diamonds."
    if name.startswith("lookup_knn"):
        return "k-NN test RMSE for k = 1..10 against NPT's RMSE."
    if name.startswith("lookup_interventions"):
        return (
            "Interventions (Fig. 3d-e): changing a duplicate's target moves NPT's prediction "
            "for its original along the dashed ideal line (minus one for Add One)."
        )
    return (
        "ABD attention on a test batch: originals (top/left block) attend to their duplicates "
        "(the off-diagonal band), each panel one head."
    )


def _deletion_block(page: _Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:
    from scipy.stats import wilcoxon

    page.add('<h3 id="deletion">Data deletion (Alg. 2, §4.4)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    page.note(
        "Per test row, other rows are deleted greedily while the prediction changes by less "
        "than Δ_it (0.01, ×1.1 after 50 rejections) and by at most 10 % in total. Distances are "
        "mean Euclidean distances in the preprocessed feature space from the test row to the "
        "kept, the deleted, and an equally large random set of rows. p-values: one-sided "
        "Wilcoxon signed-rank tests over test rows (paper, Protein: kept vs random p ≈ 8.77e-130)."
    )
    rows = []
    pooled: dict[str, dict[str, list[float]]] = {}
    for _path, payload in sorted(entries, key=lambda e: (e[1]["dataset"], e[1].get("fold") or 0)):
        usable = [r for r in payload["runs"] if r["deleted"] and r["kept"]]
        store = pooled.setdefault(payload["dataset"], {"kept": [], "deleted": [], "random": []})
        for key in store:
            store[key] += [r[f"distance_{key}"] for r in usable]
        w = payload["wilcoxon"]
        rows.append(
            [
                payload["dataset"],
                payload.get("fold"),
                payload["n_test_rows"],
                _fmt(payload.get("mean_fraction_deleted"), "", 3),
                _fmt(payload["mean_distance"]["kept"], "", 3),
                _fmt(payload["mean_distance"]["deleted"], "", 3),
                _fmt(payload["mean_distance"]["random"], "", 3),
                _p(w["kept_less_than_random"]["p_value"]),
                _p(w["kept_less_than_deleted"]["p_value"]),
            ]
        )
    for dataset, store in pooled.items():
        if len(store["kept"]) > 1:
            p_random = _wilcoxon_p(wilcoxon, store["kept"], store["random"])
            p_deleted = _wilcoxon_p(wilcoxon, store["kept"], store["deleted"])
            rows.append(
                [
                    dataset,
                    "all",
                    len(store["kept"]),
                    DASH,
                    _fmt(np.mean(store["kept"]), "", 3),
                    _fmt(np.mean(store["deleted"]), "", 3),
                    _fmt(np.mean(store["random"]), "", 3),
                    _p(p_random),
                    _p(p_deleted),
                ]
            )
        name = f"deletion_{_slug(dataset)}.png"
        figures.deletion_histogram(
            store["kept"],
            store["deleted"],
            store["random"],
            page.out_dir / name,
            f"Data deletion on {dataset}: per test row, mean distance",
        )
        page.figure(
            name, f"{dataset}: distribution over test rows of the mean distance of kept, deleted and random rows."
        )
    page.add(
        _table_html(
            [
                "Dataset",
                "Fold",
                "Test rows",
                "Fraction deleted",
                "Dist. kept",
                "Dist. deleted",
                "Dist. random",
                "p (kept < random)",
                "p (kept < deleted)",
            ],
            rows,
            2,
        )
    )


def _wilcoxon_p(test: Any, smaller: Sequence[float], larger: Sequence[float]) -> float | None:
    if np.allclose(smaller, larger):
        return None
    return float(test(smaller, larger, alternative="less").pvalue)


def _p(value: Any) -> str:
    number = _float(value)
    return DASH if number is None else f"{number:.3g}"


def _attention_block(page: _Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:
    page.add('<h3 id="attention">Attention between datapoints (Fig. 3b, 4)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    page.note(
        "ABD attention weights of every layer and head for a test row's batch, rows and columns "
        "sorted by feature-space distance to that test row (first row/column). ρ: Spearman "
        "correlation of the test row's weights with distance (negative = nearer rows get more "
        "attention); mass: the test row's attention on its 10 % nearest rows (uniform = the "
        "fraction itself)."
    )
    for path, payload in sorted(entries, key=lambda e: (e[1]["dataset"], e[1].get("fold") or 0)):
        for ref in payload.get("references", []):
            rows = [
                [
                    s["layer"],
                    s["head"],
                    _fmt(s["spearman_weight_vs_distance"], "", 3),
                    _fmt(s["mass_on_nearest_10pct"], "", 3),
                    _fmt(s["uniform_mass_nearest_10pct"], "", 3),
                    _fmt(s["self_weight"], "", 3),
                ]
                for s in ref["summary"]
            ]
            page.add(
                f"<p>{_e(payload['dataset'])}, fold {_e(payload.get('fold'))}, test row "
                f"{_e(ref['row'])} ({_e(ref['n_rows'])} rows in context)</p>"
            )
            page.add(
                _table_html(
                    ["ABD layer", "Head", "ρ(weight, distance)", "Mass nearest 10 %", "Uniform", "Self weight"], rows, 0
                )
            )
        for name in payload.get("figures", []):
            page.copy_figure(
                path.parent / name,
                f"{_slug(payload['dataset'], 'fold', payload.get('fold'))}_{name}",
                f"{payload['dataset']} fold {payload.get('fold')}: {name.removesuffix('.png').replace('_', ' ')}",
            )


# ---------------------------------------------------------------------------- feature sparsity
def _sparsity_section(page: _Page, params: Any) -> None:
    """BiSHop's Fig. 4.1 (right), from `tabrepro sparsity-plot`'s summary (this profile only)."""
    from tabrepro.feature_sparsity import ORDER_LABELS, curve_files, sparsity_settings

    settings = sparsity_settings(params)
    if settings is None:
        return
    page.section("feature_sparsity", "Feature sparsity (BiSHop Fig. 4.1, right)")
    files = curve_files(params, settings.paper)
    if not files["summary"].is_file():
        page.empty("Not run yet.")
        return
    try:
        summary = json.loads(files["summary"].read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ReportError(f"{files['summary']}: cannot read: {error}") from None
    if summary.get("profile") != params.profile_name:
        page.empty(f"Only results of profile {summary.get('profile')!r}; not run in this profile.")
        return
    page.note(
        f"Datasets: {', '.join(summary['datasets'])} ({settings.paper} paper). Features are removed "
        "at random, or least / most important first by a random forest fitted on each fold's "
        "training rows; each model is retrained with the configuration its validation search "
        "chose on all features and scored once on test. Mean test "
        f"{summary['metric']} over datasets (each the mean over its folds). The thesis shows "
        "these curves only as a figure, so there are no paper numbers to set beside them."
    )
    curves = summary["curves"]
    fractions = sorted({c["fraction"] for c in curves})
    rows = []
    for order in settings.orders:
        for model in settings.models:
            values = {c["fraction"]: c["mean"] for c in curves if c["model"] == model and c["order"] == order}
            label = next((c["label"] for c in curves if c["model"] == model), model)
            rows.append([ORDER_LABELS[order], label, *(_fmt(values.get(f), summary["metric"]) for f in fractions)])
    page.add(_table_html(["Removed", "Model", *(f"{100 * f:.0f} %" for f in fractions)], rows, 2))
    page.copy_figure(
        files["png"], "feature_sparsity.png", f"Mean test {summary['metric']} against the share of features removed."
    )


# ---------------------------------------------------------------------------- provenance
def _provenance_section(page: _Page, params: Any, records: list[dict[str, Any]]) -> None:
    from tabrepro.provenance import hardware_key, provenance

    page.section("provenance", "Provenance")
    current = provenance()
    commits: dict[str, int] = {}
    versions: dict[str, set[str]] = {}
    for record in records:
        info = record.get("provenance") or {}
        commit = info.get("git_commit", "unknown")
        commits[commit] = commits.get(commit, 0) + 1
        for name, version in (info.get("packages") or {}).items():
            versions.setdefault(name, set()).add(str(version))
    params_path = Path(getattr(params, "source", "params.yaml"))
    digest = hashlib.sha256(params_path.read_bytes()).hexdigest()[:16] if params_path.is_file() else DASH
    page.add(
        _table_html(
            ["Item", "Value"],
            [
                ["Profile", f"{params.profile_name}: {params.profile.get('description', '')}"],
                ["Root seed", params.seed],
                ["params.yaml sha256 (first 16)", digest],
                ["Report built at commit", current["git_commit"]],
                ["Platform", current["platform"]],
                ["Report built on", hardware_key(current)],
                ["Result files", len(records)],
            ],
            1,
        )
    )
    _hardware_block(page, records)
    page.add("<p>Commits the results were produced at (result files per commit):</p>")
    page.add(_table_html(["Commit", "Results"], sorted(commits.items()) or [[DASH, 0]], 1))
    rows = []
    for name, version in sorted(current["packages"].items()):
        seen = sorted(versions.get(name, set()))
        rows.append([name, version, ", ".join(seen) or DASH])
    page.add(_table_html(["Package", "Version (report)", "Versions in results"], rows, 1))


def _hardware_block(page: _Page, records: list[dict[str, Any]]) -> None:
    """Which results ran on which CPU type / ISA level / GPU, with a warning when they differ:
    the same config gives bit-identical results only on the same hardware."""
    from tabrepro.provenance import UNRECORDED, hardware_key

    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        info = record.get("provenance") or {}
        group = groups.setdefault(hardware_key(info), {"count": 0, "threads": set(), "results": {}})
        group["count"] += 1
        if info.get("threads") is not None:
            group["threads"].add(f"{info['threads']}" + ("" if info.get("threads_source") == "job" else "?"))
        label, fold = _result_label(record)
        group["results"].setdefault(label, set()).update([] if fold is None else [fold])
    page.add('<h3 id="provenance-hardware">Hardware the results ran on</h3>')
    if not groups:
        page.empty("No result files.")
        return
    if len(groups) > 1:
        page.add(
            f'<p class="warning"><strong>Results from {len(groups)} different hardware '
            f"configurations{' (or unrecorded)' if UNRECORDED in groups else ''}.</strong> "
            "The same config gives bit-identical results only on the same CPU type (and GPU), "
            "so results below that ran on different hardware may differ in their last digits, "
            "and reruns elsewhere need not reproduce them exactly.</p>"
        )
    elif UNRECORDED in groups:
        page.add(
            '<p class="warning">These results do not record their CPU (written before '
            "provenance did): whether they all ran on the same hardware cannot be told.</p>"
        )
    page.note(
        "CPU model and highest instruction-set level (AVX2, AVX-512, AVX-512 BF16, AMX) the "
        "libraries could dispatch to, and the GPU when the job computed on one. Threads: the "
        "job's thread limit ('?' where only the process default was recorded)."
    )
    rows = []
    for key, group in sorted(groups.items(), key=lambda item: -item[1]["count"]):
        which = "; ".join(
            label + (f" (fold{'s' * (len(folds) > 1)} {_fold_ranges(folds)})" if folds else "")
            for label, folds in sorted(group["results"].items())
        )
        rows.append([key, group["count"], ", ".join(sorted(group["threads"])) or DASH, which])
    page.add(_table_html(["CPU · ISA level · GPU", "Result files", "Threads", "Which results"], rows, 1))


def _result_label(record: Mapping[str, Any]) -> tuple[str, int | None]:
    """A result's name without its fold (e.g. 'npt/breast_cancer/knn'), and its fold."""
    fold = record.get("fold")
    fold = int(fold) if isinstance(fold, (int, np.integer)) else None
    if "experiment" in record:
        parts = ["analysis", record.get("experiment"), record.get("dataset"), record.get("model")]
    else:
        parts = [record.get("paper"), record.get("dataset"), record.get("model")]
    return "/".join(str(p) for p in parts if p is not None), fold


def _fold_ranges(folds: Iterable[int]) -> str:
    """0, 1, 2, 3, 5 -> '0–3, 5'."""
    spans: list[list[int]] = []
    for fold in sorted(folds):
        if spans and fold == spans[-1][1] + 1:
            spans[-1][1] = fold
        else:
            spans.append([fold, fold])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


# ---------------------------------------------------------------------------- browser
def find_chromium() -> str | None:
    """Path of a Chromium-family browser on PATH (or $TABREPRO_CHROMIUM), or None."""
    explicit = os.environ.get("TABREPRO_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else shutil.which(explicit)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(
    page: Path, png: Path, *, width: int = 1280, height: int = 2400, timeout: float = 120.0, browser: str | None = None
) -> Path:
    """Render an HTML file with headless Chromium into a PNG (raises BrowserError on failure)."""
    browser = browser or find_chromium()
    if browser is None:
        raise BrowserError("no Chromium found on PATH (install Debian's `chromium` package)")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tabrepro-chromium-") as profile:
        command = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--no-first-run",
            "--no-default-browser-check",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            Path(page).resolve().as_uri(),
        ]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BrowserError(f"{browser} did not finish within {timeout:.0f} s") from None
    if not png.is_file() or png.stat().st_size == 0:
        raise BrowserError(f"{browser} wrote no screenshot (exit {run.returncode}): {run.stderr[-2000:]}")
    return png
