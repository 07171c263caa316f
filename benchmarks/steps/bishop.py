"""Training-throughput benchmark for BiSHop: samples/s and peak memory at the default config.

    python -m benchmarks.steps.bishop [--threads 1 2] [--steps 10] [--device auto|cpu|cuda]
                                    [--set bf16_autocast=true share_decoder_input=true]

Data: scikit-learn's breast cancer set (569 rows, 30 numerical features, binary target),
standardised; the default BiSHopConfig (thesis §4.1 + the authors' code defaults: G 32, L 8,
C 10, H 3, r 4, S 24, D_model 256, 4 heads, FFN 512), batch size 32. A step is everything
`BiSHopTrainer.train_step` does: forward, cross-entropy, backward, gradient clipping, fused Adam.

Figures per case (each in a fresh subprocess, so that one case cannot mask another's memory):
* samples/s (wall): 32 x timed steps / their wall time (median step); on a shared machine this
  includes time the process was waiting for a core;
* samples/s (CPU time): the same from the process's CPU time per step divided by the thread
  count: an estimate of the wall figure on dedicated cores (exact for one thread; for several it
  assumes perfect overlap, and spinning OpenMP threads inflate the CPU time);
* GFLOP per sample (forward + backward, matrix products only, FlopCounterMode with the oneDNN
  linear op registered: `benchmarks.steps.common.flop_counter`);
* peak memory: growth of the peak resident set over the case (CPU) or the CUDA allocator's peak.
CUDA is measured when available (`--device auto`).

On a machine shared with other jobs, several threads spin-waiting for each other can run 10x
slower than one thread; `--omp-passive` sets OMP_WAIT_POLICY=PASSIVE in the case processes
(better there, slightly worse on dedicated cores).
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
from typing import Any

import torch

from benchmarks.steps.common import (
    PeakMemory,
    bench_parser,
    flop_counter,
    parse_overrides,
    run_measurement,
    standardised_breast_cancer,
    synchronize,
)
from tabrepro.models.bishop.config import BiSHopConfig
from tabrepro.models.bishop.trainer import BiSHopTrainer, TabularTensors

__all__ = ["load_data", "prepared_trainer", "run_case", "main"]


def load_data() -> tuple[TabularTensors, TabularTensors]:
    """Breast cancer, standardised on the training part; 80/20 train/validation split."""
    x, t, n_train = standardised_breast_cancer(0.8)
    empty = torch.zeros((len(t), 0), dtype=torch.int64)
    return (
        TabularTensors(empty[:n_train], x[:n_train], t[:n_train]),
        TabularTensors(empty[n_train:], x[n_train:], t[n_train:]),
    )


def prepared_trainer(
    data: tuple[TabularTensors, TabularTensors],
    device: str = "cpu",
    batch_size: int = 32,
    overrides: dict[str, Any] | None = None,
) -> tuple[BiSHopTrainer, list[torch.Tensor]]:
    """The benchmark's trainer, prepared on `data` (`load_data()`'s), and its first epoch's full
    batches (row indices for `train_step`)."""
    train, val = data
    config = BiSHopConfig(
        device=device,
        batch_size=batch_size,  # type: ignore[arg-type]
        **(overrides or {}),
    )
    trainer = BiSHopTrainer(config, "classification", n_numerical=train.x_num.shape[1], n_classes=2)
    trainer.prepare(train, val)
    return trainer, [rows for rows in trainer._epoch_batches(0) if rows.numel() == batch_size]


def run_case(
    device: str = "cpu",
    threads: int | None = None,
    steps: int = 10,
    warmup: int = 2,
    batch_size: int = 32,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Time `steps` training steps after `warmup` steps; returns the figures."""
    if threads is not None:
        torch.set_num_threads(threads)
    data = load_data()
    memory = PeakMemory()
    trainer, full = prepared_trainer(data, device, batch_size, overrides)
    dev = trainer.device
    memory.reset_device_peak(dev)

    def batch(i: int) -> torch.Tensor:
        return full[i % len(full)]

    for i in range(warmup):
        trainer.train_step(batch(i))
    with flop_counter() as counter:
        trainer.train_step(batch(warmup))
    flops = counter.get_total_flops()
    wall, cpu = [], []
    for i in range(steps):
        synchronize(dev)
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        trainer.train_step(batch(warmup + 1 + i))
        synchronize(dev)
        wall.append(time.perf_counter() - start_wall)
        cpu.append(time.process_time() - start_cpu)
    peak_bytes, memory_kind = memory.measure(dev)
    n_threads = torch.get_num_threads()
    wall_step = statistics.median(wall)
    cpu_step = statistics.median(cpu) / (n_threads if dev.type == "cpu" else 1)
    assert trainer.model is not None
    return {
        "device": str(dev),
        "threads": n_threads,
        "batch_size": batch_size,
        "parameters": trainer.model.n_parameters(),
        "steps_timed": steps,
        "step_s_wall": wall_step,
        "step_s_wall_min": min(wall),
        "samples_per_s_wall": batch_size / wall_step,
        "samples_per_s_wall_best": batch_size / min(wall),
        "samples_per_s_cpu": batch_size / cpu_step if dev.type == "cpu" else float("nan"),
        "gflop_per_sample": flops / 1e9 / batch_size,
        "peak_memory_mib": peak_bytes / 2**20,
        "memory_kind": memory_kind,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _format(r: dict[str, Any]) -> str:
    cpu = f", {r['samples_per_s_cpu']:.1f} samples/s by CPU time" if r["device"] == "cpu" else ""
    return (
        f"{r['device']:>6} x{r['threads']:<2} batch {r['batch_size']} "
        f"({r['parameters'] / 1e6:.2f} M params, {r['gflop_per_sample']:.2f} GFLOP/sample) | "
        f"{r['samples_per_s_wall']:.1f} samples/s wall (best step "
        f"{r['samples_per_s_wall_best']:.1f}){cpu} | "
        f"{r['step_s_wall']:.3f} s/step | peak {r['peak_memory_mib']:.0f} MiB "
        f"{r['memory_kind']} (process peak RSS {r['peak_rss_mib']:.0f} MiB)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        __doc__.splitlines()[0], steps=10, warmup=2, device_help="auto: CPU, and CUDA too when available"
    )
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=None,
        help="CPU thread counts to measure (default: 1 and torch's default)",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="FIELD=VALUE",
        help="BiSHopConfig overrides, values as JSON (e.g. bf16_autocast=true)",
    )
    parser.add_argument(
        "--omp-passive", action="store_true", help="OMP_WAIT_POLICY=PASSIVE in the case processes (shared machines)"
    )
    args = parser.parse_args(argv)
    if args.omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read by the spawned case processes
    try:
        overrides = parse_overrides(args.set)
    except ValueError as error:
        parser.error(str(error))
    BiSHopConfig(**overrides)  # fail early on a bad field
    default_threads = torch.get_num_threads()
    threads = args.threads or sorted({1, default_threads})
    print(
        f"torch {torch.__version__}, {default_threads} default CPU threads, "
        f"CUDA available: {torch.cuda.is_available()}, load average "
        f"{os.getloadavg()[0]:.1f}, overrides {overrides or 'none'}"
    )
    cases: list[dict[str, Any]] = []
    if args.device in ("auto", "cpu"):
        cases += [{"device": "cpu", "threads": t} for t in threads]
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        cases.append({"device": "cuda", "threads": None})
    for case in cases:
        kwargs = {
            **case,
            "steps": args.steps,
            "warmup": args.warmup,
            "batch_size": args.batch_size,
            "overrides": overrides,
        }
        result = run_measurement(args.in_process, run_case, **kwargs)
        print(_format(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
