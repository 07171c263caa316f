"""The Non-Parametric Transformer network (Kossen et al. 2021, §2 and App. C.3).

Input: the whole table (or a minibatch of rows) as one tensor per attribute plus an (n x d)
mask matrix; output: one prediction per attribute and row (logits for categorical attributes, a
scalar for continuous ones). Blocks alternate attention between datapoints (ABD, over the n rows,
each row flattened to width d*e) and attention between attributes (ABA, over the d attributes of
each row, width e), starting with ABD.

The attributes are `Feature`s (tabrepro.features), the target last: a categorical attribute is
one-hot encoded over its `n_categories` classes at the input and predicted as logits over them.

Dropout draws from an explicit `torch.Generator` (see `NPTNetwork.dropout_generator` and
tabrepro.nn.dropout) rather than torch's global generator: the trainer owns, checkpoints and
restores that generator, which is what makes a resumed run bit-identical to an uninterrupted one.

CPU speed (the authors' NPT-Small step on Breast Cancer took 1.8-3.0 s on two cores in the
side-by-side records, docs/speed.md):
fp32 GEMMs go through oneDNN instead of MKL where the CPU runs AVX-512 (`NPTConfig.onednn_linear`,
"auto"), attention with dropout has a hand-written backward (tabrepro.nn.kernels), and masks draw
16 random bits per entry (tabrepro.nn.dropout). None of this changes the mathematics;
`onednn_linear=False` keeps plain PyTorch GEMMs everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tabrepro.features import Feature
from tabrepro.models.npt.config import NPTConfig
from tabrepro.nn.dropout import DropoutGeneratorMixin, DropoutSource, dropout, recomputed
from tabrepro.nn.kernels import Linear, attention, linear, use_onednn

__all__ = ["NPTNetwork", "AttentionBlock", "encode_values"]


def encode_values(codes: Tensor, attributes: Sequence[Feature]) -> list[Tensor]:
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
            encoded.append(F.one_hot(column.long(), attribute.n_categories).to(codes.dtype))
        else:
            encoded.append(column.unsqueeze(1))
    return encoded


class AttentionBlock(nn.Module):
    """Pre-LN multi-head self-attention block of NPT (eq. 4-5) over dimension 1 of (B, L, W).

        Res(H)  = H W_res + MHSelfAtt(LN(H))
        MHSA(H) = Res(H) + rFF(LN(Res(H)))

    With `attend=False` the attention term is dropped (Res(H) = H W_res): a row-wise block used by
    the "no attention between datapoints" ablation, keeping parameters and depth comparable.
    """

    def __init__(
        self, width: int, config: NPTConfig, source: DropoutSource, attend: bool = True, n_inducing: int | None = None
    ):
        super().__init__()
        if attend and width % config.n_heads:
            raise ValueError(f"block width {width} is not divisible by {config.n_heads} heads")
        self.width = width
        self.n_heads = config.n_heads
        self.attend = attend
        self.n_inducing = n_inducing if attend else None
        self.kv_from_normalised = config.kv_from_normalised
        head_dim = width // config.n_heads
        scale_dim = head_dim if config.attention_scale == "per_head" else width
        self.scale = 1.0 / math.sqrt(scale_dim)
        self.p_attention = config.attention_dropout
        self.p_hidden = config.hidden_dropout
        self._source = source

        fast = use_onednn(config.onednn_linear)
        if self.n_inducing is not None:
            # Induced set attention (Set Transformer, ISAB): m learned points first attend to the
            # rows (a pre-LN block of their own, with its rFF), then the rows attend to them.
            self.inducing_points = nn.Parameter(torch.randn(self.n_inducing, width) / math.sqrt(width))
            self.ln_inducing = nn.LayerNorm(width, eps=config.layer_norm_eps)
            self.inducing_q = Linear(width, width, onednn=fast)
            self.inducing_out = Linear(width, width, onednn=fast)
            self.ln_inducing_rff = nn.LayerNorm(width, eps=config.layer_norm_eps)
            self.inducing_rff_in = Linear(width, config.rff_expansion * width, onednn=fast)
            self.inducing_rff_out = Linear(config.rff_expansion * width, width, onednn=fast)
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

    def forward(self, h: Tensor, queries: Tensor | None = None) -> Tensor:
        """The block over dimension 1 of h; with `queries` (indices along it) only those rows'
        outputs are computed, every row of h still serving as a key and value."""
        h_out = h if queries is None else h[:, queries]
        res = self.residual(h_out)
        if self.n_inducing is not None:
            res = res + self._induced_attention(h, queries)
        elif self.attend:
            res = res + self._self_attention(h, queries)
        hidden = F.gelu(self.rff_in(self.ln_rff(res)))
        hidden = dropout(hidden, self.p_hidden, self.training, self._source)
        return res + dropout(self.rff_out(hidden), self.p_hidden, self.training, self._source)

    def _self_attention(self, h: Tensor, queries: Tensor | None = None) -> Tensor:
        batch, _, width = h.shape
        normed = self.ln_attention(h)
        if self.kv_from_normalised:
            qkv = self.qkv(normed)
        else:  # authors' code: keys and values from the un-normalised input
            w, b = self.qkv.weight, self.qkv.bias
            fast = self.qkv.onednn
            qkv = torch.cat([linear(normed, w[:width], b[:width], fast), linear(h, w[width:], b[width:], fast)], dim=-1)
        heads = qkv.view(batch, h.shape[1], 3, self.n_heads, width // self.n_heads)
        q, k, v = heads.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, L, head_dim)
        if queries is not None:
            q = q[:, :, queries]
        p_dropout = self.p_attention if self.training else 0.0
        attended = attention(q, k, v, self.scale, p_dropout, self._source, self.qkv.onednn)
        merged = attended.transpose(1, 2).reshape(batch, q.shape[2], width)
        return dropout(self.out(merged), self.p_hidden, self.training, self._source)

    def _heads(self, x: Tensor) -> Tensor:
        """(B, L, width) -> (B, heads, L, head_dim)."""
        batch, length, width = x.shape
        return x.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """Multi-head attention of q's rows over k/v's, heads merged back: (B, Lq, width)."""
        batch, length, width = q.shape
        p_dropout = self.p_attention if self.training else 0.0
        attended = attention(
            self._heads(q), self._heads(k), self._heads(v), self.scale, p_dropout, self._source, self.qkv.onednn
        )
        return attended.transpose(1, 2).reshape(batch, length, width)

    def _induced_attention(self, h: Tensor, queries: Tensor | None = None) -> Tensor:
        """ISAB(H) = MAB(LN(H), Z) with Z = MAB(I, LN(H)): O(n m) in the n rows, not O(n^2).

        The queries, keys and values of the rows reuse the block's packed projection (W^Q for the
        rows' queries, W^K and W^V for the rows as keys of the inducing points, and for Z as keys
        of the rows); the inducing points have their own W^Q, W^O and rFF.
        """
        batch, _, width = h.shape
        fast = self.qkv.onednn
        w, b = self.qkv.weight, self.qkv.bias
        normed = self.ln_attention(h)
        kv_input = normed if self.kv_from_normalised else h
        rows_k = linear(kv_input, w[width : 2 * width], b[width : 2 * width], fast)
        rows_v = linear(kv_input, w[2 * width :], b[2 * width :], fast)
        points = self.inducing_points.unsqueeze(0).expand(batch, -1, -1)
        summary = self._attend(self.inducing_q(self.ln_inducing(points)), rows_k, rows_v)
        z = points + dropout(self.inducing_out(summary), self.p_hidden, self.training, self._source)
        hidden = F.gelu(self.inducing_rff_in(self.ln_inducing_rff(z)))
        hidden = dropout(hidden, self.p_hidden, self.training, self._source)
        z = z + dropout(self.inducing_rff_out(hidden), self.p_hidden, self.training, self._source)
        z_kv = linear(z, w[width:], b[width:], fast)
        rows_q = linear(normed if queries is None else normed[:, queries], w[:width], b[:width], fast)
        attended = self._attend(rows_q, z_kv[..., :width], z_kv[..., width:])
        return dropout(self.out(attended), self.p_hidden, self.training, self._source)


class NPTNetwork(DropoutGeneratorMixin, nn.Module):
    """Non-Parametric Transformer over a table described by `attributes` (target last).

    forward(values, mask): `values[j]` is attribute j encoded ((n, n_classes) one-hot or (n, 1)
    continuous), `mask` is (n, d) with 1 = masked (hidden or genuinely missing). Returns a list of
    d tensors: (n, n_classes) logits or (n, 1) predictions.
    """

    def __init__(self, attributes: Sequence[Feature], config: NPTConfig):
        super().__init__()
        if len(attributes) < 2:
            raise ValueError("NPT needs at least one feature and the target attribute")
        self.attributes: tuple[Feature, ...] = tuple(attributes)
        self.config = config
        d, e = len(self.attributes), config.embed_dim
        self.n_attributes = d
        self.embed_dim = e
        self.dropout_source = DropoutSource()

        # Input embedding (App. C.3.1): [value, mask bit] -> e, separately per attribute.
        self.in_maps = nn.ModuleList(nn.Linear(a.one_hot_width + 1, e) for a in self.attributes)
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
                attend = config.datapoint_attention in ("full", "isab")
                inducing = config.n_inducing if config.datapoint_attention == "isab" else None
                blocks.append(AttentionBlock(d * e, config, self.dropout_source, attend=attend, n_inducing=inducing))
                kinds.append("abd")
            else:  # ABA, width e, attention over the attributes of each row
                blocks.append(AttentionBlock(e, config, self.dropout_source))
                kinds.append("aba")
        self.blocks = nn.ModuleList(blocks)
        self.block_kinds: tuple[str, ...] = tuple(kinds)

        # Output (App. C.3.2): e -> logits / scalar, separately per attribute.
        self.out_maps = nn.ModuleList(nn.Linear(e, a.one_hot_width) for a in self.attributes)

    def forward(self, values: Sequence[Tensor], mask: Tensor, rows: Tensor | None = None) -> list[Tensor]:
        """The predictions of every row, or with `rows` (indices, in evaluation only) of those
        rows alone, every row still attended to: the last ABD block computes only their outputs
        and the row-wise blocks after it run on them only. An evaluation pass needs the hidden
        targets' rows (HIGGS: 16 % of each batch), so about a sixth of its work is saved."""
        d, e = self.n_attributes, self.embed_dim
        if rows is not None and self.training:
            raise ValueError("rows= is for evaluation: training scores every row")
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

        recompute = self.config.recompute_blocks and self.training and torch.is_grad_enabled()
        # `rows` alone go on from the last ABD block; without an ABD block, from the first block
        narrowing = max((i for i, kind in enumerate(self.block_kinds) if kind == "abd"), default=-1)
        if rows is not None and narrowing < 0:
            h, n = h[rows], rows.numel()
        for index, (kind, block) in enumerate(zip(self.block_kinds, self.blocks)):
            x = h.reshape(1, n, d * e) if kind == "abd" else h
            if rows is not None and index == narrowing:
                x, n = block(x, rows), rows.numel()
            else:
                x = recomputed(block, x, self.dropout_source) if recompute else block(x)
            h = x.reshape(n, d, e)

        h = dropout(h, self.config.embedding_dropout, self.training, self.dropout_source)
        # unbind (not h[:, j]): its backward stacks the d gradients instead of filling a full-size
        # zero tensor per attribute.
        return [out_map(column) for column, out_map in zip(h.unbind(1), self.out_maps)]

    def forward_codes(self, codes: Tensor, mask: Tensor, rows: Tensor | None = None) -> list[Tensor]:
        """forward() on (n, d) codes, one-hot encoding categorical attributes on the way."""
        return self.forward(encode_values(codes, self.attributes), mask, rows)
