"""The scorecard as a page to read (scorecard.md) and as files (scorecard.csv, summary.json).

The page opens with the rules (each margin with its reason), then the counts (the paper's own
runs apart from the numbers it quotes), the systematic shift per table, and every table's judged
cells; cells that did not run are collapsed into one line per reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from scipy import stats

from tabrepro.io import atomic_write
from tabrepro.layout import SCORECARD_CSV_FILE, SCORECARD_FILES, SCORECARD_MARKDOWN_FILE, SCORECARD_SUMMARY_FILE
from tabrepro.reporting.claims import CLAIM_HEADER, CLAIMS_HEADING, ClaimVerdict, claim_rows
from tabrepro.reporting.scorecard import (
    COUNT_GROUPS,
    COUNT_KEYS,
    QUOTED,
    Scorecard,
    ScoreCell,
    cells_frame,
    higher_is_better,
    summary,
)
from tabrepro.reporting.tables import DASH, decimals_for, format_value
from tabrepro.reporting.verdicts import DIFFERS, NOT_RUN, OURS_ONLY

__all__ = [
    "Shift",
    "delta_text",
    "n_text",
    "notes_text",
    "ours_text",
    "render_markdown",
    "rule_text",
    "scorecard_files",
    "shifts",
    "verdict_text",
    "write_scorecard",
]

TALLY_VERDICTS = [v for v in COUNT_KEYS if v != OURS_ONLY]


def ours_text(cell: ScoreCell) -> str:
    """Ours as `mean ± SE` with the mean's decimals, or a dash."""
    if cell.ours_mean is None:
        return DASH
    places = decimals_for(cell.ours_mean, cell.metric)
    mean = format_value(cell.ours_mean, cell.metric, places)
    return mean if cell.ours_se is None else f"{mean} ± {format_value(cell.ours_se, cell.metric, places)}"


def paper_text(cell: ScoreCell) -> str:
    """The paper's number as printed, with its SE where we assigned one."""
    if cell.paper_text is None:
        return DASH
    if cell.paper_se is None or "±" in cell.paper_text:
        return cell.paper_text
    places = decimals_for(cell.paper_value or 0.0, cell.metric)
    return f"{cell.paper_text} (SE {format_value(cell.paper_se, cell.metric, places)})"


def delta_text(cell: ScoreCell) -> str:
    """Δ with its 95 % CI, and the margin it is judged against."""
    if cell.delta is None:
        return DASH
    places = decimals_for(cell.ours_mean if cell.ours_mean is not None else 0.0, cell.metric)
    text = f"{cell.delta:+.{places}f}"
    if cell.ci_low is not None and cell.ci_high is not None:
        text += f" [{cell.ci_low:+.{places}f}, {cell.ci_high:+.{places}f}]"
    return text


def margin_text(cell: ScoreCell) -> str:
    return cell.margin_text or DASH


def verdict_text(cell: ScoreCell) -> str:
    """The verdict with better/worse where it differs."""
    return cell.verdict if cell.better_or_worse is None else f"{cell.verdict}: {cell.better_or_worse}"


def notes_text(cell: ScoreCell) -> str:
    """Where the paper's number comes from, the reason, budget, spreads and notes in one line."""
    source = "quoted" if cell.count_group == QUOTED else "own run" if cell.paper_origin else None
    selected = f"paper selected on {cell.paper_selected_on}" if cell.paper_selected_on else None
    spreads = []
    if cell.ours_se_basis:
        spreads.append(f"our SE: {cell.ours_se_basis}")
    if cell.paper_se_basis:
        spreads.append(f"paper's SE: {cell.paper_se_basis}")
    parts = (source, selected, cell.reason, cell.budget, *spreads, *cell.notes.split("; "))
    return "; ".join(p for p in parts if p) or DASH


def n_text(cell: ScoreCell) -> str:
    if cell.n_expected is None:
        return DASH if cell.n is None else str(cell.n)
    return f"{cell.n or 0}/{cell.n_expected}"


def rule_text(card: Scorecard) -> list[str]:
    """The rules every verdict follows, as tabrepro.reporting.verdicts codes them, and the margins
    with their reasons."""
    rules = card.rules
    eq, ci = f"{100 * (1 - 2 * rules.alpha):g} %", f"{100 * (1 - rules.alpha):g} %"
    lines = [
        f"Δ = ours − paper, judged against a margin δ per metric; Benjamini–Hochberg (FDR {rules.fdr:g}) "
        f"runs within each family: a table's cells of one tally group (own, quoted, capped). "
        f"**reproduced**: the {eq} CI of Δ lies inside ±δ (two one-sided tests at {rules.alpha:g}); "
        f"**differs**: a minimum-effect test (H0: |Δ| ≤ δ) rejects after BH, so the {ci} CI of Δ lies "
        f"wholly outside ±δ (ours higher/lower, better/worse); **shifted**: Δ ≠ 0 after BH, but the "
        f"CI reaches into ±δ (a shift that may be smaller than the margin; never counted as differs); "
        f"**cannot be decided**: the paper's own spread alone makes its {eq} half-width at least δ, so "
        f"no run of ours can show equivalence (the verdict gives the margin it would take); "
        f"**inconclusive**: none of these. Every shifted, undecidable or inconclusive cell says how "
        f"many more runs of our protocol (new split seeds) would decide it with 80 % power, simulated "
        f"with these rules, or that no number would; **not "
        f"comparable**: other data than the paper's; **not run**: with the reason; **ours only**: a "
        f"row the paper does not have (not counted). Each side's SE is the spread two independent "
        f"runs of its protocol would show: SD/√n over folds (shrunk only by a factor a split-seed "
        f"record measured for that model and metric, and never on the paper's side), or for one split "
        f"the sampling SE at the test size evaluated at the two sides' pooled value (closed form for "
        f"accuracy and AUROC; otherwise a bootstrap over the job's saved test predictions), plus the "
        f"seeds' spread where seeds were repeated; a spread over seeds of one split is never used "
        f"alone, and a cell where either side has no spread is not tested. Numbers the paper quotes "
        f"from other papers, and cells we ran below the paper's protocol (**capped**: a smaller search, "
        f"fixed settings), are judged but counted apart; a table that holds the same fits as another "
        f"on another scale (MSE = RMSE²) is shown but counted once, with that table.",
        "",
        "| metric | δ | why |",
        "|---|---|---|",
    ]
    for margin in rules.margins.values():
        width = f"±{margin.value:g} × the paper's value" if margin.relative else f"±{margin.value:g}"
        lines.append(f"| {margin.metric} | {width} | {_md(margin.reason)} |")
    return lines


# --------------------------------------------------------------------------- shifts
class Shift:
    """A systematic shift of one table's judged own-run cells: mean Δ ± SE, and a sign test of
    how often ours sits on the better side."""

    def __init__(self, paper: str, table: str, metric: str, deltas: Sequence[float]):
        self.paper, self.table, self.metric, self.n = paper, table, metric, len(deltas)
        self.mean = sum(deltas) / self.n
        self.se = float(stats.sem(deltas)) if self.n > 1 else None
        direction = higher_is_better(metric)
        better = [d > 0 if direction else d < 0 for d in deltas if d != 0]
        self.better = sum(better)
        self.p_sign = float(stats.binomtest(self.better, len(better)).pvalue) if better else None
        self.ties = self.n - len(better)

    def row(self) -> list[str]:
        se = DASH if self.se is None else f"{self.se:.3g}"
        p = DASH if self.p_sign is None else f"{self.p_sign:.3g}"
        return [
            self.paper,
            self.table,
            self.metric,
            str(self.n),
            f"{self.mean:+.3g}",
            se,
            f"{self.better}/{self.n - self.ties}",
            p,
        ]


def shifts(card: Scorecard) -> list[Shift]:
    """Per paper table and metric, over the own-run cells with both numbers."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for cell in card.cells:
        if cell.delta is not None and cell.count_group == "own" and not cell.metric.startswith("rank"):
            groups.setdefault((cell.paper, cell.table, cell.metric), []).append(cell.delta)
    return [Shift(*key, deltas) for key, deltas in groups.items()]


# --------------------------------------------------------------------------- the page
def _md(text: Any) -> str:
    return str(text).replace("|", r"\|").replace("\n", " ")


def _md_table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(_md(value) for value in row) + " |" for row in rows]
    return lines


def count_rows(card: Scorecard) -> list[list[Any]]:
    rows = []
    for paper, tables in summary(card)["papers"].items():
        for table, tally in tables.items():
            for group in COUNT_GROUPS:
                t = tally[group]
                if not t["cells"]:
                    continue
                differs = f"{t['differs']} ({t['better']} better, {t['worse']} worse)" if t["differs"] else "0"
                verdicts = [differs if v == DIFFERS else t[COUNT_KEYS[v]] for v in TALLY_VERDICTS]
                rows.append([paper, table, group, *verdicts, t["cells"]])
    return rows


def not_run_lines(cells: Sequence[ScoreCell]) -> list[str]:
    """Cells that did not run, one line per reason."""
    by_reason: dict[str, list[str]] = {}
    for cell in cells:
        by_reason.setdefault(cell.reason or "no reason recorded", []).append(f"{cell.column}/{cell.method}")
    return [
        f"- {len(names)} cells: {reason} ({', '.join(names[:8])}{' …' if len(names) > 8 else ''})"
        for reason, names in by_reason.items()
    ]


def render_markdown(card: Scorecard, claims: Sequence[ClaimVerdict] = ()) -> str:
    """The scorecard to read: the claims, rules and counts first, then every table's cells."""
    lines = [f"# Reproduction scorecard — profile `{card.profile}`", ""]
    if claims:
        lines += [f"## {CLAIMS_HEADING}", "", *_md_table(CLAIM_HEADER, claim_rows(claims)), ""]
    lines += ["## How cells are judged", "", *rule_text(card), ""]
    lines += ["Only the datasets the profile selects appear; `tabrepro scorecard` rebuilds this page.", ""]
    lines += ["## Counts", ""]
    lines += _md_table(["Paper", "Table", "numbers", *TALLY_VERDICTS, "cells"], count_rows(card))
    ours_only = sum(1 for c in card.cells if c.verdict_class == OURS_ONLY)
    lines += ["", f"Rows the paper does not have (ours only, not counted): {ours_only}.", ""]
    lines += ["## Shifts", "", "Mean Δ over a table's own-run cells that have both numbers, and a sign test", ""]
    lines += _md_table(
        ["Paper", "Table", "metric", "cells", "mean Δ", "SE", "ours better", "sign test p"],
        (s.row() for s in shifts(card)),
    )
    lines += ["", "## Datasets not obtainable", ""]
    gone = [
        f"- {paper}/{dataset}: {error}"
        for paper, items in card.unobtainable.items()
        for dataset, error in items.items()
    ]
    lines += (gone or ["None."]) + [""]
    header = ["Column", "Method", "Ours", "n", "Paper", "δ", "Δ [95 % CI]", "Verdict", "Source / reason / notes"]
    for paper in card.papers:
        lines += [f"## {paper}", ""]
        for (owner, table), title in card.titles.items():
            if owner != paper:
                continue
            mine = [c for c in card.cells if c.paper == paper and c.table == table]
            lines += [f"### {table}: {title}", ""]
            if not mine:
                lines += ["_No cell: no selected dataset of this table's task types._", ""]
                continue
            judged = [c for c in mine if c.verdict_class != NOT_RUN]
            if judged:
                rows = (
                    [
                        c.column,
                        c.method,
                        ours_text(c),
                        n_text(c),
                        paper_text(c),
                        margin_text(c),
                        delta_text(c),
                        verdict_text(c),
                        notes_text(c),
                    ]
                    for c in judged
                )
                lines += _md_table(header, rows) + [""]
            idle = [c for c in mine if c.verdict_class == NOT_RUN]
            if idle:
                lines += ["Not run:", "", *not_run_lines(idle), ""]
    return "\n".join(lines)


def scorecard_files(card: Scorecard, claims: Sequence[ClaimVerdict] = ()) -> dict[str, bytes]:
    """The bytes of scorecard.md, scorecard.csv and summary.json, by file name."""
    return {
        SCORECARD_MARKDOWN_FILE: render_markdown(card, claims).encode("utf-8"),
        SCORECARD_CSV_FILE: cells_frame(card).to_csv(index=False, lineterminator="\n").encode("utf-8"),
        SCORECARD_SUMMARY_FILE: (json.dumps(summary(card), indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
    }


def write_scorecard(card: Scorecard, out_dir: Path, claims: Sequence[ClaimVerdict] = ()) -> list[Path]:
    """Write scorecard.md, scorecard.csv and summary.json atomically; returns their paths."""
    out_dir = Path(out_dir)
    payloads = scorecard_files(card, claims)
    written = []
    for name in SCORECARD_FILES:
        atomic_write(out_dir / name, payloads[name])
        written.append(out_dir / name)
    return written
