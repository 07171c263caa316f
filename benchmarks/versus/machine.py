"""The machine a comparison ran on: is it quiet enough, what can it do, what is it.

A speed ratio measured on a busy machine says little (both sides wait for cores, by different
amounts), so `check_load` refuses to time when the 1-minute load average is above a fraction of
the cores unless forced, and a forced run carries a loud warning into the printed table and the
JSON. `matmul_peak` measures the fp32 matrix-product rate the achieved GFLOP/s figures are judged
against, at the thread count both sides run with (on a GPU: the fp32 cuBLAS rate).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

from tabrepro.errors import InputError

__all__ = [
    "MachineBusy",
    "available_cores",
    "load_average",
    "check_load",
    "matmul_peak",
    "machine_info",
]

# Environment variables that hold the libraries below the CPU's ISA (e.g. AVX2 on an AVX-512
# machine); recorded with every run, since they change what the same machine measures.
ISA_LIMITS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")

DEFAULT_MAX_LOAD = 0.5  # refuse above this many runnable processes per core (1-minute average)


class MachineBusy(InputError):
    """The load average says other work is running: timings would not be trustworthy."""


def available_cores() -> int:
    """Cores this process may run on (a cgroup or Slurm CPU set narrows it below os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def check_load(max_load: float = DEFAULT_MAX_LOAD, force: bool = False, cores: int | None = None) -> str | None:
    """None on a quiet machine; the warning text when it is busy and `force` is set.

    Raises MachineBusy when the 1-minute load average exceeds `max_load` x cores and `force`
    is not set. An unknown load average passes (with a warning only when forced).
    """
    cores = cores or available_cores()
    load = load_average()
    limit = max_load * cores
    if load is None:
        return "WARNING: no load average on this platform: whether the machine was quiet is unknown" if force else None
    if load <= limit:
        return None
    what = f"1-minute load average {load:.2f} > {max_load:g} x {cores} cores = {limit:.2f}"
    if not force:
        raise MachineBusy(f"machine busy: {what}; rerun on a quiet machine, or pass --force to time anyway")
    return f"WARNING: TIMED ON A BUSY MACHINE ({what}, --force): these timings are not trustworthy"


def _onednn_matmul_t() -> Any:
    """oneDNN's fp32 GEMM (x @ w.T) where this torch has it, else None."""
    import torch

    op = getattr(torch.ops.mkldnn, "_linear_pointwise", None) if torch.backends.mkldnn.is_available() else None
    if op is None:
        return None
    return lambda a, b: op(a, b, None, "none", [], "")


def matmul_peak(
    sizes: Sequence[int] = (2048, 4096), threads: int | None = None, repeats: int = 3, device: str = "cpu"
) -> dict[str, Any]:
    """Best-of-`repeats` fp32 GFLOP/s of n x n products on `threads` torch threads, per size,
    through torch.mm (MKL/OpenBLAS) and through oneDNN (the GEMM our models use on CPU), and the
    highest of all as the machine's peak. On "cuda": torch.mm on the GPU (cuBLAS) with torch's
    TF32 setting as found (off unless something turned it on: recorded), and the GPU named."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    if device == "cuda":
        return _cuda_matmul_peak(sizes, max(repeats, 10))
    generator = torch.Generator().manual_seed(0)
    kernels: dict[str, Any] = {"torch.mm": lambda a, b: torch.mm(a, b)}
    onednn = _onednn_matmul_t()
    if onednn is not None:
        kernels["onednn"] = onednn
    figures: dict[str, dict[str, float]] = {}
    for n in sizes:
        a = torch.randn((n, n), generator=generator)
        b = torch.randn((n, n), generator=generator)
        for name, kernel in kernels.items():
            kernel(a, b)  # warm-up: thread pool, packing buffers
            best = float("inf")
            for _ in range(max(1, repeats)):
                start = time.perf_counter()
                kernel(a, b)
                best = min(best, time.perf_counter() - start)
            figures.setdefault(name, {})[str(n)] = 2.0 * n**3 / best / 1e9
    peak = max(value for per_size in figures.values() for value in per_size.values())
    return {"threads": torch.get_num_threads(), "gflops": figures, "peak_gflops": peak}


def _cuda_matmul_peak(sizes: Sequence[int], repeats: int) -> dict[str, Any]:
    """fp32 torch.mm rate on the current CUDA device: the best of `repeats` products per size,
    each timed between device synchronisations after a warm-up (cuBLAS handle, heuristics)."""
    import torch

    from tabrepro.provenance import gpu_info

    generator = torch.Generator(device="cuda").manual_seed(0)
    figures: dict[str, float] = {}
    for n in sizes:
        a = torch.randn((n, n), device="cuda", generator=generator)
        b = torch.randn((n, n), device="cuda", generator=generator)
        torch.mm(a, b)
        best = float("inf")
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            torch.mm(a, b)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        figures[str(n)] = 2.0 * n**3 / best / 1e9
    return {
        "threads": torch.get_num_threads(),
        "device": "cuda",
        "gflops": {"torch.mm (cuBLAS)": figures},
        "peak_gflops": max(figures.values()),
        "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "gpu": gpu_info(),
    }


def machine_info(threads: int) -> dict[str, Any]:
    """CPU model and ISA level, cores, torch version and CPU capability, the libraries' ISA limits
    set in the environment, threads, load, commit."""
    import torch

    from tabrepro.provenance import cpu_info, git_commit

    cpu = cpu_info()
    return {
        "cpu_model": cpu.get("model"),
        "cpu_family_model": cpu.get("family_model"),
        "isa_level": cpu.get("isa_level"),
        "isa_flags": list(cpu.get("flags") or []),
        "logical_cores": cpu.get("logical_cores"),
        "available_cores": available_cores(),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "isa_limits": {name: os.environ[name] for name in ISA_LIMITS if os.environ.get(name)},
        "threads": threads,
        "load_average_1min": load_average(),
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
