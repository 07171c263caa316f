"""Small PyTorch helpers shared by the deep models' training loops (NPT, BiSHop).

Kept free of model code so that any trainer can import them. NPT's trainer uses `to_cpu` and
`to_device`; `atomic_save`, `resolve_device` and `NPTTrainer._determinism` still live in
tabrepro.npt.trainer and could move here too.

Importing this module imports torch.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

__all__ = ["to_cpu", "to_device", "clone_state", "deterministic_algorithms", "tensor_digest",
           "retain_freed_memory"]


def to_cpu(value: Any) -> Any:
    """Detached CPU copies of every tensor in a nest of dicts, lists and tuples (for saving)."""
    if isinstance(value, Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def to_device(value: Any, device: torch.device) -> Any:
    """Every tensor of a nest of dicts and lists moved to `device` (after loading)."""
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    return value


def clone_state(module: torch.nn.Module) -> dict[str, Tensor]:
    """A detached copy of a module's state dict (a snapshot that later steps do not modify)."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@contextlib.contextmanager
def deterministic_algorithms(enabled: bool, device: torch.device) -> Iterator[None]:
    """torch.use_deterministic_algorithms for the duration, restoring the previous setting.

    On CUDA only a warning is raised for non-deterministic kernels: strict mode would also need
    CUBLAS_WORKSPACE_CONFIG set before CUDA initialises, which is not ours to do.
    """
    previous = (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled())
    if enabled:
        torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


def tensor_digest(*tensors: Tensor | None) -> str:
    """SHA-256 over the dtypes, shapes and bytes of the tensors (None counts as a marker)."""
    digest = hashlib.sha256()
    for tensor in tensors:
        if tensor is None:
            digest.update(b"none;")
            continue
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{t.dtype}{tuple(t.shape)};".encode())
        digest.update(t.numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


_M_TRIM_THRESHOLD = -1  # glibc mallopt parameters (malloc.h)
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_malloc_tuned = False


def retain_freed_memory(trim_threshold: int = 1 << 30, mmap_threshold: int = 64 << 20,
                        top_pad: int = 64 << 20) -> bool:
    """Stop glibc from handing freed memory back to the OS after every training step.

    A CPU training step frees and re-allocates hundreds of MB of activations. With glibc's
    default (dynamic) thresholds the heap top is trimmed and re-grown every step: BiSHop's step
    took ~62,000 minor page faults (~250 MB of freshly zeroed pages), ~20 % of the step time.
    Process-wide and permanent, changes no result; the process keeps its peak heap size.
    Returns True if the setting was applied (Linux/glibc), False elsewhere. Idempotent.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = all(mallopt(param, min(value, 2**31 - 1)) == 1
             for param, value in ((_M_MMAP_THRESHOLD, mmap_threshold),
                                  (_M_TRIM_THRESHOLD, trim_threshold), (_M_TOP_PAD, top_pad)))
    _malloc_tuned = ok
    return ok
