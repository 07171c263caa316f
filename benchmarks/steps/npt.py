"""Training-step benchmark for NPT: seconds per step, achieved GFLOP/s, peak memory.

    python -m benchmarks.steps.npt [--cases breast_cancer protein] [--steps 3] [--threads N]

Cases (random data of the stated shape; the cost of a step does not depend on the values):

* breast_cancer: 569 rows, 30 continuous features + binary target (31 attributes), NPT-Small
  with e = 32, 8 layers, 8 heads, the whole table as one batch (App. C.1.2).
* protein: one 2048-row batch of 9 continuous features + continuous target (10 attributes),
  NPT-Base with e = 128 (App. C.1.3), p_target 0.15.
* higgs: one 4096-row batch of 28 continuous features + binary target (29 attributes), the paper
  profile's HIGGS job (params.yaml's `npt_higgs`: NPT-Base at the defaults, p_target 1.0), whose
  GPU memory the paper reports (19.18 GB, Table 7). On a CPU a step takes minutes and ~13 GiB.

A step is everything `NPTTrainer.train_step` does: slicing the epoch's masks, forward, loss,
backward, gradient clipping, LAMB + Lookahead. FLOPs are counted with
`torch.utils.flop_counter.FlopCounterMode` over one real step (the oneDNN linear op is registered
with it: `benchmarks.steps.common.flop_counter`), so the figure covers matrix products and attention
only, not element-wise work.
Peak memory: on CUDA the allocator's peak; on CPU the growth of the process's peak resident set
while the case runs, each case in a fresh subprocess so that one case cannot mask another.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Literal

import torch

from benchmarks.steps.common import PeakMemory, bench_parser, flop_counter, run_measurement, synchronize
from tabrepro.features import categorical, continuous
from tabrepro.models.npt.config import NPTConfig
from tabrepro.models.npt.masking import TEST, TRAIN, VAL, NPTTable
from tabrepro.models.npt.trainer import NPTTrainer
from tabrepro.nn.kernels import use_onednn

__all__ = ["CASES", "prepared_trainer", "run_case", "main"]

CASES: dict[str, dict[str, Any]] = {
    "breast_cancer": {
        "n_rows": 569,
        "n_features": 30,
        "target": "binary",
        "config": {
            "embed_dim": 32,
            "n_layers": 8,
            "n_heads": 8,
            "lr": 5e-4,
            "flat_fraction": 0.5,
            "batch_size": None,
            "p_target": 1.0,
            "max_steps": 2000,
        },
    },
    "protein": {
        "n_rows": 2048,
        "n_features": 9,
        "target": "continuous",
        "config": {
            "embed_dim": 128,
            "n_layers": 8,
            "n_heads": 8,
            "lr": 1e-3,
            "flat_fraction": 0.7,
            "batch_size": None,
            "p_target": 0.15,
            "max_steps": 400_000,
        },
    },
    "higgs": {
        "n_rows": 4096,
        "n_features": 28,
        "target": "binary",
        "config": {"batch_size": None, "p_target": 1.0, "max_steps": 500_000},
    },
}


def _random_table(case: dict[str, Any], seed: int = 0) -> NPTTable:
    n, d = case["n_rows"], case["n_features"] + 1
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn((n, d), generator=generator)
    if case["target"] == "binary":
        attributes = [continuous() for _ in range(d - 1)] + [categorical(2)]
        values[:, -1] = (values[:, 0] + 0.5 * torch.randn(n, generator=generator) > 0).float()
    else:
        attributes = [continuous() for _ in range(d)]
    roles = torch.full((n,), TRAIN)
    order = torch.randperm(n, generator=generator)
    roles[order[: int(0.1 * n)]] = VAL
    roles[order[int(0.1 * n) : int(0.3 * n)]] = TEST
    return NPTTable(attributes, values, roles)


def prepared_trainer(
    name: str, device: str = "auto", bf16: bool = False, onednn: bool | Literal["auto"] = "auto"
) -> NPTTrainer:
    """Case `name`'s trainer, prepared on its random table."""
    case = CASES[name]
    config = NPTConfig(**case["config"], device=device, bf16_autocast=bf16, onednn_linear=onednn)
    table = _random_table(case)
    trainer = NPTTrainer(table.attributes, config)
    trainer.prepare(table)
    return trainer


def run_case(
    name: str,
    steps: int = 3,
    warmup: int = 1,
    device: str = "auto",
    bf16: bool = False,
    threads: int | None = None,
    onednn: bool | Literal["auto"] = "auto",
) -> dict[str, Any]:
    """Time `steps` training steps of case `name` after `warmup` steps; returns the figures."""
    if threads is not None:
        torch.set_num_threads(threads)
    memory = PeakMemory()
    trainer = prepared_trainer(name, device, bf16, onednn)
    table, config, dev = trainer.table, trainer.config, trainer.device
    assert table is not None
    memory.reset_device_peak(dev)
    for _ in range(warmup):
        trainer.train_step()
    with flop_counter() as counter:
        trainer.train_step()
    flops = counter.get_total_flops()
    times = []
    for _ in range(steps):
        synchronize(dev)
        start = time.perf_counter()
        trainer.train_step()
        synchronize(dev)
        times.append(time.perf_counter() - start)
    peak_bytes, memory_kind = memory.measure(dev)
    n_params = sum(p.numel() for p in trainer.model.parameters())  # type: ignore[union-attr]
    median = statistics.median(times)
    return {
        "case": name,
        "device": str(dev),
        "threads": torch.get_num_threads(),
        "rows": table.n_rows,
        "attributes": len(table.attributes),
        "embed_dim": config.embed_dim,
        "parameters": n_params,
        "step_s_median": median,
        "step_s_min": min(times),
        "steps_timed": steps,
        "gflop_per_step": flops / 1e9,
        "gflops_per_s": flops / 1e9 / median,
        "peak_memory_mib": peak_bytes / 2**20,
        "memory_kind": memory_kind,
        "bf16_autocast": bf16,
        "onednn_linear": use_onednn(onednn) and dev.type == "cpu",
    }


def _format(result: dict[str, Any]) -> str:
    return (
        f"{result['case']:>14} | {result['device']:>6} x{result['threads']:<2} | "
        f"{result['rows']:>5} rows x {result['attributes']:>2} attrs, e={result['embed_dim']:<3} "
        f"({result['parameters'] / 1e6:.1f} M params) | "
        f"{result['step_s_median']:.3f} s/step (min {result['step_s_min']:.3f}) | "
        f"{result['gflop_per_step']:.1f} GFLOP/step, {result['gflops_per_s']:.1f} GFLOP/s | "
        f"{result['peak_memory_mib']:.0f} MiB {result['memory_kind']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.splitlines()[0], steps=3, warmup=1)
    parser.add_argument(
        "--cases", nargs="+", default=["breast_cancer", "protein"], choices=list(CASES), help="default: the first two"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    parser.add_argument(
        "--gemm",
        choices=["auto", "onednn", "mkl"],
        default="auto",
        help="CPU GEMM library of the linear layers (auto: oneDNN with AVX-512, MKL otherwise)",
    )
    args = parser.parse_args(argv)
    kwargs = {
        "steps": args.steps,
        "warmup": args.warmup,
        "device": args.device,
        "bf16": args.bf16,
        "threads": args.threads,
        "onednn": {"auto": "auto", "onednn": True, "mkl": False}[args.gemm],
    }
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} default CPU threads, "
        f"CUDA available: {torch.cuda.is_available()}"
    )
    for name in args.cases:
        result = run_measurement(args.in_process, run_case, name, **kwargs)
        print(_format(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
