"""The report's first section: the reproduction scorecard (claims, forest plots, counts, cells)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tabrepro.figures import forest_plot
from tabrepro.reporting import scorecard_markdown as scm
from tabrepro.reporting.claims import CLAIM_HEADER, CLAIMS_HEADING, claim_rows, judge_claims
from tabrepro.reporting.html.page import Page, ReportError, esc, slug, table_html
from tabrepro.reporting.scorecard import build_scorecard, summary
from tabrepro.reporting.tables import ResultsError
from tabrepro.reporting.verdicts import NOT_RUN


def scorecard_section(page: Page, params: Any) -> None:
    """The scorecard first: the papers' claims, a forest plot per table, the counts, then the judged
    cells (collapsed) and one line per reason for the cells that did not run. Built in memory from
    the same results as the tables, so it can never disagree with them; results/scorecard/summary.json
    is only checked for being current."""
    try:
        card = build_scorecard(params)
    except ResultsError as error:
        raise ReportError(str(error)) from None
    page.section("scorecard", "Reproduction scorecard")
    if not card.papers:
        page.empty("The profile selects no dataset of any paper: nothing to judge.")
        return
    page.add(f'<h3 id="scorecard-claims">{esc(CLAIMS_HEADING)}</h3>')
    page.add(table_html(CLAIM_HEADER, claim_rows(judge_claims(params, card)), len(CLAIM_HEADER)))
    for (paper, table), title in card.titles.items():
        mine = [c for c in card.cells if c.paper == paper and c.table == table and c.ci_low is not None]
        if mine:
            name = f"forest-{slug(paper, table)}.png"
            forest_plot(mine, page.out_dir / name, f"{paper} {table}: {title}")
            page.figure(name, f"{paper} {table}: Δ per cell in units of δ, 95 % CI, coloured by verdict")
    page.note(" ".join(scm.rule_text(card)[0].replace("**", "").split()))
    page.note(_scorecard_file_state(params, summary(card)))
    page.add(table_html(["Paper", "Table", "numbers", *scm.TALLY_VERDICTS, "cells"], scm.count_rows(card), 3))
    for paper, items in card.unobtainable.items():
        for dataset, problem in items.items():
            page.add(f'<p class="warning">{esc(paper)}/{esc(dataset)}: data not obtainable: {esc(problem)}</p>')
    judged = [c for c in card.cells if c.verdict_class != NOT_RUN]
    page.add(f'<h3 id="scorecard-judged">Judged cells ({len(judged)})</h3>')
    page.add(_scorecard_table(judged) if judged else '<p class="empty">None.</p>')
    idle = [c for c in card.cells if c.verdict_class == NOT_RUN]
    page.add(f"<details><summary>Not run ({len(idle)} cells), by reason</summary>")
    page.add("<ul>" + "".join(f"<li>{esc(line[2:])}</li>" for line in scm.not_run_lines(idle)) + "</ul></details>")


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


def _scorecard_table(cells: Sequence[Any]) -> str:
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
    return table_html(
        ["Paper", "Table", "Column", "Method", "Ours (± SE)", "n", "Paper", "δ", "Δ [95 % CI]", "Verdict", "Notes"],
        rows,
        text_columns=4,
        classes=classes,
    )
