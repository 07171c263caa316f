"""Where a CPU training step's time goes, operation by operation, by wall clock.

    python -m benchmarks.steps.op_times bishop [--steps 6] [--warmup 6] [--threads 2] [--set d_model=128 ...]
    python -m benchmarks.steps.op_times npt [--case breast_cancer] [--steps 3] [--warmup 2]

Builds the benchmark's trainer (`benchmarks.steps.bishop` / `benchmarks.steps.npt`, the same data and
configuration), runs the warm-up steps and `--steps` untimed ones, then `--steps` more with a clock
around every aten call (a `TorchDispatchMode`). On a CPU each call finishes before it returns, so
the calls' times add up to the step less Python's own work. Prints the step times, the matrix
products' share and GFLOP/s in place, and the operations and operation-shape pairs that took
longest. Made for CPUs on which `torch.profiler`'s self times mislead: on an AVX-512 EPYC it
inflates element-wise work (GELU above all) far beyond what this clock reads (docs/speed.md).
CPU only.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.steps.common import flop_counter, parse_overrides
from benchmarks.steps.npt import CASES as NPT_CASES
from tabrepro.models.bishop.config import BiSHopConfig


class OpClock(TorchDispatchMode):
    """Seconds, calls and FLOPs per operation and per (operation, operand shapes). FLOPs are
    counted as the benchmarks count them (`benchmarks.steps.common.flop_counter`'s formulas: aten's
    matrix products and attention, and the oneDNN linear op), 0 for every other operation."""

    def __init__(self) -> None:
        super().__init__()
        self.formulas = flop_counter().flop_registry
        self.by_op: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0])
        self.by_shape: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0, 0])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        seconds = time.perf_counter() - start
        name = func.overloadpacket.__name__
        shapes = " ".join(str(tuple(a.shape)) for a in args if isinstance(a, torch.Tensor))
        formula = self.formulas.get(func.overloadpacket)
        flops = formula(*args, **(kwargs or {}), out_val=out) if formula is not None else 0
        for entry in (self.by_op[name], self.by_shape[(name, shapes)]):
            entry[0] += seconds
            entry[1] += 1
            entry[2] += flops
        return out

    def products(self) -> tuple[float, float]:
        """(seconds, FLOPs) of the operations that do counted FLOPs (the matrix products)."""
        rows = [v for v in self.by_op.values() if v[2] > 0]
        return sum(v[0] for v in rows), sum(v[2] for v in rows)


def _step_function(model: str, case: str, batch_size: int, settings: dict[str, Any]) -> Callable[[int], object]:
    """A function running training step i of the chosen benchmark's trainer."""
    if model == "bishop":
        from benchmarks.steps import bishop as bishop_bench

        trainer, batches = bishop_bench.prepared_trainer(bishop_bench.load_data(), "cpu", batch_size, settings)
        return lambda i: trainer.train_step(batches[i % len(batches)])
    from benchmarks.steps import npt as npt_bench

    npt_trainer = npt_bench.prepared_trainer(case, "cpu")
    return lambda i: npt_trainer.train_step()


def _table(title: str, rows: list[tuple[str, list[float]]], steps: int, top: int) -> list[str]:
    lines = [title]
    for label, (seconds, calls, flops) in sorted(rows, key=lambda r: -r[1][0])[:top]:
        rate = f"  {flops / seconds / 1e9:6.0f} GFLOP/s" if flops else ""
        lines.append(f"  {seconds / steps * 1e3:8.1f} ms  {int(calls) // steps:5d} calls{rate}  {label}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=["bishop", "npt"])
    parser.add_argument("--case", default="breast_cancer", choices=sorted(NPT_CASES), help="NPT benchmark case")
    parser.add_argument("--batch-size", type=int, default=32, help="BiSHop's batch size")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="BiSHopConfig overrides (JSON)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default: 6 BiSHop, 3 NPT)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: 6 BiSHop, 2 NPT)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--top", type=int, default=25, help="rows per table")
    args = parser.parse_args(argv)
    if args.set and args.model == "npt":
        parser.error("--set is for bishop; NPT's settings are its --case")
    try:
        settings = parse_overrides(args.set)
        if args.model == "bishop":
            BiSHopConfig(**settings)  # a bad field is named here, before any work
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    steps = args.steps or (6 if args.model == "bishop" else 3)
    warmup = args.warmup if args.warmup is not None else (6 if args.model == "bishop" else 2)
    if args.threads:
        torch.set_num_threads(args.threads)
    step = _step_function(args.model, args.case, args.batch_size, settings)
    for i in range(warmup):
        step(i)
    untimed = []
    for i in range(steps):
        start = time.perf_counter()
        step(warmup + i)
        untimed.append(time.perf_counter() - start)
    clock = OpClock()
    start = time.perf_counter()
    with clock:
        for i in range(steps):
            step(warmup + steps + i)
    clocked = (time.perf_counter() - start) / steps
    in_ops = sum(v[0] for v in clock.by_op.values()) / steps
    product_s, flops = clock.products()
    rate = flops / max(product_s, 1e-12) / 1e9
    lines = [
        f"{args.model}, {torch.get_num_threads()} threads, torch CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}",
        "steps without the clock: " + ", ".join(f"{t:.3f}" for t in untimed) + " s",
        f"with the clock: {clocked:.3f} s a step, {in_ops:.3f} s of it inside operations",
        f"matrix products: {product_s / steps:.3f} s a step, "
        f"{flops / steps / 1e9:.1f} GFLOP, {rate:.0f} GFLOP/s; "
        f"everything else {in_ops - product_s / steps:.3f} s",
    ]
    lines += _table("by operation:", list(clock.by_op.items()), steps, args.top)
    lines += _table(
        "by operation and operand shapes:",
        [(f"{name} {shapes}", v) for (name, shapes), v in clock.by_shape.items()],
        steps,
        args.top,
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
