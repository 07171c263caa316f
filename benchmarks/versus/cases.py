"""The compared cases: one set of settings, the authors' step and ours, what each step contains.

Our side of every case is a case of our own benchmarks (benchmarks.steps.npt's "breast_cancer",
benchmarks.steps.bishop's default; the `_code` variants with the overrides named below), timed by
their own run_case, so the figures are comparable with theirs; the authors' settings are derived
from the same config, in their option names.

NPT, breast cancer shape (`npt_breast_cancer`, `npt_breast_cancer_code`)
    569 rows, 30 continuous features + binary target, NPT-Small e = 32, 8 layers, 8 heads, the
    whole table as one batch, LR 5e-4, flat-then-cosine schedule over 2,000 steps (50 % flat),
    feature masking p 0.15, every training target masked. Random values of that shape.

    Authors' step (their npt/train.py, Trainer.run_epoch for one training epoch = one full batch,
    minus data loading): model.train(); optimizer.zero_grad(); Trainer.run_batch: cast the batch
    to float32 on the CPU, forward (NPTModel: per-column in-embeddings, feature type and index
    embeddings, 8 alternating MHSA blocks between datapoints and between attributes, per-column
    out-embeddings) under a disabled autocast, their Loss (masked cross-entropy / squared error
    per column, targets and masked features, cosine-annealed trade-off), the disabled GradScaler's
    pass-through backward with their per-parameter gradient clamp hooks ([-1, 1]), Lookahead(LAMB)
    step, TradeoffAnnealer and LR scheduler steps, zero_grad, loss bookkeeping (detach, reset).
    Their data loading, excluded from the step and reported as `data_s`: NPTBatchDataset.set_mode
    ("train") (row shuffle, target masking, BERT-style feature masking) and taking the batch.

    Our step (NPTTrainer.train_step, as benchmarks.steps.npt times it): the epoch's mask draw (a
    full-batch step is an epoch), LR schedule, forward, loss, zero_grad, backward, gradient
    clipping, LAMB + Lookahead step, a few logged scalars.

    Differences not removed: our step includes drawing the masks, theirs gets them from data
    loading (compare `data_s`); `npt_breast_cancer` runs our paper defaults (softmax scale
    1/sqrt(head width), keys and values from LN(H), no residual bias, global-norm clipping,
    LayerNorm eps 1e-5), `npt_breast_cancer_code` our options that follow their code (scale
    1/sqrt(block width), keys and values from H, residual bias, value clipping, eps 1e-12), which
    leaves implementation only. Their table has the target first, ours last; their rows are
    sorted train/val/test, ours mixed (neither changes the cost). Neither side evaluates: their
    breast-cancer script evaluates validation and test after every epoch, ours every 5 epochs.

BiSHop, breast cancer, batch 32 (`bishop_default`, `bishop_code`)
    scikit-learn's breast cancer (30 numerical features), standardised, the same training rows on
    both sides; G 32, L 8, C 10, H 3, r 4, S 24, D_model 256, 4 heads, FFN 512, dropout 0.2,
    LR 5e-5. Samples/s = 32 / median step.

    Authors' step (the body of their exp/exp_bishop.py Exp_BiSHop.train batch loop): zero_grad;
    _process_one_batch (casts, model forward: piecewise-linear numerical embedding, patch
    embedding, H encoder levels, H + 1 decoder levels, MLP head); CrossEntropyLoss; loss.item();
    backward; clip_grad_norm_(1.0); AdamW step (their default weight decay 0.01). Excluded: the
    DataLoader, the progress print every 10 iterations, per-epoch validation, test, scheduler
    and early stopping.

    Our step (BiSHopTrainer.train_step, as benchmarks.steps.bishop times it): gather the batch,
    forward, cross-entropy, zero_grad, finiteness check, backward, norm clipping fused into the
    fused Adam (or AdamW) step, the loss as a float.

    Differences not removed: `bishop_default` runs our thesis defaults (H decoder levels, Adam
    without weight decay) against their code (H + 1 decoder levels, AdamW 0.01), i.e. less work
    on our side; `bishop_code` sets decoder_input_level, AdamW and weight decay 0.01, the like-
    for-like comparison. Batch composition differs (same rows, other order). GFLOP per step
    differs even then: our decoder computes once per batch what depends only on E_pos (its
    projections, scores and entmax in the first module), theirs once per row; their entmax is
    their own.

On a GPU (`--device cuda`) both sides run the same steps there: the authors' code as their
scripts run it with CUDA enabled (NPT: the model on the GPU, each batch copied to it in
run_batch, AMP off as in their breast-cancer script; BiSHop: `use_gpu`, their per-batch copies
to the device), ours with `device="cuda"`. Neither side turns on TF32, so both compute in fp32
and the peak they are judged against is the fp32 (non-TF32) matrix-product rate. The timer
synchronises the device before it starts and after each step.

`npt_tiny` (not run unless asked): a seconds-long NPT case for tests (64 rows, 6 features,
e = 16, 2 layers, 4 heads).
"""

from __future__ import annotations

import copy
import json
import statistics
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Case",
    "CASES",
    "DEFAULT_CASES",
    "authors_settings",
    "authors_key",
    "ours_npt_case",
    "run_ours",
    "summarise",
    "ratio_at_peak",
    "round_ratios",
    "ratio",
]

# Our NPT options that follow the authors' code instead of the paper (tabrepro.models.npt.config).
NPT_CODE_OPTIONS: dict[str, Any] = {
    "attention_scale": "full_width",
    "kv_from_normalised": False,
    "residual_bias": True,
    "grad_clip": "value",
    "layer_norm_eps": 1e-12,
}
# Our BiSHop options that follow the authors' code instead of the thesis (tabrepro.models.bishop.config).
BISHOP_CODE_OPTIONS: dict[str, Any] = {"decoder_input_level": True, "optimizer": "adamw", "weight_decay": 0.01}

_NPT_TINY: dict[str, Any] = {
    "n_rows": 64,
    "n_features": 6,
    "target": "binary",
    "config": {
        "embed_dim": 16,
        "n_layers": 2,
        "n_heads": 4,
        "lr": 5e-4,
        "flat_fraction": 0.5,
        "batch_size": None,
        "p_target": 1.0,
        "max_steps": 2000,
    },
}


@dataclass(frozen=True)
class Case:
    """One comparison: which model, our benchmark case and overrides, defaults for its timing."""

    name: str
    model: str  # "npt" or "bishop"
    description: str
    bench_case: str | None = None  # NPT: a case of benchmarks.steps.npt.CASES; None: _NPT_TINY
    overrides: dict[str, Any] = field(default_factory=dict)  # our config fields changed
    steps: int = 3  # timed steps per run (our benchmarks' defaults)
    warmup: int = 1
    batch_size: int = 32  # BiSHop only
    hidden: bool = False  # left out of the default list
    # On a GPU a step takes milliseconds: more steps per run, so that the median is not one
    # launch-jittered sample, and more warm-up for the kernels' first-call autotuning.
    gpu_steps: int = 50
    gpu_warmup: int = 5


CASES: dict[str, Case] = {
    case.name: case
    for case in (
        Case(
            "npt_breast_cancer",
            "npt",
            "NPT-Small e=32, 569 rows x 31 attrs, full batch; ours: paper defaults",
            bench_case="breast_cancer",
        ),
        Case(
            "npt_breast_cancer_code",
            "npt",
            "the same; ours: the options that follow the authors' code",
            bench_case="breast_cancer",
            overrides=NPT_CODE_OPTIONS,
        ),
        Case(
            "bishop_default",
            "bishop",
            "BiSHop defaults, breast cancer, batch 32; ours: thesis defaults",
            steps=10,
            warmup=2,
        ),
        Case(
            "bishop_code",
            "bishop",
            "the same; ours: decoder input level + AdamW 0.01 as the authors' code",
            overrides=BISHOP_CODE_OPTIONS,
            steps=10,
            warmup=2,
        ),
        Case("npt_tiny", "npt", "NPT 64 rows x 7 attrs, e=16, 2 layers (for tests)", hidden=True, steps=1),
    )
}
DEFAULT_CASES: list[str] = [name for name, case in CASES.items() if not case.hidden]


def ours_npt_case(case: Case) -> dict[str, Any]:
    """Our NPT benchmark case (benchmarks.steps.npt.CASES format) with the case's overrides."""
    if case.bench_case is None:
        base = copy.deepcopy(_NPT_TINY)
    else:
        from benchmarks.steps.npt import CASES as NPT_BENCH_CASES

        base = copy.deepcopy(NPT_BENCH_CASES[case.bench_case])
    base["config"] = {**base["config"], **case.overrides}
    return base


def authors_settings(case: Case) -> dict[str, Any]:
    """The authors' settings for `case`, derived from our config of it (shape and optimisation
    are shared; our implementation options are not theirs to take)."""
    if case.model == "npt":
        from tabrepro.models.npt.config import NPTConfig

        bench = ours_npt_case(case)
        if bench["target"] != "binary":
            raise ValueError(f"{case.name}: only a binary target is driven on the authors' side")
        config = NPTConfig(**bench["config"])
        if config.batch_size is not None:
            raise ValueError(f"{case.name}: only the whole table as one batch is driven on the authors' side")
        from benchmarks.versus.driver import npt_shared_settings

        return {"n_rows": bench["n_rows"], "n_features": bench["n_features"], **npt_shared_settings(config)}
    from tabrepro.models.bishop.config import BiSHopConfig

    # their model is their code's: the thesis/code switches stay theirs
    return authors_bishop_options(BiSHopConfig(), case.batch_size)


def authors_bishop_options(config: Any, batch_size: int) -> dict[str, Any]:
    """A BiSHopConfig's shape and optimisation in the names of the authors' bishop.py arguments."""
    return {
        "batch_size": batch_size,
        "out_len": config.n_decoded,
        "patch_dim": config.patch_size,
        "emb_dim": config.embed_dim,
        "n_agg": config.merge_factor,
        "factor": config.n_pooling,
        "d_model": config.d_model,
        "d_ff": config.ffn_dim,
        "n_heads": config.n_heads,
        "e_layers": config.n_levels,
        "d_layers": 1,  # their default: H + 1 decoder levels, the first on the embedded input
        "dropout": config.dropout,
        "learning_rate": config.lr,
    }


def authors_key(case: Case) -> str:
    """Cases with equal keys time the same authors' run (measured once per round)."""
    return json.dumps({"model": case.model, **authors_settings(case)}, sort_keys=True)


# ------------------------------------------------------------------------------- our side
def _ours_npt(bench_case: dict[str, Any], steps: int, warmup: int, threads: int, device: str) -> dict[str, Any]:
    """benchmarks.steps.npt.run_case on `bench_case` (registered under a name of its own in this
    process's copy of CASES; run in a fresh process, so no other run sees it)."""
    from benchmarks.steps import npt as bench

    bench.CASES["versus"] = bench_case
    return bench.run_case("versus", steps=steps, warmup=warmup, device=device, threads=threads)


def _ours_bishop(
    overrides: dict[str, Any], batch_size: int, steps: int, warmup: int, threads: int, device: str
) -> dict[str, Any]:
    from benchmarks.steps import bishop as bench

    return bench.run_case(
        device=device, threads=threads, steps=steps, warmup=warmup, batch_size=batch_size, overrides=overrides
    )


def run_ours(case: Case, steps: int, warmup: int, threads: int, device: str = "cpu") -> dict[str, Any]:
    """Our side of `case` in a fresh process on `device` ("cpu" or "cuda"), as our benchmark
    measures it; figures in the driver's names (step_s_median, step_s_min, gflop_per_step,
    parameters)."""
    from benchmarks.steps.common import run_in_subprocess

    if case.model == "npt":
        raw = run_in_subprocess(_ours_npt, ours_npt_case(case), steps, warmup, threads, device)
        return raw
    raw = run_in_subprocess(_ours_bishop, dict(case.overrides), case.batch_size, steps, warmup, threads, device)
    return {
        **raw,
        "step_s_median": raw["step_s_wall"],
        "step_s_min": raw["step_s_wall_min"],
        "gflop_per_step": raw["gflop_per_sample"] * raw["batch_size"],
    }


# ------------------------------------------------------------------------------- summaries
def summarise(case: Case, authors_runs: list[dict[str, Any]], our_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of each side's per-run median step, the ratio (ours faster =
    authors' time / ours), achieved GFLOP/s, and samples/s for BiSHop."""
    sides: dict[str, dict[str, Any]] = {}
    for side, runs in (("authors", authors_runs), ("ours", our_runs)):
        step = statistics.median([run["step_s_median"] for run in runs])
        gflop = statistics.median([run["gflop_per_step"] for run in runs])
        figures = {
            "step_s_median": step,
            "step_s_min": min(run["step_s_min"] for run in runs),
            "gflop_per_step": gflop,
            "gflops_per_s": gflop / step,
            "parameters": runs[0].get("parameters"),
            "runs": runs,
        }
        if all("data_s_median" in run for run in runs):  # the authors' data loading, timed apart
            figures["data_s_median"] = statistics.median([run["data_s_median"] for run in runs])
        if case.model == "bishop":
            figures["samples_per_s"] = case.batch_size / step
        sides[side] = figures
    return {
        "case": case.name,
        "model": case.model,
        "description": case.description,
        "overrides": case.overrides,
        "rounds": len(our_runs),
        "authors": sides["authors"],
        "ours": sides["ours"],
        "ratio": ratio(sides["authors"]["step_s_median"], sides["ours"]["step_s_median"]),
    }


def ratio(authors_s: float, ours_s: float) -> float:
    """How many times faster ours is: authors' step time / ours (> 1: ours faster)."""
    return authors_s / ours_s if ours_s > 0 else float("inf")


def round_ratios(summary: dict[str, Any]) -> list[float]:
    """The ratio of each round (the authors' run and ours of the same round): their spread says
    how far one round's figure can be trusted on this machine, which the median alone hides."""
    pairs = zip(summary["authors"]["runs"], summary["ours"]["runs"], strict=True)
    return [ratio(theirs["step_s_median"], ours["step_s_median"]) for theirs, ours in pairs]


def ratio_at_peak(summary: dict[str, Any], peak_gflops: float) -> float:
    """The ratio our step would reach if all of it ran at the machine's matmul peak: the authors'
    time over (our counted GFLOP per step / peak). No code that does our step's arithmetic can
    pass it on this machine, so it tells what part of a speed target is engineering (the gap
    between `ratio` and this bound) and what part only less arithmetic could reach."""
    return ratio(summary["authors"]["step_s_median"], summary["ours"]["gflop_per_step"] / peak_gflops)
