"""Library warnings reach the job's log once each: never silenced, never repeated per round.

XGBoost and LightGBM report an ignored or unknown parameter only as a warning, and the wrappers
used to set their verbosity so low that nothing was printed: a misspelt key then vanished
without a word. They now run at warning level, and every warning raised while they fit is
passed to the `tabrepro.models.library` logger (stderr, i.e. the workflow rule's log file) the
first time its text appears in the process. Repeats, one per configuration or per boosting round
(LightGBM's "No further splits with positive gain" on small data), are counted, not printed.

CatBoost stays at `logging_level="Silent"`: it has no warnings-only level, and the conflicting
options we know of raise a CatBoostError instead of being ignored.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections import Counter
from collections.abc import Iterator

__all__ = ["report", "relayed_warnings", "lightgbm_logging", "repeats"]

log = logging.getLogger("tabrepro.models.library")
_seen: Counter[str] = Counter()
# XGBoost prefixes its messages with a clock time and a source location, which would make every
# repeat look new: "[19:28:10] WARNING: /workspace/src/learner.cc:782: ...".
_NOISE = re.compile(r"\[\d{2}:\d{2}:\d{2}\]\s*|\S+\.(?:cc|cpp|h|cu):\d+:\s*")


def _normalise(message: str) -> str:
    return " ".join(_NOISE.sub("", message).split())


def report(library: str, message: str) -> None:
    """Log a library's warning unless the same text was logged before in this process."""
    text = _normalise(message)
    if not text:
        return
    _seen[f"{library}: {text}"] += 1
    if _seen[f"{library}: {text}"] == 1:
        log.warning("%s: %s (logged once; repeats are not shown)", library, text)


def repeats() -> dict[str, int]:
    """How often each logged warning was raised so far (for tests and summaries)."""
    return dict(_seen)


@contextlib.contextmanager
def relayed_warnings(library: str) -> Iterator[None]:
    """Catch every Python warning raised inside (XGBoost turns its native warnings into
    UserWarnings) and log each new text once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        report(library, str(warning.message))


class _LightGBMLogger:
    """What lightgbm.register_logger expects: native messages come through `info`."""

    def info(self, message: str) -> None:
        report("lightgbm", message)

    def warning(self, message: str) -> None:
        report("lightgbm", message)


@contextlib.contextmanager
def lightgbm_logging() -> Iterator[None]:
    """LightGBM's native and Python-side messages through `report` while fitting.

    LightGBM has one process-wide logger; ours stays registered afterwards (a job process only
    ever wants this one).
    """
    import lightgbm  # deferred: loads lightgbm

    lightgbm.register_logger(_LightGBMLogger())
    with relayed_warnings("lightgbm"):
        yield
