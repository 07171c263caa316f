"""Generated blocks in Markdown pages: figures that are records of runs are never typed by hand.

A block sits between a begin and an end marker line (HTML comments, invisible on GitHub); the
module that owns the figures renders the block, whole, from committed run outputs, and
`replace_block` puts it in place, or with `check` only says whether the page already holds it
(tests use that to fail on a stale record). Used by `tabrepro record` (the reproduction records:
README.md's summary, docs/results/records.md), `python -m tabrepro.plan --readme` (the compute
plan) and the benchmarks' record modules (`python -m benchmarks.versus.record` and the like, whose
pages are under docs/results/).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabrepro.errors import InputError
from tabrepro.io import atomic_write

__all__ = ["ReadmeBlockError", "replace_block", "sections_block", "RunsBlock"]


class ReadmeBlockError(InputError):
    """The README lacks the block's markers, or holds them more than once."""


def replace_block(readme: Path, block: str, begin: str, end: str, *, check: bool = False) -> bool:
    """Put `block` (which starts with `begin` and ends with `end`) in place of the README's block.

    Returns whether the README holds `block` afterwards: with `check`, nothing is written and
    False means the README's block is stale.
    """
    readme = Path(readme)
    text = readme.read_text(encoding="utf-8")
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ReadmeBlockError(f"{readme}: needs exactly one `{begin}` ... `{end}` block")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    fresh = head + block + tail
    if fresh == text:
        return True
    if check:
        return False
    atomic_write(readme, fresh)
    return True


def sections_block(
    begin: str, end: str, paths: Sequence[Path], root: Path, section: Callable[[Path, dict[str, Any], str], list[str]]
) -> str:
    """A block of one section per run file, in order: `section(path, run, path shown relative to
    root)` gives its lines (a blank line goes before each)."""
    lines = [begin]
    for path in paths:
        run = json.loads(Path(path).read_text(encoding="utf-8"))
        shown = Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
        lines += ["", *section(Path(path), run, shown)]
    lines.append(end)
    return "\n".join(lines)


@dataclass(frozen=True)
class RunsBlock:
    """A page's block rendered whole from committed run files (JSON), and its command line:
    RUN files (default: `runs_glob` under the working directory, the repository root), --page
    (default `page`), --check (exit 1 when stale). Bad input (a missing or malformed run file, a
    page without the markers) is one line and exit 2."""

    begin: str
    end: str
    render: Callable[[Sequence[Path], Path], str]  # (run files, the folder they are shown from) -> the block
    prog: str
    description: str
    runs_help: str
    what: str  # "the {what} block is stale"
    page: Path  # the generated page, relative to the repository root
    runs_glob: str  # the committed run files, relative to the repository root

    def default_runs(self, root: Path = Path(".")) -> list[Path]:
        """The committed run files under `root`, in name order (the order the block shows)."""
        return sorted(Path(root).glob(self.runs_glob))

    def update_page(self, page: Path, paths: Sequence[Path], *, check: bool = False) -> bool:
        """Rewrite the page's block; with check, only say whether it is current. Run files are
        shown relative to the repository root when `page` is the configured page, else to its folder."""
        page = Path(page).resolve()
        levels = len(self.page.parts)
        root = page.parents[levels - 1] if page.parts[-levels:] == self.page.parts else page.parent
        return replace_block(page, self.render(paths, root), self.begin, self.end, check=check)

    def main(self, argv: Sequence[str] | None = None) -> int:
        parser = argparse.ArgumentParser(prog=self.prog, description=self.description)
        parser.add_argument(
            "runs", nargs="*", type=Path, help=f"{self.runs_help} (default: {self.runs_glob}, in name order)"
        )
        parser.add_argument("--page", type=Path, default=self.page, help="page to update (default %(default)s)")
        parser.add_argument("--check", action="store_true", help="exit 1 when the block is stale; change nothing")
        args = parser.parse_args(argv)
        runs = args.runs or self.default_runs()
        try:
            if not runs:
                raise InputError(f"no run files given and none match {self.runs_glob}")
            current = self.update_page(args.page, runs, check=args.check)
        except (InputError, OSError, KeyError, json.JSONDecodeError) as error:
            print(f"{self.prog}: error: {type(error).__name__}: {error}", file=sys.stderr)
            return 2
        if args.check and not current:
            print(f"{args.page}: the {self.what} block is stale; rerun without --check", file=sys.stderr)
            return 1
        return 0
