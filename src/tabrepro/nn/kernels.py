"""Fast CPU kernels of the deep models: fp32 GEMMs through oneDNN (`Linear`, `linear`,
`batched_matmul`) and attention with dropout and a hand-written backward (`attention`).

PyTorch runs fp32 matrix products on MKL's sgemm, which on AMD CPUs uses its AVX2 kernels; oneDNN
uses AVX-512 where the CPU has it. On an AVX-512 CPU oneDNN's square products are the faster ones
and the models' whole training steps take the same time through either; on a CPU with AVX2 only
MKL's GEMMs are faster and so are the training steps through them. So the models' default
`onednn_linear="auto"` takes oneDNN only where torch runs AVX-512 kernels (`use_onednn`); True and
False force one library (docs/speed.md, "Which GEMM library"; `python -m benchmarks.versus`
measures it). None of this changes the mathematics (results differ in the last bits). Used by NPT
(tabrepro.models.npt.model) and BiSHop (tabrepro.models.bishop.model)."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tabrepro.nn.dropout import DropoutSource, keep_mask, mask_values

__all__ = ["use_onednn", "Linear", "linear", "batched_matmul", "attention"]


def _onednn_linear_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


_ONEDNN_LINEAR = _onednn_linear_available()


def use_onednn(setting: bool | Literal["auto"]) -> bool:
    """Whether a network whose config says `onednn_linear=setting` asks for the oneDNN path:
    True = oneDNN, False = MKL (plain PyTorch), "auto" = oneDNN where it is the faster one.

    "auto" follows the instruction set torch's own CPU kernels run with (AVX512 / AVX2 / ...;
    `ATEN_CPU_CAPABILITY` can hold it lower): oneDNN's fp32 GEMMs gain over MKL's with AVX-512 and
    lose with AVX2 only. The choice is per machine, like the bits of the results it changes.
    """
    if setting == "auto":
        return torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    return bool(setting)


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
    oneDNN uses AVX-512 where there is one (see the module docstring). Only the GEMM library
    changes (results differ in the last bits). Used for fp32 CPU tensors outside autocast when
    the network's config asks for it (`use_onednn`); everything else takes the ordinary F.linear
    path.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, onednn: bool = False):
        super().__init__(in_features, out_features, bias=bias)
        self.onednn = onednn and _ONEDNN_LINEAR

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias, self.onednn)


def _onednn_applies(onednn: bool, *operands: Tensor) -> bool:
    """Whether the oneDNN path is asked for and can run: fp32 CPU operands, no autocast."""
    return (
        onednn
        and _ONEDNN_LINEAR
        and operands[0].device.type == "cpu"
        and all(t.dtype == torch.float32 for t in operands)
        and not torch.is_autocast_enabled("cpu")
    )


def linear(x: Tensor, weight: Tensor, bias: Tensor | None, onednn: bool) -> Tensor:
    """F.linear, through oneDNN when asked and applicable (fp32 CPU tensors, no autocast)."""
    if _onednn_applies(onednn, x, weight):
        return _OneDNNLinearFunction.apply(x, weight, bias)
    return F.linear(x, weight, bias)


_MAX_ONEDNN_MATRICES = 64  # above this many small matrices, one batched MKL call is faster


def batched_matmul(a: Tensor, b: Tensor, onednn: bool) -> Tensor:
    """a @ b over the last two dimensions; one oneDNN GEMM per matrix when there are few.

    Attention between datapoints multiplies n_heads large matrices (e.g. 8 of 569 x 569): there
    oneDNN's AVX-512 GEMM, one matrix at a time, is faster than MKL's batched one on an AVX-512
    CPU. Attention between attributes has n * n_heads tiny matrices, where a single batched call
    is better.
    """
    lead = a.shape[:-2]
    count = math.prod(lead)
    if count <= _MAX_ONEDNN_MATRICES and _onednn_applies(onednn, a, b):
        a3 = a.reshape(count, *a.shape[-2:])
        b3 = b.reshape(count, *b.shape[-2:])
        out = torch.stack([_onednn_matmul_t(a3[i], b3[i].t()) for i in range(count)])
        return out.reshape(*lead, a.shape[-2], b.shape[-1])
    return torch.matmul(a, b)


def _product(a: Tensor, b: Tensor, onednn: bool) -> Tensor:
    """a @ b over the last two dimensions, where b is narrow (a head's width of columns).

    With few matrices this is `batched_matmul`. With many tiny ones (attention between the
    attributes of each row: thousands of 31 x 31 by 31 x 4 products) the batched kernel is several
    times faster computing (b^T a^T)^T with b^T dense and a^T a strided view of a than a @ b
    itself, so that is what runs; the result is a transposed view.
    """
    lead, rows, cols = a.shape[:-2], a.shape[-2], b.shape[-1]
    if math.prod(lead) <= _MAX_ONEDNN_MATRICES and _onednn_applies(onednn, a, b):
        return batched_matmul(a, b, onednn)
    b_t = b.transpose(-2, -1).reshape(-1, cols, b.shape[-2])
    a_t = a.reshape(-1, rows, a.shape[-1]).transpose(1, 2)
    return torch.bmm(b_t, a_t).view(*lead, cols, rows).transpose(-2, -1)


def _scores(a: Tensor, b: Tensor, onednn: bool) -> Tensor:
    """a @ b^T over the last two dimensions (both narrow: rows x a head's width).

    With many tiny matrices, b^T is made dense first: the batched kernel reads a strided b^T
    about three times slower than it copies it.
    """
    lead = a.shape[:-2]
    if math.prod(lead) <= _MAX_ONEDNN_MATRICES and _onednn_applies(onednn, a, b):
        return batched_matmul(a, b.transpose(-2, -1), onednn)
    a_3d = a.reshape(-1, *a.shape[-2:])
    b_t = b.transpose(-2, -1).reshape(-1, b.shape[-1], b.shape[-2]).contiguous()
    return torch.bmm(a_3d, b_t).view(*lead, a.shape[-2], b.shape[-2])


class _DropoutAttention(torch.autograd.Function):
    """softmax(q k^T) with dropout on the weights, times v; q arrives already scaled.

    Written out (rather than left to autograd) so that backward keeps only the softmax output and
    a boolean keep-mask (the dropped weights are recomputed), i.e. ~1.25 instead of ~3 L x L
    tensors per head, and so that the six GEMMs can go through `batched_matmul` (few large
    matrices) or the layouts `_product` and `_scores` pick (many tiny ones). The mask is applied
    by multiplying with it as 0/1 floats, which measured 3-4x faster on CPU than `torch.where`
    or `masked_fill_` on the boolean mask, and gives the same numbers.
    """

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, keep: Tensor, p: float, onednn: bool) -> Tensor:
        dtype = q.dtype
        scores = _scores(q, k, onednn)
        weights = torch.softmax(scores, dim=-1).to(dtype)
        del scores
        dropped = weights * mask_values(keep, dtype)
        out = _product(dropped, v.to(dtype), onednn) * (1.0 / (1.0 - p))
        ctx.save_for_backward(q, k, v, weights, keep)
        ctx.p, ctx.onednn = p, onednn
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, weights, keep = ctx.saved_tensors
        dtype, onednn = weights.dtype, ctx.onednn
        grad = grad_out.to(dtype) * (1.0 / (1.0 - ctx.p))
        mask = mask_values(keep, dtype)
        dropped = weights * mask
        grad_v = _product(dropped.transpose(-2, -1), grad, onednn)
        del dropped
        grad_weights = _scores(grad, v.to(dtype), onednn).mul_(mask)
        del mask
        grad_scores = torch._softmax_backward_data(grad_weights, weights, -1, dtype)
        del grad_weights
        grad_q = _product(grad_scores, k.to(dtype), onednn)
        grad_k = _product(grad_scores.transpose(-2, -1), q, onednn)
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
