"""One static HTML page (plus its PNGs) that shows every result of a profile's run.

Sections, one module each: first the reproduction scorecard (scorecard.py: the papers' claims, a
forest plot per table, every table cell judged); per paper (papers.py) its tables with the
paper's number beside ours and the difference in SE units, per-dataset bar charts and a
paper-vs-ours scatter, then mean ranks, a Friedman test and a critical-difference diagram
(ranks.py) and the compute cost per model and dataset (cost.py); NPT's analysis experiments
(analysis.py); BiSHop's feature-sparsity curves (sparsity.py); provenance (provenance.py:
commits, package versions, profile, and which results ran on which CPU type / ISA level / GPU,
warning when they differ). page.py holds the building blocks they share.

Inputs are only files the workflow wrote (results/<paper>/.../metrics.json,
results/tables/<paper>/<table>.csv, results/analysis/**/result.json and their PNGs), so the page
can be rebuilt at any time without rerunning anything. Results of datasets or models outside
the active profile, and analysis results written under another profile, are left out.

The page is built in a temporary sibling directory and swapped in at the end, so a reader never
sees half a report. `screenshot` (browser.py) renders it with headless Chromium (used by the tests).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from tabrepro.layout import REPORT_INDEX_FILE
from tabrepro.reporting.html.analysis import analysis_sections
from tabrepro.reporting.html.browser import BrowserError, find_chromium, screenshot
from tabrepro.reporting.html.page import Page, ReportError, esc, se_units
from tabrepro.reporting.html.papers import paper_sections
from tabrepro.reporting.html.provenance import provenance_section
from tabrepro.reporting.html.scorecard import scorecard_section
from tabrepro.reporting.html.sparsity import sparsity_section

__all__ = ["ReportError", "build_report", "se_units", "find_chromium", "screenshot", "BrowserError", "INDEX"]

INDEX = REPORT_INDEX_FILE


def build_report(params: Any, out_dir: Path) -> Path:
    """Write `out_dir/index.html` and its PNGs from the results tree; returns the index path."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp-"))
    try:
        page = Page(staging)
        provenance_records: list[dict[str, Any]] = []
        scorecard_section(page, params)
        for paper in params.papers:
            if not params.selected_datasets(paper):
                continue
            provenance_records += paper_sections(page, params, paper)
        provenance_records += analysis_sections(page, params)
        sparsity_section(page, params)
        provenance_section(page, params, provenance_records)
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


def _write_index(page: Page, params: Any) -> None:
    template = resources.files("tabrepro.reporting").joinpath("templates", "report.html").read_text("utf-8")
    nav = "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in page.nav)
    profile = params.profile_name
    subtitle = (
        f"Profile {profile!r}: {params.profile.get('description', '')} "
        f"— built by `tabrepro report` from {params.results_dir}/"
    )
    text = Template(template).substitute(
        title=esc("tabrepro: reproduction report"), subtitle=esc(subtitle), nav=nav, body="\n".join(page.blocks)
    )
    (page.out_dir / INDEX).write_text(text, encoding="utf-8")
