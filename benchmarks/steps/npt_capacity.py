"""Capacity benchmark: the largest full-batch table whose NPT training step fits in a memory budget.

    python -m benchmarks.steps.npt_capacity [--memory-gb 24] [--variants npt npt_isab] [--time-rows 569 5000]
                                    [--recompute-blocks]

Each probe trains one full-batch step (forward, loss, backward, LAMB + Lookahead; the same
`NPTTrainer.train_step` as training) on random data of `rows` x `--features` continuous
features plus a binary target, e = `--embed-dim`, 8 layers, 8 heads, in a fresh process whose
address space is capped at the budget (RLIMIT_AS), so that a probe too large for the budget fails
with an allocation error instead of swapping or waking the kernel's OOM killer. The row count
doubles until a probe fails, then bisects to within `--tolerance`. Seconds per step are timed
separately at `--time-rows` (median of `--steps` steps after one warm-up step).

The address-space cap counts everything the process maps (libraries, thread stacks, allocator
reserve), so the resident peak of a step that fits is somewhat below the budget; the peak RSS of
the largest passing probe is printed beside it. Needs a machine with at least the budget of free
memory; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import resource
import statistics
import sys
import time
from typing import Any

__all__ = ["probe", "largest_rows", "main"]

VARIANTS = {"npt": {}, "npt_isab": {"datapoint_attention": "isab"}}


def _step_config(variant: str, embed_dim: int, n_inducing: int, recompute_blocks: bool = False) -> dict[str, Any]:
    extra = dict(VARIANTS[variant], recompute_blocks=recompute_blocks)
    if variant == "npt_isab":
        extra["n_inducing"] = n_inducing
    return {
        "embed_dim": embed_dim,
        "n_layers": 8,
        "n_heads": 8,
        "batch_size": None,
        "p_target": 1.0,
        "max_steps": 1000,
        "device": "cpu",
        **extra,
    }


def _run_steps(config: dict[str, Any], rows: int, features: int, steps: int, threads: int | None) -> dict[str, Any]:
    """Train `steps` + 1 full-batch steps; the seconds of all but the first, and the peak RSS."""
    import torch

    from benchmarks.steps.npt import _random_table
    from tabrepro.models.npt.config import NPTConfig
    from tabrepro.models.npt.trainer import NPTTrainer

    if threads is not None:
        torch.set_num_threads(threads)
    table = _random_table({"n_rows": rows, "n_features": features, "target": "binary"})
    trainer = NPTTrainer(table.attributes, NPTConfig(**config))
    trainer.prepare(table)
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        trainer.train_step()
        times.append(time.perf_counter() - start)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rows": rows, "seconds": times[1:], "peak_rss_gib": peak_kib / 2**20}


def _child(queue: Any, limit_bytes: int | None, args: tuple) -> None:
    if limit_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    try:
        queue.put(("ok", _run_steps(*args)))
    except (MemoryError, RuntimeError) as error:  # torch reports a failed allocation as RuntimeError
        queue.put(("failed", f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"))


def probe(
    config: dict[str, Any], rows: int, features: int, *, memory_gb: float | None, steps: int = 0, threads: int | None
) -> tuple[bool, dict[str, Any] | str]:
    """One fresh process running `steps` + 1 steps at `rows` rows under the address-space cap."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    limit = None if memory_gb is None else int(memory_gb * 2**30)
    process = context.Process(target=_child, args=(queue, limit, (config, rows, features, steps, threads)))
    process.start()
    process.join()
    if queue.empty():
        return False, f"process ended with exit code {process.exitcode} and no result"
    status, payload = queue.get()
    return status == "ok", payload


def largest_rows(
    config: dict[str, Any],
    features: int,
    memory_gb: float,
    *,
    start: int,
    tolerance: float,
    threads: int | None,
    report: Any = print,
) -> tuple[int, dict[str, Any] | None, str]:
    """Double from `start` until a probe fails, then bisect; returns (largest passing rows, its
    figures, the first failing size's message)."""
    passed, best, failed, failure = 0, None, None, ""
    rows = start
    while rows >= 1:
        ok, payload = probe(config, rows, features, memory_gb=memory_gb, threads=threads)
        report(f"  {rows:>8,} rows: " + ("fits" if ok else f"does not fit ({payload})"))
        if ok:
            passed, best = rows, payload
        else:
            failed, failure = rows, str(payload)
        if failed is None:
            rows *= 2
        elif not passed:
            rows //= 2
        elif failed - passed <= max(1, tolerance * passed):
            return passed, best, failure  # type: ignore[return-value]
        else:
            rows = (passed + failed) // 2
    return 0, None, failure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.steps.npt_capacity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--memory-gb", type=float, default=24.0, help="address-space budget per probe (GiB)")
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--embed-dim", type=int, default=32)
    parser.add_argument("--n-inducing", type=int, default=32, help="m, NPT-ISAB's inducing points")
    parser.add_argument("--start-rows", type=int, default=2000)
    parser.add_argument("--tolerance", type=float, default=0.1, help="bisect until within this fraction")
    parser.add_argument("--time-rows", type=int, nargs="*", default=[569, 5000])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per --time-rows size")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--skip-capacity", action="store_true", help="only the seconds per step")
    parser.add_argument(
        "--recompute-blocks",
        action="store_true",
        help="recompute each block's activations in the backward pass (NPTConfig.recompute_blocks)",
    )
    args = parser.parse_args(argv)
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}", flush=True)
    for variant in args.variants:
        config = _step_config(variant, args.embed_dim, args.n_inducing, args.recompute_blocks)
        for rows in args.time_rows:
            ok, payload = probe(config, rows, args.features, memory_gb=None, steps=args.steps, threads=args.threads)
            if ok:
                assert isinstance(payload, dict)
                print(
                    f"{variant}: {rows:,} rows x {args.features} features, e={args.embed_dim}: "
                    f"{statistics.median(payload['seconds']):.2f} s/step (median of {args.steps}), "
                    f"peak RSS {payload['peak_rss_gib']:.1f} GiB",
                    flush=True,
                )
            else:
                print(f"{variant}: {rows:,} rows: failed: {payload}", flush=True)
        if args.skip_capacity:
            continue
        print(
            f"{variant}: largest full-batch training step within {args.memory_gb:g} GiB of address space:", flush=True
        )
        rows, best, failure = largest_rows(
            config,
            args.features,
            args.memory_gb,
            start=args.start_rows,
            tolerance=args.tolerance,
            threads=args.threads,
            report=lambda line: print(line, flush=True),
        )
        peak = f", peak RSS {best['peak_rss_gib']:.1f} GiB" if best else ""
        print(f"{variant}: largest: {rows:,} rows{peak}; next size failed with {failure}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
