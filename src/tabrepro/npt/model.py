"""The Non-Parametric Transformer network (Kossen et al. 2021, §2 and App. C.3).

Input: the whole table (or a minibatch of rows) as one tensor per attribute plus an (n x d)
mask matrix; output: one prediction per attribute and row (logits for categorical attributes, a
scalar for continuous ones). Blocks alternate attention between datapoints (ABD, over the n rows,
each row flattened to width d*e) and attention between attributes (ABA, over the d attributes of
each row, width e), starting with ABD.

Dropout draws from an explicit `torch.Generator` (see `NPTModel.dropout_generator`) rather than
torch's global generator: the trainer owns, checkpoints and restores that generator, which is
what makes a resumed run bit-identical to an uninterrupted one. It is also ~3x faster on CPU
than `torch.nn.functional.dropout`, whose Bernoulli sampling dominated a CPU step.

CPU speed (the reference NPT-Small step on Breast Cancer is ~8 CPU-s in the authors' code):
fp32 GEMMs go through oneDNN instead of MKL (`Linear`, `batched_matmul`), attention with dropout
has a hand-written backward (`_DropoutAttention`), and masks draw 16 random bits per entry.
None of this changes the mathematics; `NPTConfig.onednn_linear=False` restores plain PyTorch
GEMMs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tabrepro.npt.config import Attribute, NPTConfig

__all__ = [
    "NPTModel",
    "AttentionBlock",
    "Linear",
    "attention",
    "batched_matmul",
    "encode_values",
    "dropout",
    "dropout_mask",
    "keep_mask",
    "DropoutGeneratorMixin",
]


class DropoutSource:
    """Holder of the generator every dropout in one model draws from (None: torch's global one).

    A plain object rather than a module attribute so that all blocks share one generator and
    swapping it (trainer, checkpoint restore) reaches every block at once.
    """

    def __init__(self) -> None:
        self.generator: torch.Generator | None = None


class DropoutGeneratorMixin:
    """`model.dropout_generator`: the generator of the model's `dropout_source`, for the
    trainer to set, checkpoint and restore (NPTModel, BiSHopModel). Mix in before nn.Module."""

    dropout_source: DropoutSource

    @property
    def dropout_generator(self) -> torch.Generator | None:
        return self.dropout_source.generator

    @dropout_generator.setter
    def dropout_generator(self, generator: torch.Generator | None) -> None:
        self.dropout_source.generator = generator


_RANDOM_BITS = 16  # resolution of dropout probabilities: multiples of 2**-16


def keep_mask(shape: Sequence[int], p: float, source: DropoutSource | None, device: torch.device) -> Tensor:
    """Boolean keep-mask: True with probability 1 - p.

    Draws 64 random bits per four entries (int64 `random_` viewed as int16) instead of one float
    per entry: ~40 % less time in the generator, which dominates dropout on CPU. p is rounded
    to a multiple of 2**-16 (0.1 -> 0.100006).
    """
    if p >= 1.0:
        return torch.zeros(tuple(shape), dtype=torch.bool, device=device)
    generator = None if source is None else source.generator
    numel = math.prod(shape)
    words = torch.empty((numel + 3) // 4, dtype=torch.int64, device=device)
    words.random_(-(2**63), None, generator=generator)  # all 64 bits uniform
    bits = words.view(torch.int16)[:numel].view(tuple(shape))
    threshold = -(2 ** (_RANDOM_BITS - 1)) + round(p * 2**_RANDOM_BITS)
    return bits >= threshold


def dropout_mask(x: Tensor, p: float, source: DropoutSource | None, scaled: bool = True) -> Tensor:
    """Keep-mask of x's shape and dtype: 1/(1-p) (or 1 if not `scaled`) with prob. 1-p, else 0."""
    keep = keep_mask(x.shape, p, source, x.device).to(x.dtype)
    if scaled:
        keep.mul_(1.0 / (1.0 - p))
    return keep


def dropout(x: Tensor, p: float, training: bool, source: DropoutSource | None = None) -> Tensor:
    """Inverted dropout drawing from an explicit generator; identity at evaluation or p == 0.

    Multiplying by a float mask is one pass forward and one backward; `torch.where` on a boolean
    mask measured several times slower on CPU.
    """
    if not training or p == 0.0:
        return x
    return x * dropout_mask(x, p, source)


def encode_values(codes: Tensor, attributes: Sequence[Attribute]) -> list[Tensor]:
    """(n, d) codes (class indices / standardised floats) -> one encoded tensor per attribute.

    Categorical: one-hot over its classes; continuous: the value as an (n, 1) column. Codes of
    masked entries are irrelevant (the model zeroes masked values) but must be valid indices.
    """
    if codes.dim() != 2 or codes.shape[1] != len(attributes):
        raise ValueError(f"codes must be (n, {len(attributes)}), got {tuple(codes.shape)}")
    encoded = []
    for j, attribute in enumerate(attributes):
        column = codes[:, j]
        if attribute.is_categorical:
            encoded.append(F.one_hot(column.long(), attribute.n_classes).to(codes.dtype))
        else:
            encoded.append(column.unsqueeze(1))
    return encoded


def _onednn_linear_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


_ONEDNN_LINEAR = _onednn_linear_available()


def _gemm_ready(matrix: Tensor) -> Tensor:
    """A 2-D operand oneDNN reads at full speed: row- or column-major and dense.

    Other layouts (e.g. a head's rows inside a packed QKV tensor) send oneDNN to a reference
    kernel that is ~60x slower, so those are copied first.
    """
    if matrix.is_contiguous() or matrix.t().is_contiguous():
        return matrix
    return matrix.contiguous()


def _onednn_matmul_t(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T (+ bias) through oneDNN, for 2-D operands."""
    return torch.ops.mkldnn._linear_pointwise(_gemm_ready(x), _gemm_ready(weight), bias, "none", [], "")


class _OneDNNLinearFunction(torch.autograd.Function):
    """nn.Linear's math with all three GEMMs (forward, input grad, weight grad) in oneDNN."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        x_2d = _gemm_ready(x.reshape(-1, x.shape[-1]))
        ctx.save_for_backward(x_2d, weight)
        ctx.has_bias = bias is not None
        ctx.lead_shape = x.shape[:-1]
        out = _onednn_matmul_t(x_2d, weight, bias)
        return out.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x_2d, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        grad_2d = _gemm_ready(grad.reshape(-1, grad.shape[-1]))
        if ctx.needs_input_grad[0]:
            grad_x = _onednn_matmul_t(grad_2d, weight.t()).view(*ctx.lead_shape, weight.shape[1])
        if ctx.needs_input_grad[1]:
            grad_w = _onednn_matmul_t(grad_2d.t(), x_2d.t())
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_2d.sum(0)
        return grad_x, grad_w, grad_b


class Linear(nn.Linear):
    """nn.Linear (same parameters, init and state dict) with an optional oneDNN CPU path.

    PyTorch runs fp32 Linear layers on MKL's sgemm, which on AMD CPUs uses its AVX2 kernels;
    oneDNN uses AVX-512 and measured ~2.1x faster on this project's CPU. Only the GEMM library
    changes (results differ in the last bits). Used for fp32 CPU tensors outside autocast when
    `NPTConfig.onednn_linear` is set; everything else takes the ordinary F.linear path.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, onednn: bool = False):
        super().__init__(in_features, out_features, bias=bias)
        self.onednn = onednn and _ONEDNN_LINEAR

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias, self.onednn)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None, onednn: bool) -> Tensor:
    """F.linear, through oneDNN when asked and applicable (fp32 CPU tensors, no autocast)."""
    if (
        onednn
        and _ONEDNN_LINEAR
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
    ):
        return _OneDNNLinearFunction.apply(x, weight, bias)
    return F.linear(x, weight, bias)


_MAX_ONEDNN_MATRICES = 64  # above this many small matrices, one batched MKL call is faster


def batched_matmul(a: Tensor, b: Tensor, onednn: bool) -> Tensor:
    """a @ b over the last two dimensions; one oneDNN GEMM per matrix when there are few.

    Attention between datapoints multiplies n_heads large matrices (e.g. 8 of 569 x 569): there
    oneDNN's AVX-512 GEMM beats MKL's batched one ~2x on AMD CPUs. Attention between attributes
    has n * n_heads tiny matrices, where a single batched call is better.
    """
    lead = a.shape[:-2]
    count = math.prod(lead)
    if (
        onednn
        and _ONEDNN_LINEAR
        and a.device.type == "cpu"
        and a.dtype == torch.float32
        and b.dtype == torch.float32
        and count <= _MAX_ONEDNN_MATRICES
        and not torch.is_autocast_enabled("cpu")
    ):
        a3 = a.reshape(count, *a.shape[-2:])
        b3 = b.reshape(count, *b.shape[-2:])
        out = torch.stack([_onednn_matmul_t(a3[i], b3[i].t()) for i in range(count)])
        return out.reshape(*lead, a.shape[-2], b.shape[-1])
    return torch.matmul(a, b)


class _DropoutAttention(torch.autograd.Function):
    """softmax(q k^T) with dropout on the weights, times v; q arrives already scaled.

    Written out (rather than left to autograd) so that backward keeps only the softmax output and
    a boolean keep-mask (the dropped weights are recomputed), i.e. ~1.25 instead of ~3 L x L
    tensors per head, and so that the six GEMMs can go through `batched_matmul`.
    """

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, keep: Tensor, p: float, onednn: bool) -> Tensor:
        dtype = q.dtype
        scores = batched_matmul(q, k.transpose(-2, -1), onednn)
        weights = torch.softmax(scores, dim=-1).to(dtype)
        del scores
        dropped = torch.where(keep, weights, 0.0)
        out = batched_matmul(dropped, v.to(dtype), onednn).mul_(1.0 / (1.0 - p))
        ctx.save_for_backward(q, k, v, weights, keep)
        ctx.p, ctx.onednn = p, onednn
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, weights, keep = ctx.saved_tensors
        dtype, onednn = weights.dtype, ctx.onednn
        grad = grad_out.to(dtype) * (1.0 / (1.0 - ctx.p))
        dropped = torch.where(keep, weights, 0.0)
        grad_v = batched_matmul(dropped.transpose(-2, -1), grad, onednn)
        del dropped
        grad_weights = batched_matmul(grad, v.to(dtype).transpose(-2, -1), onednn)
        grad_weights.masked_fill_(~keep, 0.0)
        grad_scores = torch._softmax_backward_data(grad_weights, weights, -1, dtype)
        del grad_weights
        grad_q = batched_matmul(grad_scores, k.to(dtype), onednn)
        grad_k = batched_matmul(grad_scores.transpose(-2, -1), q, onednn)
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), None, None, None


def attention(
    q: Tensor, k: Tensor, v: Tensor, scale: float, p_dropout: float, source: DropoutSource | None, onednn: bool = False
) -> Tensor:
    """Scaled dot-product attention over (..., L, head_dim); dropout on the weights if p > 0.

    Without dropout (evaluation) this is `F.scaled_dot_product_attention`. With dropout the
    weights must be materialised and the mask must come from our generator (SDPA's dropout draws
    from torch's global one), hence `_DropoutAttention`.
    """
    if p_dropout == 0.0:
        return F.scaled_dot_product_attention(q, k, v, scale=scale)
    keep = keep_mask((*q.shape[:-1], k.shape[-2]), p_dropout, source, q.device)
    return _DropoutAttention.apply(q * scale, k, v, keep, p_dropout, onednn)


class AttentionBlock(nn.Module):
    """Pre-LN multi-head self-attention block of NPT (eq. 4-5) over dimension 1 of (B, L, W).

        Res(H)  = H W_res + MHSelfAtt(LN(H))
        MHSA(H) = Res(H) + rFF(LN(Res(H)))

    With `attend=False` the attention term is dropped (Res(H) = H W_res): a row-wise block used by
    the "no attention between datapoints" ablation, keeping parameters and depth comparable.
    """

    def __init__(self, width: int, config: NPTConfig, source: DropoutSource, attend: bool = True):
        super().__init__()
        if attend and width % config.n_heads:
            raise ValueError(f"block width {width} is not divisible by {config.n_heads} heads")
        self.width = width
        self.n_heads = config.n_heads
        self.attend = attend
        self.kv_from_normalised = config.kv_from_normalised
        head_dim = width // config.n_heads
        scale_dim = head_dim if config.attention_scale == "per_head" else width
        self.scale = 1.0 / math.sqrt(scale_dim)
        self.p_attention = config.attention_dropout
        self.p_hidden = config.hidden_dropout
        self._source = source

        fast = config.onednn_linear
        if attend:
            self.ln_attention = nn.LayerNorm(width, eps=config.layer_norm_eps)
            # Q, K and V projections packed into one matrix: one GEMM instead of three when all
            # three read the same (normalised) input.
            self.qkv = Linear(width, 3 * width, onednn=fast)
            self.out = Linear(width, width, onednn=fast)  # W^O, mixes the heads
        self.residual = Linear(width, width, bias=config.residual_bias, onednn=fast)  # W_res
        self.ln_rff = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.rff_in = Linear(width, config.rff_expansion * width, onednn=fast)
        self.rff_out = Linear(config.rff_expansion * width, width, onednn=fast)

    def forward(self, h: Tensor) -> Tensor:
        res = self.residual(h)
        if self.attend:
            res = res + self._self_attention(h)
        hidden = F.gelu(self.rff_in(self.ln_rff(res)))
        hidden = dropout(hidden, self.p_hidden, self.training, self._source)
        return res + dropout(self.rff_out(hidden), self.p_hidden, self.training, self._source)

    def _self_attention(self, h: Tensor) -> Tensor:
        batch, length, width = h.shape
        normed = self.ln_attention(h)
        if self.kv_from_normalised:
            qkv = self.qkv(normed)
        else:  # authors' code: keys and values from the un-normalised input
            w, b = self.qkv.weight, self.qkv.bias
            fast = self.qkv.onednn
            qkv = torch.cat([linear(normed, w[:width], b[:width], fast), linear(h, w[width:], b[width:], fast)], dim=-1)
        heads = qkv.view(batch, length, 3, self.n_heads, width // self.n_heads)
        q, k, v = heads.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, L, head_dim)
        p_dropout = self.p_attention if self.training else 0.0
        attended = attention(q, k, v, self.scale, p_dropout, self._source, self.qkv.onednn)
        merged = attended.transpose(1, 2).reshape(batch, length, width)
        return dropout(self.out(merged), self.p_hidden, self.training, self._source)


class NPTModel(DropoutGeneratorMixin, nn.Module):
    """Non-Parametric Transformer over a table described by `attributes` (target last).

    forward(values, mask): `values[j]` is attribute j encoded ((n, n_classes) one-hot or (n, 1)
    continuous), `mask` is (n, d) with 1 = masked (hidden or genuinely missing). Returns a list of
    d tensors: (n, n_classes) logits or (n, 1) predictions.
    """

    def __init__(self, attributes: Sequence[Attribute], config: NPTConfig):
        super().__init__()
        if len(attributes) < 2:
            raise ValueError("NPT needs at least one feature and the target attribute")
        self.attributes: tuple[Attribute, ...] = tuple(attributes)
        self.config = config
        d, e = len(self.attributes), config.embed_dim
        self.n_attributes = d
        self.embed_dim = e
        self.dropout_source = DropoutSource()

        # Input embedding (App. C.3.1): [value, mask bit] -> e, separately per attribute.
        self.in_maps = nn.ModuleList(nn.Linear(a.width + 1, e) for a in self.attributes)
        self.index_embedding = nn.Embedding(d, e)
        self.type_embedding = nn.Embedding(2, e)  # 0 continuous, 1 categorical
        type_ids = torch.tensor([int(a.is_categorical) for a in self.attributes])
        self.register_buffer("_type_ids", type_ids, persistent=False)
        self.register_buffer("_index_ids", torch.arange(d), persistent=False)

        blocks, kinds = [], []
        for layer in range(config.n_layers):
            if layer % 2 == 0:  # ABD, width d*e, attention over rows
                if config.datapoint_attention == "identity":
                    continue
                attend = config.datapoint_attention == "full"
                blocks.append(AttentionBlock(d * e, config, self.dropout_source, attend=attend))
                kinds.append("abd")
            else:  # ABA, width e, attention over the attributes of each row
                blocks.append(AttentionBlock(e, config, self.dropout_source))
                kinds.append("aba")
        self.blocks = nn.ModuleList(blocks)
        self.block_kinds: tuple[str, ...] = tuple(kinds)

        # Output (App. C.3.2): e -> logits / scalar, separately per attribute.
        self.out_maps = nn.ModuleList(nn.Linear(e, a.width) for a in self.attributes)

    def forward(self, values: Sequence[Tensor], mask: Tensor) -> list[Tensor]:
        d, e = self.n_attributes, self.embed_dim
        if len(values) != d or mask.dim() != 2 or mask.shape[1] != d:
            raise ValueError(f"expected {d} attribute tensors and an (n, {d}) mask")
        n = mask.shape[0]
        hidden = mask.bool()
        dtype = self.index_embedding.weight.dtype
        columns = []
        for j, (value, in_map) in enumerate(zip(values, self.in_maps)):
            column_hidden = hidden[:, j : j + 1]
            # Masked values are zeroed here as well as by the masking code: the model never sees
            # a masked entry's value (not even a NaN), whatever the caller passed.
            value = value.to(dtype).masked_fill(column_hidden, 0.0)
            columns.append(in_map(torch.cat([value, column_hidden.to(dtype)], dim=1)))
        h = torch.stack(columns, dim=1)  # (n, d, e)
        h = h + (self.index_embedding(self._index_ids) + self.type_embedding(self._type_ids))
        h = dropout(h, self.config.embedding_dropout, self.training, self.dropout_source)

        for kind, block in zip(self.block_kinds, self.blocks):
            if kind == "abd":
                h = block(h.reshape(1, n, d * e)).reshape(n, d, e)
            else:
                h = block(h)

        h = dropout(h, self.config.embedding_dropout, self.training, self.dropout_source)
        # unbind (not h[:, j]): its backward stacks the d gradients instead of filling a full-size
        # zero tensor per attribute.
        return [out_map(column) for column, out_map in zip(h.unbind(1), self.out_maps)]

    def forward_codes(self, codes: Tensor, mask: Tensor) -> list[Tensor]:
        """forward() on (n, d) codes, one-hot encoding categorical attributes on the way."""
        return self.forward(encode_values(codes, self.attributes), mask)
