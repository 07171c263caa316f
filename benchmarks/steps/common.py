"""What the `bench` modules (benchmarks.steps.npt, benchmarks.steps.bishop) measure with: FLOPs
(including the oneDNN linear op the models use), finished-work timing, peak memory, and a fresh
process per case. The trainers never import this module.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import torch

if TYPE_CHECKING:
    from torch.utils.flop_counter import FlopCounterMode

_T = TypeVar("_T")

__all__ = [
    "standardised_breast_cancer",
    "flop_counter",
    "synchronize",
    "PeakMemory",
    "run_in_subprocess",
    "bench_parser",
    "parse_overrides",
    "run_measurement",
]


def standardised_breast_cancer(train_fraction: float = 0.8) -> tuple[torch.Tensor, torch.Tensor, int]:
    """WDBC as the speed benchmarks use it: (x float32 [569, 30], y int64, n_train). Rows in a
    permutation seeded 0; the first `train_fraction` of them are the training part, whose mean
    and std standardise every row. One definition, so that our benchmark and the side-by-side
    run of the authors' code (benchmarks.versus) time the same numbers."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x = torch.as_tensor(X, dtype=torch.float64)[order]
    t = torch.as_tensor(y, dtype=torch.int64)[order]
    n_train = int(train_fraction * len(t))
    mean, std = x[:n_train].mean(0), x[:n_train].std(0).clamp(min=1e-12)
    return ((x - mean) / std).float(), t, n_train


def _linear_pointwise_flops(x_shape: Any, w_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return 2 * math.prod(out_shape) * int(w_shape[-1])


def flop_counter() -> FlopCounterMode:
    """FlopCounterMode that also counts the oneDNN linear op the models use on CPU.

    FlopCounterMode knows aten's matrix products only; without the extra entry every oneDNN
    GEMM (tabrepro.nn.kernels.Linear) would count as zero FLOPs.
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


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """Command-line `--set KEY=VALUE` pairs as config overrides: each value as JSON, or as the
    text itself where it is not JSON (`attention=gsh`). ValueError names an item without "="."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    return overrides


def bench_parser(
    description: str, *, steps: int, warmup: int, device_help: str | None = None
) -> argparse.ArgumentParser:
    """A benchmark's command line with the options every one has: --steps, --warmup, --device,
    --in-process; the benchmark adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=steps, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help=device_help)
    parser.add_argument(
        "--in-process", action="store_true", help="run cases in this process (CPU peak memory then accumulates)"
    )
    return parser


def run_measurement(in_process: bool, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """One benchmark case: here (`in_process`) or in a fresh process (`run_in_subprocess`)."""
    return function(*args, **kwargs) if in_process else run_in_subprocess(function, *args, **kwargs)
