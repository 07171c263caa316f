"""The report page's building blocks: escaping and number formatting, HTML tables, and `Page`,
which collects what every section adds (HTML blocks, navigation entries, figure files)."""

from __future__ import annotations

import html
import math
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabrepro.errors import InputError
from tabrepro.reporting.tables import DASH, format_value

Z_FAR = 2.0  # |difference| above this many SE is highlighted


class ReportError(InputError, ValueError):
    """A result file the report cannot use; the message names it."""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def as_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fmt(value: Any, metric: str = "", decimals: int | None = None) -> str:
    number = as_float(value)
    return DASH if number is None else format_value(number, metric, decimals)


def se_of(spread: Any, kind: Any, n: Any) -> float | None:
    """A spread as a standard error: SE as is, SD / sqrt(n)."""
    spread = as_float(spread)
    if spread is None:
        return None
    if kind == "se":
        return spread
    count = as_float(n)
    if kind == "sd" and count and count > 0:
        return spread / math.sqrt(count)
    return None


def se_units(ours: Any, ours_se: float | None, paper: Any, paper_se: float | None) -> float | None:
    """(ours - paper) / sqrt(SE_ours^2 + SE_paper^2), using whichever SEs exist (None if none)."""
    a, b = as_float(ours), as_float(paper)
    parts = [s for s in (ours_se, paper_se) if s is not None and s > 0]
    if a is None or b is None or not parts:
        return None
    return (a - b) / math.sqrt(sum(s * s for s in parts))


def table_html(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    text_columns: int = 1,
    classes: Iterable[Sequence[str]] | None = None,
) -> str:
    """A plain HTML table; the first `text_columns` columns are left-aligned text."""
    head = "".join(f'<th class="{"text" if i < text_columns else ""}">{esc(h)}</th>' for i, h in enumerate(header))
    body = []
    class_rows = list(classes) if classes is not None else None
    for r, row in enumerate(rows):
        cells = []
        for i, cell in enumerate(row):
            css = ["text"] if i < text_columns else []
            if class_rows is not None and class_rows[r][i]:
                css.append(class_rows[r][i])
            cells.append(f'<td class="{" ".join(css)}">{esc(cell)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


@dataclass
class Page:
    """What the sections contribute: HTML blocks, navigation entries and figure files."""

    out_dir: Path
    blocks: list[str] = field(default_factory=list)
    nav: list[tuple[str, str]] = field(default_factory=list)

    def section(self, anchor: str, title: str) -> None:
        self.nav.append((anchor, title))
        self.blocks.append(f'<h2 id="{esc(anchor)}">{esc(title)}</h2>')

    def add(self, text: str) -> None:
        self.blocks.append(text)

    def note(self, text: str) -> None:
        self.blocks.append(f'<p class="note">{esc(text)}</p>')

    def empty(self, text: str) -> None:
        self.blocks.append(f'<p class="empty">{esc(text)}</p>')

    def figure(self, name: str, caption: str) -> None:
        self.blocks.append(
            f'<figure><img src="{esc(name)}" alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption></figure>'
        )

    def copy_figure(self, source: Path, name: str, caption: str) -> None:
        if source.is_file():
            shutil.copyfile(source, self.out_dir / name)
            self.figure(name, caption)


def slug(*parts: Any) -> str:
    text = "_".join(str(p) for p in parts)
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
