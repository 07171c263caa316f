"""Does bfloat16 autocast select as good a model as fp32? The same fits in both precisions.

    python -m benchmarks.precision [--device cuda] [--datasets breast_cancer digits]
        [--models npt bishop] [--seeds 0] [--npt-steps 1000] [--bishop-epochs 60] [--json PATH]

NPT and BiSHop expose `bf16_autocast` (matrix products in bfloat16; losses, entmax, LayerNorm
and the optimiser in fp32). Whether it may become a default is a question of the model each
precision ends up selecting, so this trains each model on each data set twice, fp32 and bf16,
with everything else equal (seed, split, initial weights, budget), and prints the best
validation loss, the test loss and accuracy of the selected weights, and the time of each fit.
A difference matters when it is larger than what another seed gives: pass several --seeds.

Data sets: scikit-learn's bundled copies (no download), so the comparison runs anywhere:
`breast_cancer` (WDBC, 569 x 30, binary) and `digits` (1,797 x 64, ten classes). One stratified
split per data set (64 % train, 16 % validation, 20 % test, fixed seed), features standardised
on the training rows. NPT: NPT-Small as on breast cancer in the paper (e = 32, 8 layers, 8
heads, LR 5e-4, half flat then cosine, the whole table as one batch), `--npt-steps` steps,
validated every 10. BiSHop: its defaults, `--bishop-epochs` epochs, early stopping as configured.

On a CPU without native bfloat16 arithmetic (AVX-512 BF16 or AMX), bf16 matrix products are
emulated and a bf16 fit runs many times slower than fp32: compare there only to check the
numbers, on a GPU or a CPU with bf16 arithmetic for the times.

Results go to --json after every fit (atomically), so an interrupted run keeps what it finished.
Bad input (an unknown data set or model, --device cuda without a GPU) is one line and exit 2.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tabrepro.errors import InputError
from tabrepro.io import write_json

__all__ = ["DATASETS", "MODELS", "Split", "load_split", "fit_npt", "fit_bishop", "summarise", "main"]

PROG = "python -m benchmarks.precision"
PRECISIONS = ("fp32", "bf16")
# NPT-Small as the paper trains it on breast cancer (the whole table as one batch, validated
# every 10 steps); BiSHop at its defaults.
NPT_SETTINGS: dict[str, Any] = {
    "embed_dim": 32,
    "n_layers": 8,
    "n_heads": 8,
    "lr": 5e-4,
    "flat_fraction": 0.5,
    "batch_size": None,
    "eval_every_epochs": 10,
}
BISHOP_SETTINGS: dict[str, Any] = {}


@dataclass(frozen=True)
class Split:
    """One data set cut into train / validation / test, features standardised on train."""

    name: str
    x: dict[str, np.ndarray]  # role -> float32 [rows, features]
    y: dict[str, np.ndarray]  # role -> int64 [rows]
    n_classes: int


def _sklearn_loader(name: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    def load() -> tuple[np.ndarray, np.ndarray]:
        from sklearn import datasets

        return getattr(datasets, f"load_{name}")(return_X_y=True)

    return load


DATASETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "breast_cancer": _sklearn_loader("breast_cancer"),
    "digits": _sklearn_loader("digits"),
}


def load_split(name: str, seed: int = 0) -> Split:
    """`name`'s fixed stratified 64/16/20 split, standardised on the training rows."""
    from sklearn.model_selection import train_test_split

    x, y = DATASETS[name]()
    rows = np.arange(len(y))
    rest, test = train_test_split(rows, test_size=0.2, stratify=y, random_state=seed)
    train, val = train_test_split(rest, test_size=0.2, stratify=y[rest], random_state=seed)
    mean, std = x[train].mean(0), x[train].std(0)
    std = np.where(std > 0, std, 1.0)  # constant pixels of digits
    scaled = ((x - mean) / std).astype(np.float32)
    roles = {"train": train, "val": val, "test": test}
    return Split(
        name,
        {role: scaled[index] for role, index in roles.items()},
        {role: y[index].astype(np.int64) for role, index in roles.items()},
        int(y.max()) + 1,
    )


def _test_figures(logits: Any, labels: np.ndarray) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    logits = logits.float().cpu()
    target = torch.as_tensor(labels)
    return {
        "test_loss": float(F.cross_entropy(logits, target)),
        "test_accuracy": float((logits.argmax(1) == target).double().mean()),
    }


def fit_npt(split: Split, bf16: bool, seed: int, device: str, steps: int) -> dict[str, Any]:
    """NPT-Small on the split; the validation loss it selects and its test figures."""
    import torch

    from tabrepro.features import categorical, continuous
    from tabrepro.models.npt import NPTConfig, NPTTable, NPTTrainer
    from tabrepro.models.npt.masking import TEST, TRAIN, VAL

    codes = {TRAIN: "train", VAL: "val", TEST: "test"}
    values = np.concatenate([np.column_stack([split.x[r], split.y[r]]) for r in codes.values()])
    roles = np.concatenate([np.full(len(split.y[r]), code) for code, r in codes.items()])
    attributes = [continuous() for _ in range(split.x["train"].shape[1])] + [categorical(split.n_classes)]
    table = NPTTable(attributes, torch.as_tensor(values), torch.as_tensor(roles))
    config = NPTConfig(**NPT_SETTINGS, max_steps=steps, seed=seed, device=device, bf16_autocast=bf16)
    trainer = NPTTrainer(attributes, config)
    result = trainer.fit(table)
    test_rows = torch.as_tensor(roles == TEST)
    logits = trainer.target_outputs()[test_rows.to(trainer.device)]
    return {
        "best_val_loss": result.best_val_loss,
        "selected_at": result.best_step,
        "unit": "step",
        "trained": result.steps,
        "diverged": result.diverged,
        **_test_figures(logits, split.y["test"]),
    }


def fit_bishop(split: Split, bf16: bool, seed: int, device: str, epochs: int) -> dict[str, Any]:
    """BiSHop at its defaults on the split; the validation loss it selects and its test figures."""
    import torch

    from tabrepro.models.bishop import BiSHopConfig, BiSHopTrainer, TabularTensors

    def tensors(role: str) -> TabularTensors:
        x = torch.as_tensor(split.x[role])
        return TabularTensors(torch.zeros((len(x), 0), dtype=torch.int64), x, torch.as_tensor(split.y[role]))

    config = BiSHopConfig(**BISHOP_SETTINGS, max_epochs=epochs, seed=seed, device=device, bf16_autocast=bf16)
    trainer = BiSHopTrainer(config, "classification", n_numerical=split.x["train"].shape[1], n_classes=split.n_classes)
    result = trainer.fit(tensors("train"), tensors("val"))
    return {
        "best_val_loss": result.best_val_loss,
        "selected_at": result.best_epoch,
        "unit": "epoch",
        "trained": result.epochs,
        "diverged": result.diverged,
        **_test_figures(trainer.outputs(tensors("test")), split.y["test"]),
    }


MODELS: dict[str, Callable[..., dict[str, Any]]] = {"npt": fit_npt, "bishop": fit_bishop}


def summarise(fits: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per model x data set x seed with both precisions: losses, Δ = bf16 − fp32."""
    by_key: dict[tuple[str, str, int], dict[str, dict[str, Any]]] = {}
    for fit in fits:
        by_key.setdefault((fit["model"], fit["dataset"], fit["seed"]), {})[fit["precision"]] = fit
    rows = []
    for (model, dataset, seed), pair in by_key.items():
        if set(pair) != set(PRECISIONS):
            continue
        fp32, bf16 = pair["fp32"], pair["bf16"]
        rows.append(
            {
                "model": model,
                "dataset": dataset,
                "seed": seed,
                "fp32": fp32,
                "bf16": bf16,
                "val_loss_delta": bf16["best_val_loss"] - fp32["best_val_loss"],
                "val_loss_relative": (bf16["best_val_loss"] - fp32["best_val_loss"]) / fp32["best_val_loss"],
                "speedup": fp32["fit_s"] / bf16["fit_s"],
            }
        )
    return rows


def format_rows(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "model  | data set      | seed | best val loss fp32 / bf16 (Δ)  | test acc fp32 / bf16 | fit s fp32 / bf16",
    ]
    for row in rows:
        fp32, bf16 = row["fp32"], row["bf16"]
        lines.append(
            f"{row['model']:<6} | {row['dataset']:<13} | {row['seed']:>4} | "
            f"{fp32['best_val_loss']:.4f} / {bf16['best_val_loss']:.4f} ({row['val_loss_relative']:+.1%}) | "
            f"{fp32['test_accuracy']:.3f} / {bf16['test_accuracy']:.3f}        | "
            f"{fp32['fit_s']:.1f} / {bf16['fit_s']:.1f}"
        )
    return lines


def _machine(device: str) -> dict[str, Any]:
    import torch

    from tabrepro.provenance import cpu_info, git_commit, gpu_info

    cpu = cpu_info()
    return {
        "device": device,
        "cpu_model": cpu.get("model"),
        "isa_level": cpu.get("isa_level"),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "gpu": gpu_info() if device == "cuda" else None,
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to train (default %(default)s)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), metavar="NAME", help=", ".join(DATASETS))
    parser.add_argument("--models", nargs="+", default=list(MODELS), metavar="MODEL", help=", ".join(MODELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="training seeds (default 0)")
    parser.add_argument("--npt-steps", type=int, default=1000, help="NPT optimiser steps (default %(default)s)")
    parser.add_argument("--bishop-epochs", type=int, default=60, help="BiSHop epochs at most (default %(default)s)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None, help="write fits and summary here (atomically)")
    return parser


def _check(args: argparse.Namespace) -> None:
    for option, chosen, known in (("--datasets", args.datasets, DATASETS), ("--models", args.models, MODELS)):
        unknown = [name for name in chosen if name not in known]
        if unknown:
            raise InputError(f"{option}: unknown {unknown[0]!r} (known: {', '.join(known)})")
    for option, value in (("--npt-steps", args.npt_steps), ("--bishop-epochs", args.bishop_epochs)):
        if value < 1:
            raise InputError(f"{option} must be at least 1, got {value}")
    if args.threads is not None and args.threads < 1:
        raise InputError(f"--threads must be at least 1, got {args.threads}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every data set x model x seed in fp32 then bf16; the JSON rewritten after each fit."""
    import torch

    _check(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: torch sees no CUDA device here")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    budget = {"npt": args.npt_steps, "bishop": args.bishop_epochs}
    payload: dict[str, Any] = {
        "tool": PROG,
        "settings": {
            "device": args.device,
            "datasets": args.datasets,
            "models": args.models,
            "seeds": args.seeds,
            "npt_steps": args.npt_steps,
            "bishop_epochs": args.bishop_epochs,
        },
        "machine": None,
        "fits": [],
        "summary": [],
    }
    for name in args.datasets:  # data set first: a run cut short still compares both models
        split = load_split(name)
        for model in args.models:
            for seed in args.seeds:
                for precision in PRECISIONS:
                    start = time.perf_counter()
                    figures = MODELS[model](split, precision == "bf16", seed, args.device, budget[model])
                    fit = {"model": model, "dataset": name, "seed": seed, "precision": precision, **figures}
                    fit["fit_s"] = time.perf_counter() - start
                    payload["fits"].append(fit)
                    payload["machine"] = payload["machine"] or _machine(args.device)
                    payload["summary"] = summarise(payload["fits"])
                    print(
                        f"{model} {name} seed {seed} {precision}: best val loss {fit['best_val_loss']:.4f} at "
                        f"{fit['unit']} {fit['selected_at']}, test accuracy {fit['test_accuracy']:.3f}, "
                        f"{fit['fit_s']:.1f} s",
                        flush=True,
                    )
                    if args.json is not None:
                        write_json(args.json, payload)
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        payload = run(args)
    except (InputError, OSError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    print()
    for line in format_rows(payload["summary"]):
        print(line)
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0
