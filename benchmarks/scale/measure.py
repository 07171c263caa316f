"""Run one command as a child process and measure its wall time and peak memory.

Each benchmark stage runs in its own process so that its peak memory is its own: the peak
resident set size comes from `os.wait4` on that child (the kernel's ru_maxrss of the child and
the descendants it waited for), and a sampler also sums the resident memory of the whole process
tree every half second from /proc, which catches worker processes the child never waits for.
A stage that runs past its time limit is stopped (its process group, which only it and its
descendants are in) and reported as timed out, with the memory it had reached. While it runs, an
optional callback hears its wall time and tree peak so far every `progress_interval_s`, so that a
caller killed with it (a session's end) has already written down what the stage had reached.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Progress", "StageResult", "run_measured", "tree_rss_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class StageResult:
    command: tuple[str, ...]
    status: str  # "ok", "failed" (non-zero exit) or "timeout"
    returncode: int | None
    wall_s: float
    peak_rss_mb: float  # ru_maxrss of the child (KiB on Linux) in MiB
    tree_peak_rss_mb: float  # largest sampled sum over the child's process tree, MiB
    output_tail: str  # the last lines of stdout+stderr


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _rss_bytes(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return 0
    return int(fields[1]) * _PAGE


def tree_rss_bytes(pid: int) -> int:
    """Resident bytes of a process and all its descendants now (0 when it is gone)."""
    total, stack, seen = 0, [pid], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        total += _rss_bytes(current)
        stack.extend(_children(current))
    return total


Progress = Callable[[float, float], None]  # (wall seconds so far, tree peak MiB so far)


class _Sampler(threading.Thread):
    def __init__(
        self, pid: int, interval: float, on_progress: Progress | None = None, progress_interval: float = 60.0
    ) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0
        self.on_progress, self.progress_interval = on_progress, progress_interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        started = last_report = time.perf_counter()
        while not self._stop_event.is_set():
            self.peak = max(self.peak, tree_rss_bytes(self.pid))
            now = time.perf_counter()
            if self.on_progress is not None and now - last_report >= self.progress_interval:
                last_report = now
                self.on_progress(round(now - started, 2), round(self.peak / 2**20, 1))
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_measured(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float | None = None,
    log_path: Path,
    sample_interval_s: float = 0.5,
    on_progress: Progress | None = None,
    progress_interval_s: float = 60.0,
) -> StageResult:
    """Run `command` to completion (or its time limit); stdout and stderr go to `log_path`.

    `on_progress`, when given, is called from the sampling thread every `progress_interval_s`
    with the wall time and the process tree's peak so far (MiB).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
        sampler = _Sampler(process.pid, sample_interval_s, on_progress, progress_interval_s)
        sampler.start()
        timed_out = threading.Event()

        def stop() -> None:
            timed_out.set()
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the stage's own session: it and its workers
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, stop) if timeout_s else None
        if timer is not None:
            timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): leave no stage running behind us
            stop()
            os.wait4(process.pid, 0)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            sampler.stop()
        process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    code = process.returncode
    state = "timeout" if timed_out.is_set() else ("ok" if code == 0 else "failed")
    return StageResult(
        tuple(command),
        state,
        code,
        round(wall, 2),
        round(usage.ru_maxrss / 1024.0, 1),
        round(sampler.peak / 2**20, 1),
        _tail(log_path),
    )
