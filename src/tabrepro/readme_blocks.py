"""Generated blocks in the README: figures that are records of runs are never typed by hand.

A block sits between a begin and an end marker line (HTML comments, invisible on GitHub); the
module that owns the figures renders the block, whole, from committed run outputs, and
`replace_block` puts it in place, or with `check` only says whether the README already holds it
(tests use that to fail on a stale record). Used by `tabrepro record` (the reproduction records),
`python -m tabrepro.versus.record` (speed against the authors' code) and
`python -m tabrepro.scale.record` (the full-size stand-ins).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tabrepro.errors import InputError
from tabrepro.io import atomic_write

__all__ = ["ReadmeBlockError", "replace_block", "block_main"]


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


def block_main(
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
    runs_help: str,
    update: Callable[[Path, list[Path], bool], bool],
    what: str,
) -> int:
    """The command line of a block's renderer: RUN files, --readme, --check (exit 1 when stale).

    `update(readme, runs, check)` renders the block from the run files and replaces it. Bad input
    (a missing or malformed run file, a README without the markers) is one line and exit 2.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("runs", nargs="+", type=Path, help=runs_help)
    parser.add_argument("--readme", type=Path, default=Path("README.md"), help="README to update (default %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the block is stale; change nothing")
    args = parser.parse_args(argv)
    try:
        current = update(args.readme, args.runs, args.check)
    except (InputError, OSError, KeyError, json.JSONDecodeError) as error:
        print(f"{prog}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    if args.check and not current:
        print(f"{args.readme}: the {what} block is stale; rerun without --check", file=sys.stderr)
        return 1
    return 0
