"""Small PyTorch helpers shared by the deep models' training loops and benchmarks (NPT, BiSHop).

Kept free of model code so that any trainer can import them: device choice, determinism,
autocast, atomic checkpoint files and the checks before resuming from one, weights-only files,
and the FLOP / timing / memory plumbing of the `bench` modules. `atomic_save` and
`resolve_device` are also importable from tabrepro.npt.trainer, their first home.

Importing this module imports torch.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import math
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch
from torch import Tensor

if TYPE_CHECKING:
    from torch.utils.flop_counter import FlopCounterMode

_T = TypeVar("_T")

__all__ = [
    "to_cpu",
    "to_device",
    "clone_state",
    "deterministic_algorithms",
    "tensor_digest",
    "retain_freed_memory",
    "resolve_device",
    "bf16_autocast",
    "atomic_save",
    "read_checkpoint",
    "StateFileMixin",
    "load_weights_into",
    "flop_counter",
    "synchronize",
    "PeakMemory",
    "run_in_subprocess",
]


def resolve_device(name: str) -> torch.device:
    """ "auto" picks CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but CUDA is not available")
    return torch.device(name)


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
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    if enabled:
        torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


def bf16_autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    """bfloat16 autocast on `device` when `enabled` (the configs' `bf16_autocast`), else a no-op."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


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


def retain_freed_memory(trim_threshold: int = 1 << 30, mmap_threshold: int = 64 << 20, top_pad: int = 64 << 20) -> bool:
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


# ------------------------------------------------------------------ checkpoint files
def atomic_save(obj: Any, path: Path) -> None:
    """torch.save to a temp file in the same directory, fsync, then os.replace onto `path`.

    A kill mid-write leaves the previous file intact, which is what resuming relies on.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_checkpoint(
    path: Path, checkpoint_format: int, config: Any, neutral_fields: frozenset[str]
) -> dict[str, Any] | None:
    """The state dict saved at `path` (on CPU), or None if there is no such file.

    Refuses (ValueError) a file of another format or one written under a config that differs
    from `config` in any field outside `neutral_fields`; `config` is a dataclass config with
    `to_dict` / `from_dict` (NPTConfig, BiSHopConfig). Checks of the data are the caller's.
    """
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("format") != checkpoint_format:
        raise ValueError(f"{path}: unknown checkpoint format {state.get('format')!r}")
    config_cls = type(config)

    def comparable(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in config_cls.from_dict(values).to_dict().items() if k not in neutral_fields}

    if comparable(state["config"]) != comparable(config.to_dict()):
        raise ValueError(f"{path} was written with a different {config_cls.__name__}; refusing to resume")
    return state


class StateFileMixin:
    """A trainer's state file (NPTTrainer, BiSHopTrainer): `checkpoint_dir / state_file`,
    written atomically from `state_dict()` and read back through `read_checkpoint`'s checks.
    What the state holds, and restoring it, stay with each trainer."""

    state_file: ClassVar[str]
    checkpoint_format: ClassVar[int]
    resume_neutral_fields: ClassVar[frozenset[str]]
    checkpoint_dir: Path | None
    config: Any

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def save_checkpoint(self) -> Path:
        """Write `state_dict()` (tensors on CPU) to the state file; returns its path."""
        assert self.checkpoint_dir is not None
        path = self.checkpoint_dir / self.state_file
        atomic_save(to_cpu(self.state_dict()), path)
        return path

    def _read_state_file(self) -> tuple[Path, dict[str, Any] | None]:
        """The state file's path and its checked contents (None while there is no file)."""
        assert self.checkpoint_dir is not None
        path = self.checkpoint_dir / self.state_file
        return path, read_checkpoint(path, self.checkpoint_format, self.config, self.resume_neutral_fields)


def load_weights_into(model: torch.nn.Module, path: str | Path, device: torch.device) -> None:
    """Load a weights-only file (a state dict) into `model` on `device`; leaves it in eval mode."""
    weights = torch.load(Path(path), map_location=device, weights_only=True)
    model.load_state_dict(weights)
    model.eval()


# ------------------------------------------------------------------ benchmarks
def _linear_pointwise_flops(x_shape: Any, w_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return 2 * math.prod(out_shape) * int(w_shape[-1])


def flop_counter() -> FlopCounterMode:
    """FlopCounterMode that also counts the oneDNN linear op the models use on CPU.

    FlopCounterMode knows aten's matrix products only; without the extra entry every oneDNN
    GEMM (tabrepro.npt.model.Linear) would count as zero FLOPs.
    """
    from torch.utils.flop_counter import FlopCounterMode  # benchmarks only; keeps trainers lean

    mapping = {}
    if hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        mapping[torch.ops.mkldnn._linear_pointwise] = _linear_pointwise_flops
    return FlopCounterMode(display=False, custom_mapping=mapping)


def synchronize(device: torch.device) -> None:
    """Wait for queued CUDA work (a no-op on CPU), so that a timer measures finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_rss_kib() -> int:
    import resource  # Unix only, as are the benchmarks; the trainers never get here

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class PeakMemory:
    """Peak memory of one benchmark case: the CUDA allocator's peak, or on CPU the growth of
    the process's peak resident set since this object was made (create it before the model)."""

    def __init__(self) -> None:
        self._rss_before_kib = _peak_rss_kib()

    @staticmethod
    def reset_device_peak(device: torch.device) -> None:
        """Start the CUDA peak from here (after setup, so that it covers the steps)."""
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def measure(self, device: torch.device) -> tuple[int, str]:
        """(peak bytes, what the figure is)."""
        if device.type == "cuda":
            return torch.cuda.max_memory_allocated(device), "CUDA allocator peak"
        return (_peak_rss_kib() - self._rss_before_kib) * 1024, "peak RSS growth"


def run_in_subprocess(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """function(*args, **kwargs) in a fresh spawned process (a benchmark case whose peak memory
    and thread settings must not leak into the next case); `function` must be importable."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(function, args, kwargs)
