"""NPT configuration: architecture, masking, optimisation and the training loop.

All defaults follow the NPT paper (Kossen et al., NeurIPS 2021). Where
the paper and the authors' public code disagree, the paper is the default and the code's choice
is a named option (`attention_scale`, `kv_from_normalised`, `grad_clip`, `residual_bias`).
Where the paper is silent, the choice is ours and says so in the field's comment.

Imports no torch: the model registry (hence every Snakemake start) loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Self

from tabrepro.nn.config import ConfigDictMixin, check_onednn_setting

__all__ = ["NPTConfig", "RESUME_NEUTRAL_FIELDS"]


@dataclass
class NPTConfig(ConfigDictMixin):
    """Everything that determines an NPT training run (model, masking, optimiser, loop).

    Two runs with equal configs, equal data and equal thread counts give bit-identical CPU
    results; the config is stored in every checkpoint and checked on resume (to_dict /
    from_dict / replace come from ConfigDictMixin).
    """

    # ---------------------------------------------------------------- architecture
    embed_dim: int = 64  # e, per attribute (NPT-Base: 64)
    n_layers: int = 8  # ABD and ABA blocks together, alternating, starting with ABD
    n_heads: int = 8
    rff_expansion: int = 4  # hidden width of the rFF = 4 x block width (paper)
    attention_dropout: float = 0.1  # on attention weights (App. C.2.1)
    hidden_dropout: float = 0.1  # after linear layers (attention output, rFF)
    embedding_dropout: float = 0.1  # on input and output embeddings
    # Paper: softmax(QK^T / sqrt(d_head)). Authors' code: divides by sqrt(full block width).
    attention_scale: Literal["per_head", "full_width"] = "per_head"
    # Paper (eq. 4): MHSelfAtt(LN(H)), so queries, keys and values all come from LN(H).
    # Authors' code: only queries from LN(H), keys and values from the un-normalised H.
    kv_from_normalised: bool = True
    # Paper: H.W_res is a plain matrix product. Authors' code: a Linear layer with a bias.
    residual_bias: bool = False
    # Ablation switch: "full" = NPT; "rowwise" = ABD blocks keep W_res and the row-wise rFF but
    # drop attention between datapoints; "identity" = ABD blocks removed. Extension (not in the
    # paper): "isab" = the Set Transformer's induced set attention, O(n m) instead of O(n^2):
    # n_inducing learned points attend to the rows, then the rows attend to those m summaries.
    datapoint_attention: Literal["full", "rowwise", "identity", "isab"] = "full"
    n_inducing: int = 32  # m, used by datapoint_attention="isab" only
    layer_norm_eps: float = 1e-5  # paper silent; PyTorch default
    # Implementation only: fp32 Linear layers on CPU through oneDNN (True) or MKL (False); same
    # math, last-bit differences. "auto": oneDNN where the CPU runs AVX-512 (faster GEMMs there),
    # MKL on AVX2-only CPUs (faster there). See tabrepro.nn.kernels.use_onednn.
    onednn_linear: bool | Literal["auto"] = "auto"
    # Implementation only: keep only each block's input for the backward pass and recompute the
    # block's activations there, replaying its dropout masks (tabrepro.nn.dropout.recomputed).
    # Same results; about a third more compute for several times less activation memory, so
    # larger full-batch tables fit (python -m benchmarks.steps.npt_capacity --recompute-blocks).
    recompute_blocks: bool = False

    # ---------------------------------------------------------------- masking / objective
    p_feature: float = 0.15  # stochastic feature masking rate
    p_target: float = 1.0  # stochastic target masking rate (1 = every training target hidden)
    p_randomise: float = 0.1  # of the selected entries: randomised instead of masked
    # Semi-supervised mode: are feature entries of validation/test rows also masked and
    # reconstructed? The spec says they "may be"; we do, as the authors' code does.
    feature_mask_non_train: bool = True
    # lambda: "cosine" anneals 1 -> 0 over training; a float keeps it fixed. With
    # p_feature == 0 lambda is always 0 (nothing to reconstruct; Income setting).
    feature_loss_weight: Literal["cosine"] | float = "cosine"

    # ---------------------------------------------------------------- optimisation
    lr: float = 1e-3
    lamb_betas: tuple[float, float] = (0.9, 0.999)
    lamb_eps: float = 1e-6
    weight_decay: float = 0.0  # paper silent; none
    lookahead_alpha: float = 0.5
    lookahead_k: int = 6
    lr_schedule: Literal["flat_cosine", "cosine_cyclic", "polynomial", "constant"] = "flat_cosine"
    flat_fraction: float = 0.7  # NPT-Base 70 %, NPT-Small 50 %
    n_cycles: int = 2  # cosine_cyclic
    min_lr: float = 1e-7  # cosine_cyclic floor and polynomial end value
    warmup_fraction: float = 0.01  # polynomial (Forest Cover: 1 %)
    poly_power: float = 1.0  # polynomial; paper silent, linear decay
    # Paper: clip the global gradient norm at 1. Authors' code: clamp each gradient entry to
    # [-1, 1] ("value").
    grad_clip: Literal["norm", "value", "none"] = "norm"
    grad_clip_threshold: float = 1.0

    # ---------------------------------------------------------------- training loop
    max_steps: int = 2000  # optimiser steps (full batch: one step per epoch)
    batch_size: int | None = None  # None = whole table in one batch
    stratify_batches: bool = False  # class-stratified training rows per minibatch
    semi_supervised: bool = True  # validation/test rows in the training input
    eval_every_epochs: int = 5  # paper silent
    checkpoint_every_steps: int | None = None  # None = no periodic checkpoints
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    bf16_autocast: bool = False  # bfloat16 autocast for the forward pass
    deterministic: bool = True  # torch.use_deterministic_algorithms during fit (CPU)
    # Memory option, changes no result: the best-so-far weights live in a file of the checkpoint
    # directory instead of in RAM (and in every state file): a parameter-sized copy fewer at the
    # peak (2.4 GiB for NPT-Base on Forest Cover). Needs a checkpoint directory.
    best_weights_on_disk: bool = False

    def __post_init__(self) -> None:
        self.lamb_betas = tuple(float(b) for b in self.lamb_betas)  # type: ignore[assignment]
        self.validate()

    def validate(self) -> None:
        """Reject settings that would silently do something else than asked."""
        if self.n_layers < 1 or self.embed_dim < 1 or self.n_heads < 1:
            raise ValueError("n_layers, embed_dim and n_heads must be positive")
        if self.embed_dim % self.n_heads:
            raise ValueError(f"embed_dim {self.embed_dim} is not divisible by n_heads {self.n_heads}")
        if self.n_inducing < 1:
            raise ValueError("n_inducing must be positive")
        for name in (
            "attention_dropout",
            "hidden_dropout",
            "embedding_dropout",
            "p_feature",
            "p_target",
            "p_randomise",
            "flat_fraction",
            "warmup_fraction",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {value}")
        for name in ("attention_dropout", "hidden_dropout", "embedding_dropout"):
            if getattr(self, name) >= 1.0:
                raise ValueError(f"{name} must be < 1")
        if self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be positive or None")
        if self.lookahead_k < 1 or not 0.0 < self.lookahead_alpha <= 1.0:
            raise ValueError("lookahead_k must be >= 1 and lookahead_alpha in (0, 1]")
        if self.eval_every_epochs < 1:
            raise ValueError("eval_every_epochs must be >= 1")
        if self.checkpoint_every_steps is not None and self.checkpoint_every_steps < 1:
            raise ValueError("checkpoint_every_steps must be positive or None")
        if self.n_cycles < 1:
            raise ValueError("n_cycles must be >= 1")
        if not isinstance(self.feature_loss_weight, str):
            if not 0.0 <= float(self.feature_loss_weight) <= 1.0:
                raise ValueError("a fixed feature_loss_weight must lie in [0, 1]")
        elif self.feature_loss_weight != "cosine":
            raise ValueError(f"unknown feature_loss_weight {self.feature_loss_weight!r}")
        check_onednn_setting(self.onednn_linear)
        if self.grad_clip != "none" and self.grad_clip_threshold <= 0:
            raise ValueError("grad_clip_threshold must be positive")

    # ---------------------------------------------------------------- presets
    @classmethod
    def base(cls, **overrides: Any) -> Self:
        """NPT-Base (App. C.1.1): 8 layers, 8 heads, e = 64, p_feature 0.15, LR 1e-3, flat 70 %."""
        return cls(**overrides)

    @classmethod
    def small(cls, **overrides: Any) -> Self:
        """NPT-Small (App. C.1.2): e = 128, flat 50 %, full batch, p_target 1."""
        settings: dict[str, Any] = {"embed_dim": 128, "flat_fraction": 0.5, "batch_size": None, "p_target": 1.0}
        settings.update(overrides)
        return cls(**settings)


# The layout of the trainer's state file (its `format`); part of the key of a job's resumable state,
# so a checkout that changes it resumes nothing written under another.
CHECKPOINT_FORMAT = 1

# Fields that change neither the computation nor its result: a checkpoint written under one value
# may be resumed under another.
RESUME_NEUTRAL_FIELDS: frozenset[str] = frozenset({"checkpoint_every_steps", "best_weights_on_disk"})
