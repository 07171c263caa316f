"""What a result needs to be traced back: code version, package versions, hardware, resources used.

Results are bit-identical only for the same config on the same kind of CPU (BLAS, oneDNN and the
tree libraries dispatch on the instruction set) with the same thread count, and on the same GPU
when one was used, so every result records all of these. What is fixed per machine or per process
(CPU model and flags, package versions, GPU properties) is read once and cached.
"""

from __future__ import annotations

import functools
import os
import platform
import resource
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import tabrepro

# Distribution names (as pip knows them) of every library a model or metric is computed with.
TRACKED_PACKAGES = (
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "torch",
    "xgboost-cpu",
    "xgboost",
    "catboost",
    "lightgbm",
    "pytorch-tabnet",
    "rtdl_revisiting_models",
    "entmax",
)

# CPU flags that change which kernels BLAS/oneDNN/the tree libraries run, in /proc/cpuinfo spelling
# (x86 "flags", aarch64 "Features").
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "fma",
    "avx2",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
)
# Highest level first: the first flag present names the level.
ISA_LEVELS = (
    ("amx_tile", "AMX"),
    ("avx512_bf16", "AVX-512 BF16"),
    ("avx512f", "AVX-512"),
    ("avx2", "AVX2"),
    ("avx", "AVX"),
    ("sve2", "SVE2"),
    ("sve", "SVE"),
    ("asimd", "NEON"),
)
UNRECORDED = "not recorded"


def git_commit(repo: Path | None = None) -> str:
    """HEAD's hash, with '+dirty' when tracked files differ from it. Outside git (a copy of the
    working tree without .git, e.g. on a GPU node): $TABREPRO_DECLARED_COMMIT + '+declared' when
    whoever copied the tree set it, else 'unknown'."""
    cwd = repo or Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        declared = os.environ.get("TABREPRO_DECLARED_COMMIT", "").strip()
        return f"{declared}+declared" if declared else "unknown"
    return head + ("+dirty" if dirty else "")


@functools.cache
def _installed_versions(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Versions of the installed distributions among `names` (cached: a process's packages stay)."""
    found = []
    for name in names:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(found)


def package_versions() -> dict[str, str]:
    """Python, tabrepro and every tracked package that is installed (absent ones are left out)."""
    return {
        "python": sys.version.split()[0],
        "tabrepro": tabrepro.__version__,
        **dict(_installed_versions(TRACKED_PACKAGES)),
    }


def peak_memory_mb() -> float:
    """Peak resident memory of this process (since `reset_peak_memory`, where Linux allows it)
    and of its finished children, in MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    try:  # the high-water mark that `reset_peak_memory` resets (ru_maxrss never goes down)
        status = Path("/proc/self/status").read_text()
        own = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0


def reset_peak_memory() -> None:
    """Start `peak_memory_mb` afresh from the current resident set (Linux; elsewhere a no-op),
    so that each of several jobs run in one process records its own peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """CPU model name, the ISA flags of ISA_FLAGS present and (x86) the CPU family and model
    numbers, from /proc/cpuinfo's text ("AMD EPYC" alone does not say which generation).

    Only the first processor's entry is read: a machine's cores share one model and flag set.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # end of the first processor's block
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    present = set((fields.get("flags") or fields.get("features") or "").split())
    model = fields.get("model name") or fields.get("hardware") or fields.get("cpu model") or ""
    if not model and "cpu implementer" in fields:  # aarch64 names no model: implementer/part ids
        model = f"implementer {fields['cpu implementer']} part {fields.get('cpu part', '?')}"
    flags = [flag for flag in ISA_FLAGS if flag in present]
    info = {"model": model, "flags": flags, "isa_level": isa_level(flags)}
    if "cpu family" in fields and "model" in fields:  # x86: names a generation the model name may not
        info["family_model"] = f"family {fields['cpu family']} model {fields['model']}"
    return info


def isa_level(flags: list[str] | tuple[str, ...]) -> str:
    """The highest instruction-set level among `flags` ('baseline' when none is known)."""
    return next((label for flag, label in ISA_LEVELS if flag in flags), "baseline")


@functools.cache
def cpu_info() -> dict[str, Any]:
    """Model, ISA flags and level, and logical cores of this machine (read once per process)."""
    info: dict[str, Any] = {"model": "", "flags": [], "isa_level": "unknown"}
    try:
        info = parse_cpuinfo(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:  # not Linux: no flags, the model from the platform
        if platform.system() == "Darwin":
            try:
                info["model"] = subprocess.run(
                    ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
                ).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                pass
    info["model"] = info["model"] or platform.processor() or platform.machine() or "unknown"
    info["logical_cores"] = os.cpu_count()
    return info


def thread_pools() -> dict[str, int]:
    """Threads each loaded pool (torch intra-op, BLAS, OpenMP) would use now in this process."""
    pools: dict[str, int] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        pools["torch"] = int(torch.get_num_threads())
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return pools
    for pool in threadpool_info():
        key = f"{pool.get('internal_api', pool.get('user_api'))}"
        pools[key] = max(pools.get(key, 0), int(pool.get("num_threads") or 0))
    return pools


def _available_cores() -> int | None:
    """Cores this process may run on (a Slurm/cgroup CPU set narrows it below logical cores)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def gpu_info() -> dict[str, Any] | None:
    """The CUDA device the job computed on, or None when it did not use one.

    Looks only at a torch the job already imported (never imports it) and names the device only
    when CUDA was initialised, i.e. the job used it: creating a CUDA context just to read a name
    would cost seconds and GPU memory, and a GPU the job did not use does not affect its results.
    """
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "cuda"):
        return None
    try:
        if not torch.cuda.is_available():
            return None
        if not torch.cuda.is_initialized():
            return {"used": False, "device_count": int(torch.cuda.device_count())}
        return {"used": True, **_cuda_device(int(torch.cuda.current_device()))}
    except (RuntimeError, AssertionError):  # a broken driver must not lose a finished result
        return None


@functools.cache
def _cuda_device(index: int) -> dict[str, Any]:
    torch = sys.modules["torch"]
    properties = torch.cuda.get_device_properties(index)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "name": properties.name,
        "capability": f"{properties.major}.{properties.minor}",
        "memory_mb": round(properties.total_memory / 2**20),
        "device_count": int(torch.cuda.device_count()),
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "hip": getattr(torch.version, "hip", None),
    }


def provenance(threads: int | None = None) -> dict[str, Any]:
    """Everything a result's bit-identity depends on besides its config and data.

    `threads` is the thread limit the job's models ran under (its --threads / n_jobs). The models
    apply it only while they fit and predict, so the pools seen here afterwards are the process's
    defaults; without `threads` the record says which of the two it holds ('threads_source').
    """
    pools = thread_pools()
    used: int | None
    if threads is not None:
        used, source = int(threads), "job"
    else:
        used = pools.get("torch") or max(pools.values(), default=None)
        source = "process"
    torch = sys.modules.get("torch")
    capability = None
    if torch is not None and hasattr(torch, "backends") and hasattr(torch.backends, "cpu"):
        capability = torch.backends.cpu.get_cpu_capability()  # the kernels ATen dispatches to
    return {
        "git_commit": git_commit(),
        "packages": package_versions(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": {**cpu_info(), "available_cores": _available_cores(), "torch_capability": capability},
        "threads": used,
        "threads_source": source,
        "thread_pools": pools,
        "gpu": gpu_info(),
    }


def hardware_key(record: dict[str, Any] | None) -> str:
    """What a result's bit-identity is tied to, as one label: CPU model, ISA level, GPU used."""
    cpu = (record or {}).get("cpu")
    if not isinstance(cpu, dict):
        return UNRECORDED
    label = f"{cpu.get('model') or 'unknown CPU'} · {cpu.get('isa_level') or 'unknown ISA'}"
    gpu = (record or {}).get("gpu")
    if isinstance(gpu, dict) and gpu.get("used"):
        label += f" · GPU {gpu.get('name', 'unknown')} (CUDA {gpu.get('cuda')}, cuDNN {gpu.get('cudnn')})"
    return label
