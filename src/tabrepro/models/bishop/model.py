"""The BiSHop network (Xu 2024, §3): tabular embedding, patching, a stacked encoder-decoder of
BiSHopModules built on generalised sparse Hopfield (GSH) layers, and an MLP head.

Tensor layout throughout: (batch, N features, P patches, D_model). The column-wise block attends
over P (per feature), the row-wise block over N (per patch position) through C learnable
pooling vectors. Every operation is batched over features and patches: there is no Python loop
over either.

Speed (CPU): Linear layers go through oneDNN (`tabrepro.nn.kernels.linear`), the key projection
Y W_K is computed once and reused for the values (Y W_K) W_V, the pooling queries' projection is
batch-independent and computed once per call, and α-entmax uses the Newton solver
(`entmax.py`). In evaluation mode (no dropout) the decoder's first BiSHopModule, whose input
E_pos is the same for every row, runs once and is broadcast over the batch. In training (per-row
dropout) that module still computes what precedes its first dropout once: the column block's
W_Q, W_K, W_V projections of E_pos, its scores and its entmax (`rows=` in
`HopfieldLayer.forward` / `BiSHopModule.forward`); the attention-weight dropout and everything
after it run per row, with the same masks as the per-row computation (pinned by
tests/unit/test_bishop.py). Residual branches add their dropout in one fused kernel
(`add_dropped`: x + branch * mask as addcmul) instead of a mask multiply and an add. The
row-wise block's GSH layers move the projections of their many tokens to their few
(`HopfieldLayer.cheapest_path`): the pooling layer applies W_K and W_V on the side of its C
pooling vectors, the row layer W_Q and W_O on the side of the C pooled ones, by associativity
(3.13 instead of 3.55 GFLOP per sample in a training step at the defaults). GEMMs take ~75 % of
a training step on two CPU cores (`python -m benchmarks.steps.op_times`); most of the rest is
memory traffic (head split/merge copies, LayerNorm, GELU, dropout masks, the weight-gradient
transposes inside oneDNN where it runs) and the tiny batched products of the attention.

Parameter count, 30 numerical features, binary target, defaults: 16,985,727 (pinned in
tests/unit/test_bishop.py). The authors' code at its command-line defaults (the same D_model 256,
FFN 512, 4 heads) has 18,708,619: its decoder has H + 1 = 4 levels, the first cross-attending to
the embedded input, where the thesis (§3.3) describes H = 3 levels attending to the H encoder
levels. One decoder level is 1,722,892 parameters (BiSHopModule 1,325,059 with its pooling
vectors and 3 α, cross GSH 263,169 with its α, two LayerNorms, the d->d->d MLP, the d->L readout);
`decoder_input_level=True` restores their layout and then the counts agree exactly (25 α's
included). 7,264,082 of the parameters are the MLP head (720 -> 2880 -> 1440 -> 720 -> 2:
hidden widths 4x, 2x, 1x the flattened decoder output, as in the authors' code).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tabrepro.models.bishop.config import BiSHopConfig
from tabrepro.models.bishop.entmax import AlphaEntmax
from tabrepro.models.bishop.ple import PiecewiseLinearEncoding
from tabrepro.nn.dropout import DropoutGeneratorMixin, DropoutSource, dropout, dropout_mask
from tabrepro.nn.kernels import Linear, use_onednn

HopfieldPath = Literal["direct", "fold_into_queries", "fold_into_memory"]

__all__ = ["BiSHopNetwork", "HopfieldLayer", "BiSHopModule", "MLPBlock", "PatchMerge", "CategoricalEmbedding"]


def _trunc_normal(tensor: Tensor, std: float = 0.01) -> Tensor:
    """Truncated normal at +-2 std (the authors' embedding initialisation)."""
    return nn.init.trunc_normal_(tensor, std=std, a=-2 * std, b=2 * std)


def add_dropped(x: Tensor, branch: Tensor, p: float, training: bool, source: DropoutSource) -> Tensor:
    """x + dropout(branch) as one fused kernel (addcmul) in training: saves a full pass and a
    temporary over the activations per residual branch. x may broadcast against branch (the
    decoder's shared first-level input)."""
    if not training or p == 0.0:
        return x + branch
    return torch.addcmul(x, branch, dropout_mask(branch, p, source))


class HopfieldLayer(nn.Module):
    """Multi-head GSH layer (or one of its Table 4.3 replacements).

    GSH(R, Y) = Norm(β (R W_Q)(Y W_K)ᵀ) (Y W_K) W_V, followed by the output projection W_O that
    merges the heads. Norm is α-entmax with this layer's own learnable α ("gsh"), softmax
    ("hopfield": dense modern Hopfield, same projections, β fixed or learned) or softmax with an
    independent value projection Y W_V ("attention": scaled dot-product attention).

    Heads have width D_model // n_heads (the authors' code; Table A.4 pairs e.g. 6 heads with
    D_model 256, so the heads may span slightly less than D_model).

    `q_dim` / `m_dim` name the token axis of queries / memory when it is not the second to last
    (the row-wise block attends over features, axis -3 of the (B, N, P, D) layout): projections
    run on the tensors as they come and only the small score products see moved axes.
    """

    # Take the re-associated paths where they are cheaper (`cheapest_path`); False: always the
    # direct one (the tests pin the two against each other).
    fold_projections: bool = True

    def __init__(self, config: BiSHopConfig, source: DropoutSource):
        super().__init__()
        d, onednn = config.d_model, use_onednn(config.onednn_linear)
        self.n_heads = config.n_heads
        self.kind = config.attention
        self.p_dropout = config.dropout
        self.source = source
        inner = config.head_dim * config.n_heads  # = d_model unless n_heads does not divide it
        self.q = Linear(d, inner, onednn=onednn)
        self.k = Linear(d, inner, onednn=onednn)
        self.v = Linear(inner if self.kind != "attention" else d, inner, onednn=onednn)
        self.o = Linear(inner, d, onednn=onednn)
        beta = config.beta if config.beta is not None else 1.0 / math.sqrt(config.head_dim)
        self.normaliser = AlphaEntmax(config.alpha_init, config.entmax_solver) if self.kind == "gsh" else None
        if self.kind == "hopfield" and config.learn_beta:
            self.log_beta: nn.Parameter | None = nn.Parameter(torch.tensor(math.log(beta)))
        else:
            self.log_beta = None
            self.beta = beta

    def _heads(self, t: Tensor, token_dim: int) -> Tensor:
        """(..., L, D) with the token axis at `token_dim` -> (..., h, L, D/h)."""
        if token_dim != -2:
            t = t.movedim(token_dim, -2)
        return t.unflatten(-1, (self.n_heads, -1)).transpose(-3, -2)

    def forward(
        self, queries: Tensor, memory: Tensor, q_dim: int = -2, m_dim: int = -2, rows: int | None = None
    ) -> Tensor:
        """GSH(queries, memory). `rows`: queries and memory are one row (leading size 1) shared
        by a batch of `rows` rows that differ only by their dropout masks (the decoder's E_pos):
        projections, scores and the normaliser run once, the attention-weight dropout and what
        follows it per row (exactly the per-row computation, without its repeated GEMMs)."""
        if memory.shape[m_dim] == 1:
            return self._single_memory(queries, memory, q_dim, m_dim, rows)
        if rows is None and self.fold_projections:
            path = self.cheapest_path(queries.shape, memory.shape, q_dim, m_dim)
            if path == "fold_into_queries":
                return self._fold_into_queries(queries, memory, q_dim, m_dim)
            if path == "fold_into_memory":
                return self._fold_into_memory(queries, memory, q_dim, m_dim)
        q = self._heads(self.q(queries), q_dim)
        keys = self.k(memory)
        values = self.v(keys if self.kind != "attention" else memory)
        k = self._heads(keys, m_dim)
        v = self._heads(values, m_dim)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self._scale()
        if self.normaliser is not None:
            weights = self.normaliser(scores)
        else:
            weights = torch.softmax(scores, dim=-1)
        if rows is not None and self.training and self.p_dropout > 0.0:
            weights = weights.expand(rows, *weights.shape[1:])
        weights = dropout(weights, self.p_dropout, self.training, self.source)
        out = torch.matmul(weights, v).transpose(-3, -2).flatten(-2)  # (..., Lq, D)
        out = self.o(out)
        return out.movedim(-2, q_dim) if q_dim != -2 else out

    def _single_memory(
        self, queries: Tensor, memory: Tensor, q_dim: int, m_dim: int, rows: int | None = None
    ) -> Tensor:
        """One memory token (a level with a single patch): every normaliser gives it weight 1,
        so the scores are skipped. Same output as the general path (entmax of one score is
        exactly 1), without its W_Q GEMM and the degenerate batched products; W_Q and α get no
        gradient either way."""
        values = self.v(self.k(memory) if self.kind != "attention" else memory)
        v = self._heads(values, m_dim)  # (..., h, 1, d_head)
        q_shape = queries.movedim(q_dim, -2).shape[:-1]  # (..., Lq)
        lead = torch.broadcast_shapes(q_shape[:-1], v.shape[:-3])
        out = v.expand(*lead, self.n_heads, q_shape[-1], v.shape[-1])
        if self.training and self.p_dropout > 0.0:  # dropout on the (unit) attention weights
            if rows is not None:
                lead = (rows, *lead[1:])
            weights = dropout(v.new_ones((*lead, self.n_heads, q_shape[-1], 1)), self.p_dropout, True, self.source)
            out = out * weights
        out = self.o(out.transpose(-3, -2).flatten(-2))
        return out.movedim(-2, q_dim) if q_dim != -2 else out

    # ------------------------------------------------------------ re-associated paths
    # The row-wise block pairs C pooling vectors with N features per patch position. Projecting
    # the N side (W_K and W_V of the pooling GSH, W_Q and W_O of the row GSH) costs D² per token;
    # moving those matrices to the C side by associativity costs h·C·D per token instead
    # (h·C = 40 against D = 256 at the defaults): 12 % of a training step's FLOPs. Same
    # function, different float rounding; the dropout masks keep their shape and draw order.

    def cheapest_path(self, q_shape: torch.Size, m_shape: torch.Size, q_dim: int, m_dim: int) -> HopfieldPath:
        """The path with the least estimated work for these shapes (forward; backward scales alike).

        "direct": project both sides, score, weight the values, project out. "fold_into_queries":
        W_K and W_V act on the query side (q̃ = q W_K per head; the weighted sum of memory rows is
        projected afterwards). "fold_into_memory": W_Q and W_O act on the memory side (k̃ = k W_Q,
        ṽ = v W_O per head). Work is multiply-adds, those of per-head and small batched products
        counted twice: on one AVX2 core they ran at about half the speed of the layers' GEMMs.
        """
        d, inner, h = self.q.in_features, self.q.out_features, self.n_heads
        v_in = self.v.in_features
        q_lead, m_lead = _without(q_shape, q_dim), _without(m_shape, m_dim)
        l_q, l_m = q_shape[q_dim], m_shape[m_dim]
        lead = math.prod(torch.broadcast_shapes(q_lead, m_lead))
        n_q, n_m = math.prod(q_lead) * l_q, math.prod(m_lead) * l_m
        pairs, n_out = lead * l_q * l_m, lead * l_q
        slow = 2  # weight of per-head and small batched products
        memory_projections = n_m * (d * inner + v_in * inner)
        costs: dict[HopfieldPath, int] = {
            "direct": n_q * d * inner + memory_projections + slow * 2 * pairs * inner + n_out * inner * d,
            "fold_into_queries": (
                n_q * d * inner  # W_Q
                + slow * n_q * inner * d  # q̃
                + slow * 2 * pairs * h * d  # scores, weighted sums of memory rows
                + slow * n_out * d * inner  # their value projection
                + d * inner * v_in  # W_V W_K
                + n_out * inner * d  # W_O
            ),
            "fold_into_memory": memory_projections + slow * 2 * n_m * inner * d + slow * 2 * pairs * h * d,
        }
        return min(costs, key=lambda path: costs[path])

    def _scale(self) -> Tensor | float:
        return self.log_beta.exp() if self.log_beta is not None else self.beta

    def _normalise(self, scores: Tensor) -> Tensor:
        weights = self.normaliser(scores) if self.normaliser is not None else torch.softmax(scores, dim=-1)
        return dropout(weights, self.p_dropout, self.training, self.source)

    def _value_map(self) -> tuple[Tensor, Tensor]:
        """(A, c) with values = memory Aᵀ + c: W_V W_K and W_V b_K + b_V for GSH and Hopfield,
        whose values are (Y W_K) W_V; W_V and b_V for "attention"."""
        if self.kind == "attention":
            return self.v.weight, self.v.bias
        return self.v.weight @ self.k.weight, self.v.weight @ self.k.bias + self.v.bias

    def _fold_into_queries(self, queries: Tensor, memory: Tensor, q_dim: int, m_dim: int) -> Tensor:
        """Few queries, many memory tokens (the pooling GSH): per head,
        scores = (q_h W_K,h) yᵀ + q_h·b_K,h and out_h = (w_h y) A_hᵀ + (Σ w_h) c_h. (The
        second score term is the same for all memory tokens of a query, which softmax and entmax
        ignore; it is kept so that b_K gets the gradient it gets in the direct path, ~0.)"""
        h = self.n_heads
        q = self._heads(self.q(queries), q_dim)  # (..., h, Lq, dh)
        w_k = self.k.weight.unflatten(0, (h, -1))  # (h, dh, D)
        q_folded = _per_head(q, w_k)  # (..., h, Lq, D)
        q_bias = torch.matmul(q, self.k.bias.view(h, -1, 1))  # (..., h, Lq, 1)
        y = memory.movedim(m_dim, -2) if m_dim != -2 else memory  # (..., Lm, D)
        heads_and_queries = q_folded.shape[-3:-1]
        # einsum: a batch-independent q_folded (the pooling vectors) becomes one GEMM per patch
        # position, where a broadcast matmul would copy it for every row
        scores = torch.einsum("...kd,...nd->...kn", q_folded.flatten(-3, -2), y).unflatten(-2, heads_and_queries)
        weights = self._normalise((scores + q_bias) * self._scale())  # (..., h, Lq, Lm)
        pooled = torch.matmul(weights.flatten(-3, -2), y).unflatten(-2, heads_and_queries)  # (..., h, Lq, D)
        value_map, value_bias = self._value_map()
        a_heads = value_map.unflatten(0, (h, -1)).transpose(-1, -2)  # (h, D, dh)
        out = _per_head(pooled, a_heads) + weights.sum(-1, keepdim=True) * value_bias.view(h, 1, -1)
        out = self.o(out.transpose(-3, -2).flatten(-2))  # (..., Lq, D)
        return out.movedim(-2, q_dim) if q_dim != -2 else out

    def _fold_into_memory(self, queries: Tensor, memory: Tensor, q_dim: int, m_dim: int) -> Tensor:
        """Many queries, few memory tokens (the row GSH): per head,
        scores = x (k_h W_Q,h)ᵀ + b_Q,h·k_h and out = Σ_h w_h (v_h W_O,hᵀ) + b_O."""
        h = self.n_heads
        keys = self.k(memory)
        k = self._heads(keys, m_dim)  # (..., h, Lm, dh)
        v = self._heads(self.v(keys if self.kind != "attention" else memory), m_dim)
        k_folded = _per_head(k, self.q.weight.unflatten(0, (h, -1)))  # (..., h, Lm, D)
        k_bias = torch.matmul(k, self.q.bias.view(h, -1, 1)).transpose(-1, -2)  # (..., h, 1, Lm)
        w_o = self.o.weight.unflatten(1, (h, -1)).permute(1, 2, 0)  # (h, dh, D)
        v_folded = _per_head(v, w_o).flatten(-3, -2)  # (..., h Lm, D)
        x = queries.movedim(q_dim, -2) if q_dim != -2 else queries  # (..., Lq, D)
        heads_and_memory = k_folded.shape[-3:-1]
        scores = torch.matmul(x, k_folded.flatten(-3, -2).transpose(-1, -2))  # (..., Lq, h Lm)
        scores = scores.unflatten(-1, heads_and_memory).transpose(-3, -2)  # (..., h, Lq, Lm)
        weights = self._normalise((scores + k_bias) * self._scale())
        out = torch.matmul(weights.transpose(-3, -2).flatten(-2), v_folded) + self.o.bias  # (..., Lq, D)
        return out.movedim(-2, q_dim) if q_dim != -2 else out

    @property
    def alpha(self) -> Tensor | None:
        return None if self.normaliser is None else self.normaliser.alpha


def _per_head(x: Tensor, weights: Tensor) -> Tensor:
    """x (..., h, L, a) times one matrix per head, weights (h, a, b) -> (..., h, L, b), as h GEMMs
    over all leading rows (a broadcast matmul would copy the weights for every leading index)."""
    return torch.einsum("...hla,hab->...hlb", x, weights)


def _without(shape: torch.Size, dim: int) -> tuple[int, ...]:
    """`shape` without its token axis `dim` and the feature axis (the last)."""
    axis = dim % len(shape)
    return tuple(size for i, size in enumerate(shape[:-1]) if i != axis)


class FeedForward(nn.Module):
    """Linear -> GELU -> Linear, token-wise."""

    def __init__(self, d_model: int, hidden: int, onednn: bool):
        super().__init__()
        self.fc1 = Linear(d_model, hidden, onednn=onednn)
        self.fc2 = Linear(hidden, d_model, onednn=onednn)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class BiSHopModule(nn.Module):
    """Column-wise GSH block over the P patches of each feature, then the row-wise block over
    the N features of each patch position through C pooling vectors per position (§3.2):

        X̂ = LN(X + GSH(X, X));  X_col = LN(X̂ + MLP(X̂))
        Q̂ = GSHPooling(Q, X_col);  X̄ = LN(X_col + GSH(X_col, Q̂));  X_row = LN(X̄ + MLP(X̄))
    """

    def __init__(self, config: BiSHopConfig, n_patches: int, source: DropoutSource):
        super().__init__()
        d, eps = config.d_model, config.layer_norm_eps
        self.p_dropout = config.dropout
        self.source = source
        self.column = HopfieldLayer(config, source)
        self.pool = HopfieldLayer(config, source)
        self.row = HopfieldLayer(config, source)
        self.pooling = nn.Parameter(torch.randn(n_patches, config.n_pooling, d))
        self.norms = nn.ModuleList([nn.LayerNorm(d, eps=eps) for _ in range(4)])
        onednn = use_onednn(config.onednn_linear)
        self.mlp_column = FeedForward(d, config.ffn_dim, onednn)
        self.mlp_row = FeedForward(d, config.ffn_dim, onednn)

    def _add(self, x: Tensor, branch: Tensor) -> Tensor:
        return add_dropped(x, branch, self.p_dropout, self.training, self.source)

    def forward(self, x: Tensor, rows: int | None = None) -> Tensor:
        """`rows`: x is one row (leading size 1) shared by `rows` rows with their own dropout
        masks (see HopfieldLayer.forward); the output has `rows` rows."""
        x = self.norms[0](self._add(x, self.column(x, x, rows=rows)))
        if rows is not None:  # identity unless the column block had no dropout
            x = x.expand(rows, *x.shape[1:])
        x = self.norms[1](self._add(x, self.mlp_column(x)))
        pooled = self.pool(self.pooling, x, q_dim=-2, m_dim=-3)  # (B, P, C, D)
        x = self.norms[2](self._add(x, self.row(x, pooled, q_dim=-3, m_dim=-2)))
        return self.norms[3](self._add(x, self.mlp_row(x)))


class MLPBlock(nn.Module):
    """Table 4.2 ablation: LN(X + MLP(X)), token-wise, in place of a BiSHopModule."""

    def __init__(self, config: BiSHopConfig, source: DropoutSource):
        super().__init__()
        self.p_dropout = config.dropout
        self.source = source
        self.mlp = FeedForward(config.d_model, config.block_mlp_hidden, use_onednn(config.onednn_linear))
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(self, x: Tensor, rows: int | None = None) -> Tensor:
        """`rows`: x is one row shared by `rows` rows; the MLP runs once, dropout per row."""
        branch = self.mlp(x)
        if rows is not None:
            branch = branch.expand(rows, *branch.shape[1:])
        return self.norm(add_dropped(x, branch, self.p_dropout, self.training, self.source))


def _block(config: BiSHopConfig, n_patches: int, source: DropoutSource) -> nn.Module:
    if config.block == "mlp":
        return MLPBlock(config, source)
    return BiSHopModule(config, n_patches, source)


class PatchMerge(nn.Module):
    """Concatenate r adjacent patches and project back to D_model: (B, N, P, D) ->
    (B, N, ceil(P/r), D). P is padded to a multiple of r by repeating the last patch (ours;
    the authors' code repeats the last P mod r patches, or tiles when P < r)."""

    def __init__(self, config: BiSHopConfig):
        super().__init__()
        self.r = config.merge_factor
        d = config.d_model
        self.norm = nn.LayerNorm(self.r * d, eps=config.layer_norm_eps)
        self.proj = Linear(self.r * d, d, onednn=use_onednn(config.onednn_linear))

    def forward(self, x: Tensor) -> Tensor:
        b, n, p, d = x.shape
        pad = -p % self.r
        if pad:
            x = torch.cat([x, x[:, :, -1:].expand(b, n, pad, d)], dim=2)
        x = x.reshape(b, n, (p + pad) // self.r, self.r * d)
        return self.proj(self.norm(x))


class DecoderLevel(nn.Module):
    """One decoder level (§3.3): Y = block(Y); Ŷ = GSH(Y, X_enc,h); Ȳ = LN(Y + Ŷ);
    Y' = LN(Ȳ + MLP(Ȳ)); and this level's contribution Y' W_out (L values per patch)."""

    def __init__(self, config: BiSHopConfig, source: DropoutSource):
        super().__init__()
        d, eps = config.d_model, config.layer_norm_eps
        self.p_dropout = config.dropout
        self.source = source
        self.block = _block(config, config.n_decoder_patches, source)
        self.cross = HopfieldLayer(config, source)
        self.norm1 = nn.LayerNorm(d, eps=eps)
        self.norm2 = nn.LayerNorm(d, eps=eps)
        onednn = use_onednn(config.onednn_linear)
        self.mlp = FeedForward(d, config.decoder_ffn_dim or d, onednn)
        self.out = Linear(d, config.patch_size, onednn=onednn)

    def forward(
        self, y: Tensor, memory: Tensor, batch: int | None = None, shared: bool = True
    ) -> tuple[Tensor, Tensor]:
        """`batch`: y is the batch-independent E_pos (leading size 1). With `shared` the block
        runs once and is broadcast (exact without dropout); otherwise its batch-independent
        part runs once and everything after the first dropout per row."""
        if batch is not None and not shared:
            y = self.block(y, rows=batch)
        else:
            y = self.block(y)
        if batch is not None:
            y = y.expand(batch, *y.shape[1:])
        y = self.norm1(add_dropped(y, self.cross(y, memory), self.p_dropout, self.training, self.source))
        # no dropout on this MLP branch (authors' code)
        y = self.norm2(y + self.mlp(y))
        return y, self.out(y)


class CategoricalEmbedding(nn.Module):
    """Label-encoded categorical features -> (B, n_cat, G): [shared column part (G_shared),
    identifies the feature | individual per-category part (G - G_shared)] (§3.1).

    One table holds every feature's categories (offsets into it), plus one "missing" row per
    feature, the row after its last category, for tabrepro.features.MISSING_CODE (-1).
    """

    # buffers (register_buffer), declared for the type checker
    cardinalities: Tensor
    offsets: Tensor

    def __init__(self, cardinalities: Sequence[int], embed_dim: int, shared_dim: int):
        super().__init__()
        cards = torch.tensor([int(c) for c in cardinalities], dtype=torch.long)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(cards + 1, 0)[:-1]])
        self.register_buffer("cardinalities", cards, persistent=False)
        self.register_buffer("offsets", offsets, persistent=False)
        self.individual = nn.Embedding(int((cards + 1).sum()), embed_dim - shared_dim)
        _trunc_normal(self.individual.weight)
        self.shared = nn.Parameter(_trunc_normal(torch.empty(len(cards), shared_dim)))

    def forward(self, codes: Tensor) -> Tensor:
        index = torch.where(codes < 0, self.cardinalities, codes) + self.offsets
        individual = self.individual(index)
        shared = self.shared.unsqueeze(0).expand(codes.shape[0], -1, -1)
        return torch.cat([shared, individual], dim=-1)


class BiSHopNetwork(DropoutGeneratorMixin, nn.Module):
    """BiSHop for `cardinalities` categorical features (categories per feature) and
    `n_numerical` numerical features, with `n_outputs` outputs (classes, or 1 for regression).

    forward(x_cat, x_num): x_cat (B, n_cat) int64 codes in [0, K_j) or -1 for missing (the
    category codes of tabrepro.features.FeatureLayout); x_num
    (B, n_num) standardised floats (NaN is read as 0, the training mean). Call `fit_encoding`
    on the training rows first (PLE bins).
    """

    onehot_offsets: Tensor  # a buffer, registered with the onehot encoding of categories only

    def __init__(self, config: BiSHopConfig, cardinalities: Sequence[int], n_numerical: int, n_outputs: int):
        super().__init__()
        self.config = config
        self.cardinalities = tuple(int(c) for c in cardinalities)
        if any(c < 1 for c in self.cardinalities):
            raise ValueError("every categorical feature needs at least one category")
        self.n_numerical = int(n_numerical)
        self.n_outputs = int(n_outputs)
        self.dropout_source = DropoutSource()
        source = self.dropout_source
        cfg = config
        onehot = cfg.categorical_encoding == "onehot"
        self.n_onehot = sum(self.cardinalities) if onehot else 0
        self.n_encoded_numerical = self.n_numerical + self.n_onehot
        n_embedded = 0 if onehot else len(self.cardinalities)
        self.n_tokens = n_embedded + self.n_encoded_numerical  # N
        if self.n_tokens < 1:
            raise ValueError("BiSHop needs at least one feature")
        if onehot and self.cardinalities:
            cards = torch.tensor(self.cardinalities, dtype=torch.long)
            offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(cards, 0)[:-1]])
            self.register_buffer("onehot_offsets", offsets, persistent=False)
        self.categorical = (
            CategoricalEmbedding(self.cardinalities, cfg.embed_dim, cfg.shared_width) if n_embedded else None
        )
        self.ple = (
            PiecewiseLinearEncoding(self.n_encoded_numerical, cfg.embed_dim)
            if cfg.numerical_encoding == "ple" and self.n_encoded_numerical
            else None
        )

        n, d, p = self.n_tokens, cfg.d_model, cfg.n_patches
        onednn = use_onednn(cfg.onednn_linear)
        self.patch = Linear(cfg.patch_size, d, onednn=onednn)
        self.pos_encoder = nn.Parameter(torch.randn(n, p, d))
        self.pre_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        levels = cfg.level_patches()
        self.merges = nn.ModuleList(
            [PatchMerge(cfg) if (h > 0 or cfg.merge_first_level) else nn.Identity() for h in range(cfg.n_levels)]
        )
        self.encoder = nn.ModuleList([_block(cfg, levels[h], source) for h in range(cfg.n_levels)])
        width = cfg.decoded_width
        if cfg.decoder:
            n_dec = cfg.n_levels + (1 if cfg.decoder_input_level else 0)
            self.pos_decoder: nn.Parameter | None = nn.Parameter(torch.randn(n, cfg.n_decoder_patches, d))
            self.decoder: nn.ModuleList | None = nn.ModuleList([DecoderLevel(cfg, source) for _ in range(n_dec)])
            self.readout: Linear | None = None
        else:
            self.pos_decoder = None
            self.decoder = None
            self.readout = Linear(levels[-1] * d, width, onednn=onednn)
        head_in = n * width
        widths = [head_in, *(max(1, round(m * head_in)) for m in cfg.head_hidden)]
        self.head_hidden = nn.ModuleList([Linear(a, b, onednn=onednn) for a, b in zip(widths[:-1], widths[1:])])
        self.head_out = Linear(widths[-1], self.n_outputs, onednn=onednn)

    # ------------------------------------------------------------------ inputs
    def numeric_matrix(self, x_cat: Tensor, x_num: Tensor) -> Tensor:
        """The columns that get the numerical encoding: [one-hot columns (onehot ablation) |
        numerical features], NaN replaced by 0."""
        x_num = torch.nan_to_num(x_num.float(), nan=0.0)
        if not self.n_onehot:
            return x_num
        valid = (x_cat >= 0).to(x_num.dtype)
        index = x_cat.clamp(min=0) + self.onehot_offsets
        onehot = x_num.new_zeros((x_cat.shape[0], self.n_onehot)).scatter_(1, index, valid)
        return torch.cat([onehot, x_num], dim=1)

    @torch.no_grad()
    def fit_encoding(self, x_cat: Tensor, x_num: Tensor) -> None:
        """Fit the PLE bins on these rows: the TRAINING rows, and only those."""
        if self.ple is not None:  # on exactly what forward() encodes (NaN read as 0)
            self.ple.fit(self.numeric_matrix(x_cat, x_num))

    def embed(self, x_cat: Tensor, x_num: Tensor) -> Tensor:
        """(B, N, G) feature embeddings, categorical features first."""
        parts = []
        if self.categorical is not None:
            parts.append(self.categorical(x_cat))
        if self.n_encoded_numerical:
            numeric = self.numeric_matrix(x_cat, x_num)
            if self.ple is not None:
                parts.append(self.ple(numeric))
            else:
                parts.append(numeric.unsqueeze(-1).expand(-1, -1, self.config.embed_dim))
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    # ------------------------------------------------------------------ network
    def encode(self, x_cat: Tensor, x_num: Tensor) -> list[Tensor]:
        """[X_0 (patch embedding), X_enc,1, ..., X_enc,H], each (B, N, P_h, D)."""
        cfg = self.config
        emb = self.embed(x_cat, x_num)
        b, n, g = emb.shape
        padded = cfg.n_patches * cfg.patch_size
        if padded != g:
            emb = F.pad(emb, (0, padded - g))
        x = self.patch(emb.reshape(b, n, cfg.n_patches, cfg.patch_size)) + self.pos_encoder
        x = self.pre_norm(x)
        outputs = [x]
        for merge, block in zip(self.merges, self.encoder):
            x = block(merge(x))
            outputs.append(x)
        return outputs

    def decode(self, encoded: list[Tensor]) -> Tensor:
        """(B, N, S') decoded representations."""
        batch = encoded[0].shape[0]
        if self.decoder is None:
            last = encoded[-1]
            assert self.readout is not None  # built in place of the decoder
            return self.readout(last.reshape(batch, last.shape[1], -1))
        memories = encoded if self.config.decoder_input_level else encoded[1:]
        shared_first = not self.training or self.config.dropout == 0.0 or self.config.share_decoder_input
        assert self.pos_decoder is not None  # built with the decoder
        y = self.pos_decoder.unsqueeze(0)  # the same for every row
        total = None
        for level, (layer, memory) in enumerate(zip(self.decoder, memories)):
            y, contribution = layer(y, memory, batch if level == 0 else None, shared_first)
            total = contribution if total is None else total + contribution
        assert total is not None
        return total.flatten(-2)

    def forward(self, x_cat: Tensor, x_num: Tensor) -> Tensor:
        decoded = self.decode(self.encode(x_cat, x_num))
        h = decoded.flatten(1)
        p = self.config.head_dropout
        for layer in self.head_hidden:
            h = F.relu(layer(dropout(h, p, self.training, self.dropout_source)))
        return self.head_out(h)

    # ------------------------------------------------------------------ introspection
    def alphas(self) -> list[float]:
        """α of every GSH layer, in module order (empty unless attention == "gsh")."""
        return [float(m.alpha) for m in self.modules() if isinstance(m, HopfieldLayer) and m.alpha is not None]

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
