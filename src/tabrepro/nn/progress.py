"""Progress lines for long prediction passes.

At the paper's sizes one pass of NPT or BiSHop over every row takes minutes on a GPU and hours
on one CPU thread (BiSHop scores about 30 rows/s there; NPT on Income runs 147 batches of
2,048 rows at ~25 s each). A job log that says nothing for an hour looks hung, so a pass that
runs longer than `EVERY_S` logs how far it is, at most once per `EVERY_S`; short passes (every
pass of the quick profile) log nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["EVERY_S", "logged_batches"]

EVERY_S = 60.0

Batch = TypeVar("Batch")


def logged_batches(
    batches: Sequence[Batch],
    label: str,
    log: logging.Logger,
    *,
    every_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    start: int = 0,
) -> Iterator[Batch]:
    """Yield `batches` in order from index `start` (the ones before were done by an earlier run
    of the pass); every `every_s` seconds (default `EVERY_S`) into the pass, log
    `label: k/n batches` with the elapsed time and a linear estimate of what is left."""
    interval = EVERY_S if every_s is None else every_s
    total = len(batches)
    began = last = clock()
    for done in range(start + 1, total + 1):
        yield batches[done - 1]
        current = clock()
        if current - last >= interval and done < total:
            last = current
            elapsed = current - began
            left = elapsed / (done - start) * (total - done)
            log.info("%s: %d/%d batches, %.0f s elapsed, about %.0f s left", label, done, total, elapsed, left)
