"""BiSHop configuration: architecture, ablation switches, optimisation and the training loop.

Sources, in order of precedence:
1. the thesis (Xu 2024, §3 and §4.1): G = 32, L = 8, C = 10, H = 3, r = 4, S = 24, dropout 0.2,
   LR 5e-5, Adam (0.9, 0.999), ReduceLROnPlateau (factor 0.1, eps 1e-6), early stopping with
   patience 20 on the validation loss, at most 200 epochs;
2. where the thesis is silent, the authors' public code (MAGICS-LAB/BiSHop, `bishop.py` command
   line defaults and `exp/exp_bishop.py`): D_model 256, FFN 512, 4 heads, batch size 32,
   gradient-norm clipping at 1, an MLP head with hidden widths 4x, 2x, 1x its input, a learnable
   encoder positional embedding, shared categorical part of width G/8;
3. otherwise our own choice, said so in the field's comment.

Where thesis and code disagree the thesis is the default and the code's choice is an option:
`decoder_input_level` (the code's decoder has H + 1 levels, the first attending to the embedded
input; the thesis has H), `optimizer="adamw"` (the code uses AdamW with weight decay 0.01),
`early_stopping_patience` (code 40).

Table 4.2 / 4.3 ablations are switches here: `categorical_encoding="onehot"`,
`numerical_encoding="raw"`, `patch_size=1` (no patching), `decoder=False`, `block="mlp"`,
`attention="hopfield"` / `"attention"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tabrepro.nn.config import ConfigDictMixin, check_onednn_setting

__all__ = ["BiSHopConfig", "RESUME_NEUTRAL_FIELDS"]


# Integer settings that must be at least 1 (validate checks them; the model interface declares
# the same ranges to the configuration guard, tabrepro.models.bishop.interface).
POSITIVE_FIELDS = (
    "embed_dim",
    "patch_size",
    "d_model",
    "n_heads",
    "ffn_dim",
    "n_pooling",
    "n_levels",
    "merge_factor",
    "n_decoded",
    "block_mlp_hidden",
    "batch_size",
    "eval_batch_size",
    "max_epochs",
    "checkpoint_every_epochs",
    "early_stopping_patience",
)


@dataclass
class BiSHopConfig(ConfigDictMixin):
    """Everything that determines a BiSHop training run.

    Equal configs, equal data and equal thread counts give bit-identical CPU results; the config
    is stored in every checkpoint and checked on resume (to_dict / from_dict / replace come from
    ConfigDictMixin).
    """

    # ---------------------------------------------------------------- embedding (§3.1)
    embed_dim: int = 32  # G: PLE bins per numerical feature = categorical embedding width
    shared_embed_dim: int | None = None  # G_shared; None = G // 8 (authors' share_div = 8)
    # "embedding": label-encoded, [shared column part | per-category part] (thesis).
    # "onehot" (Table 4.2 ablation): each category's 0/1 indicator column becomes a feature of its
    # own and goes through the numerical encoding, i.e. the model sees the one-hot matrix.
    categorical_encoding: Literal["embedding", "onehot"] = "embedding"
    # "ple": piecewise-linear encoding on G training-quantile bins (thesis).
    # "raw" (Table 4.2 ablation): the standardised value itself, repeated over the G slots (the
    # patch projection then acts as a learned linear embedding of the raw value).
    numerical_encoding: Literal["ple", "raw"] = "ple"
    patch_size: int = 8  # L (stride = size); 1 = the "no patching" ablation

    # ---------------------------------------------------------------- BiSHop blocks (§3.2-3.3)
    d_model: int = 256  # thesis silent; authors' code default
    n_heads: int = 4  # thesis silent; authors' code default; head width D_model // n_heads
    ffn_dim: int = 512  # thesis silent; authors' code default (d_ff)
    n_pooling: int = 10  # C learnable pooling vectors per patch position
    n_levels: int = 3  # H encoder levels (and decoder levels)
    merge_factor: int = 4  # r adjacent patches merged per coarser level
    # Authors' code (and Crossformer, which it follows): the first encoder level works at the
    # patch resolution and merging starts at level 2. True merges before every level.
    merge_first_level: bool = False
    n_decoded: int = 24  # S decoded representations per feature (rounded up to a multiple of L)
    decoder: bool = True  # False = "no decoder" ablation: per-feature linear map of the last level
    # True: H + 1 decoder levels, the first cross-attending to the embedded input (authors' code);
    # False: H levels cross-attending to the H encoder levels (thesis §3.3).
    decoder_input_level: bool = False
    decoder_ffn_dim: int | None = None  # decoder MLP hidden width; None = d_model (authors' code)
    # "bishop": BiSHopModule; "mlp" (Table 4.2 ablation): a token-wise residual MLP block of
    # hidden width `block_mlp_hidden` in place of every BiSHopModule.
    block: Literal["bishop", "mlp"] = "bishop"
    block_mlp_hidden: int = 256
    # "gsh": generalised sparse Hopfield (α-entmax, learnable α per layer);
    # "hopfield": dense modern Hopfield (softmax, same W_Q W_K, W_K W_V structure, β below);
    # "attention": scaled dot-product attention with independent W_V (Table 4.3).
    attention: Literal["gsh", "hopfield", "attention"] = "gsh"
    beta: float | None = None  # score scale β; None = 1/sqrt(d_head) (authors' code)
    learn_beta: bool = False  # "hopfield" only: β is a learned parameter (init as above)
    alpha_init: float = 1.5  # initial α of every GSH layer (α = 1 + sigmoid(θ), θ = 0); ours
    entmax_solver: Literal["newton", "bisect"] = "newton"  # same root to float precision
    dropout: float = 0.2  # attention weights and residual branches
    layer_norm_eps: float = 1e-5  # PyTorch default
    head_hidden: tuple[float, ...] = (4.0, 2.0, 1.0)  # head widths as multiples of its input
    head_dropout: float = 0.2  # authors' code
    # Speed option, changes the noise: the decoder's first BiSHopModule, whose input E_pos is the
    # same for every row, runs once per batch also in training, so the rows of a batch share
    # its dropout masks (~16 % fewer FLOPs at the defaults). Off: per-row masks, as the
    # authors' code. (In evaluation it always runs once: without dropout that is exact.)
    share_decoder_input: bool = False
    # Implementation only: fp32 CPU Linear layers through oneDNN (True) or MKL (False); last-bit
    # differences. "auto": oneDNN where the CPU runs AVX-512 (~2x faster GEMMs there), MKL on
    # AVX2-only CPUs (faster there). See tabrepro.nn.kernels.use_onednn.
    onednn_linear: bool | Literal["auto"] = "auto"
    # Speed option, changes the numerics: bfloat16 autocast for the forward pass (matrix
    # products in bf16, ~2.2x faster GEMMs on CPUs with AVX512-BF16; entmax stays fp32).
    bf16_autocast: bool = False

    # ---------------------------------------------------------------- optimisation (§4.1)
    lr: float = 5e-5
    optimizer: Literal["adam", "adamw"] = "adam"
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0  # adam: none (thesis); with "adamw" the code's default is 0.01
    grad_clip_norm: float | None = 1.0  # authors' code; None = no clipping
    lr_factor: float = 0.1
    lr_patience: int = 10  # ReduceLROnPlateau patience: thesis/code silent -> PyTorch default
    lr_eps: float = 1e-6

    # ---------------------------------------------------------------- training loop
    batch_size: int = 32  # authors' code
    eval_batch_size: int = 256  # ours; affects speed and memory only (and last-bit rounding)
    max_epochs: int = 200
    # At most this many batches per epoch (the epoch's other shuffled rows are skipped); None:
    # every training row once. Not the thesis': for benchmarks on tables with millions of rows.
    batches_per_epoch: int | None = None
    early_stopping_patience: int = 20  # epochs without a lower validation loss
    restore_best: bool = True  # evaluate the weights of the best validation epoch (authors)
    checkpoint_every_epochs: int = 1
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    deterministic: bool = True  # torch.use_deterministic_algorithms during fit
    # Memory option, changes no result: the best-so-far weights live in a file of the checkpoint
    # directory instead of in RAM (and in every state file). Needs a checkpoint directory.
    best_weights_on_disk: bool = False

    def __post_init__(self) -> None:
        self.betas = tuple(float(b) for b in self.betas)  # type: ignore[assignment]
        self.head_hidden = tuple(float(h) for h in self.head_hidden)
        self.validate()

    # ---------------------------------------------------------------- derived sizes
    @property
    def shared_width(self) -> int:
        return self.embed_dim // 8 if self.shared_embed_dim is None else self.shared_embed_dim

    @property
    def head_dim(self) -> int:
        """Width of one attention head: D_model // n_heads (the authors' code)."""
        return self.d_model // self.n_heads

    @property
    def n_patches(self) -> int:
        """P = ceil(G / L) patches per feature (the G axis is zero-padded to P L)."""
        return math.ceil(self.embed_dim / self.patch_size)

    @property
    def n_decoder_patches(self) -> int:
        return math.ceil(self.n_decoded / self.patch_size)

    @property
    def decoded_width(self) -> int:
        """S rounded up to a multiple of L: decoded values per feature fed to the head."""
        return self.n_decoder_patches * self.patch_size

    def level_patches(self) -> list[int]:
        """Patches per feature at encoder levels 1..H."""
        counts, current = [], self.n_patches
        for level in range(self.n_levels):
            if level > 0 or self.merge_first_level:
                current = math.ceil(current / self.merge_factor)
            counts.append(current)
        return counts

    def validate(self) -> None:
        """Reject settings that would silently do something else than asked."""
        if self.batches_per_epoch is not None and self.batches_per_epoch < 1:
            raise ValueError(f"batches_per_epoch must be positive or None, got {self.batches_per_epoch}")
        for name in POSITIVE_FIELDS:
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.d_model < self.n_heads:
            raise ValueError(f"d_model {self.d_model} is smaller than n_heads {self.n_heads}")
        if self.categorical_encoding == "embedding" and not 0 <= self.shared_width < self.embed_dim:
            raise ValueError("shared_embed_dim must lie in [0, embed_dim)")
        if not 1.0 < self.alpha_init < 2.0:
            raise ValueError("alpha_init must lie strictly inside (1, 2)")
        for name in ("dropout", "head_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie in [0, 1)")
        if self.beta is not None and self.beta <= 0:
            raise ValueError("beta must be positive")
        if self.lr <= 0 or not 0 < self.lr_factor < 1:
            raise ValueError("lr must be positive and lr_factor in (0, 1)")
        if self.lr_patience < 0:
            raise ValueError(f"lr_patience must be >= 0, got {self.lr_patience}")
        if self.grad_clip_norm is not None and self.grad_clip_norm <= 0:
            raise ValueError("grad_clip_norm must be positive or None")
        if any(h <= 0 for h in self.head_hidden):
            raise ValueError("head_hidden multiples must be positive")
        choices = {
            "categorical_encoding": ("embedding", "onehot"),
            "numerical_encoding": ("ple", "raw"),
            "block": ("bishop", "mlp"),
            "attention": ("gsh", "hopfield", "attention"),
            "entmax_solver": ("newton", "bisect"),
            "optimizer": ("adam", "adamw"),
            "device": ("auto", "cpu", "cuda"),
        }
        check_onednn_setting(self.onednn_linear)
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")


# The layout of the trainer's state file (its `format`); part of the key of a job's resumable state,
# so a checkout that changes it resumes nothing written under another.
CHECKPOINT_FORMAT = 1

# Fields that change neither the computation nor its result: a checkpoint written under one value
# may be resumed under another.
RESUME_NEUTRAL_FIELDS: frozenset[str] = frozenset({"checkpoint_every_epochs", "best_weights_on_disk"})
