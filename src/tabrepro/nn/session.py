"""Where and how a PyTorch model runs: device, thread count, seeded RNG, determinism, autocast and
the allocator setting of the CPU training loops.

Each of these is process-wide state in PyTorch; the context managers here set it for one fit and
put the caller's setting back afterwards, so that fitting one model never changes what the next
one computes or draws.

torch is imported when a function needs it, so that `resolve_threads` (the model interface's
check of `n_jobs`, tabrepro.models.base) costs no torch import.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import operator
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "resolve_device",
    "resolve_threads",
    "torch_threads",
    "torch_session",
    "deterministic_algorithms",
    "bf16_autocast",
    "retain_freed_memory",
]


def resolve_device(name: str) -> torch.device:
    """ "auto" picks CUDA when available, else CPU."""
    import torch  # deferred: loads torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but CUDA is not available")
    return torch.device(name)


def resolve_threads(n_jobs: int) -> int:
    """The thread count `n_jobs` stands for: -1 means every core; else a positive count."""
    try:
        count = operator.index(n_jobs)  # any integer (numpy's too), not a float
    except TypeError:
        count = 0
    if count < 1 and count != -1:
        raise ValueError(f"n_jobs must be a positive integer or -1, got {n_jobs!r}")
    return (os.cpu_count() or 1) if count == -1 else count


@contextlib.contextmanager
def torch_threads(n_jobs: int) -> Iterator[None]:
    """`n_jobs` intra-op threads (-1: every core) for the duration; the previous count after."""
    import torch  # deferred: loads torch

    previous = torch.get_num_threads()
    torch.set_num_threads(resolve_threads(n_jobs))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def torch_session(seed: int | None, n_jobs: int) -> Iterator[torch.device]:
    """CUDA when present (else CPU), `n_jobs` intra-op threads (-1: every core), and a private
    seeded RNG.

    The caller's global torch RNG state (CPU and the current CUDA device) and thread count are
    restored on exit, so fitting one model never changes what the next one draws.
    """
    import torch  # deferred: loads torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    devices = [torch.cuda.current_device()] if device.type == "cuda" else []
    rng = torch.random.fork_rng(devices=devices) if seed is not None else contextlib.nullcontext()
    with rng:
        if seed is not None:
            torch.manual_seed(seed)
        with torch_threads(n_jobs):
            yield device


@contextlib.contextmanager
def deterministic_algorithms(enabled: bool, device: torch.device) -> Iterator[None]:
    """torch.use_deterministic_algorithms for the duration, restoring the previous setting.

    On CUDA only a warning is raised for non-deterministic kernels: strict mode would also need
    CUBLAS_WORKSPACE_CONFIG set before CUDA initialises, which is not ours to do.
    """
    import torch  # deferred: loads torch

    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    if enabled:
        torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


def bf16_autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    """bfloat16 autocast on `device` when `enabled` (the configs' `bf16_autocast`), else a no-op."""
    import torch  # deferred: loads torch

    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


_M_TRIM_THRESHOLD = -1  # glibc mallopt parameters (malloc.h)
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
# glibc's own variables for these settings: when the user sets any of them, theirs win.
_USER_MALLOC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
_malloc_tuned = False


def retain_freed_memory(trim_threshold: int = 1 << 30, mmap_threshold: int = 64 << 20, top_pad: int = 64 << 20) -> bool:
    """Stop glibc from handing freed memory back to the OS after every training step.

    A CPU training step frees and re-allocates hundreds of MB of activations. With glibc's
    default (dynamic) thresholds the heap top is trimmed and re-grown every step: BiSHop's step
    took ~62,000 minor page faults (~250 MB of freshly zeroed pages), ~20 % of the step time;
    NPT's quick breast-cancer job 2.6-4.2 M page faults and 5-8 s of kernel time in 58 s (0.16 M
    and 50 s with the heap kept; `tabrepro` applies this in every command but its one-pass table
    commands, `cli.TABLE_COMMANDS`). Process-wide and permanent, changes no result; the process
    keeps up to its trim threshold plus top pad of freed memory. Returns True if the setting was
    applied (Linux/glibc), False elsewhere or when the user set glibc's own `MALLOC_*_` variables.
    Idempotent.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return True
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _USER_MALLOC_VARIABLES):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = all(
        mallopt(param, min(value, 2**31 - 1)) == 1
        for param, value in (
            (_M_MMAP_THRESHOLD, mmap_threshold),
            (_M_TRIM_THRESHOLD, trim_threshold),
            (_M_TOP_PAD, top_pad),
        )
    )
    _malloc_tuned = ok
    return ok
