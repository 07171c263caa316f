"""Attention between datapoints, made visible (Fig. 3b, 4; App. B.1, B.2).

The model computes attention with `F.scaled_dot_product_attention`, which never materialises the
weights. We capture each ABD block's input with a forward pre-hook and recompute
softmax(q k^T * scale) from the block's own parameters, following `AttentionBlock` line by line
(layer norm, packed QKV projection, keys/values from the normalised or raw input, per-head or
full-width scale). `test_attention_weights_reproduce_block_output` checks the recomputation
against the block's real output.

The experiment picks test rows, orders the rows of each one's context by feature-space distance
to it (the row itself first) and records, per ABD layer and head, the (n x n) attention map in
that order plus two summaries: Spearman's rho between the reference row's attention weights and
the distance (negative: near rows get more attention), and the attention mass the reference row
puts on its 10 % nearest rows.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import torch
from scipy.stats import spearmanr
from torch import Tensor

from tabrepro.models.npt.model import AttentionBlock, NPTNetwork
from tabrepro.npt.analysis.common import NPTContext, pairwise_distances

__all__ = ["block_attention_weights", "abd_attention", "attention_experiment"]


@torch.no_grad()
def block_attention_weights(block: AttentionBlock, h: Tensor) -> Tensor:
    """(B, heads, L, L) attention weights of `block` for its input h (B, L, width)."""
    if not block.attend:
        raise ValueError("this block has no attention (ablation 'rowwise')")
    own_weights = getattr(block, "attention_weights", None)  # the model's own hook, once it exists
    if own_weights is not None:
        return own_weights(h)
    batch, length, width = h.shape
    normed = block.ln_attention(h)
    weight, bias = block.qkv.weight, block.qkv.bias
    q = torch.nn.functional.linear(normed, weight[:width], bias[:width])
    source = normed if block.kv_from_normalised else h
    k = torch.nn.functional.linear(source, weight[width : 2 * width], bias[width : 2 * width])
    head_dim = width // block.n_heads
    q = q.view(batch, length, block.n_heads, head_dim).transpose(1, 2)
    k = k.view(batch, length, block.n_heads, head_dim).transpose(1, 2)
    return torch.softmax((q @ k.transpose(-2, -1)) * block.scale, dim=-1)


@torch.no_grad()
def abd_attention(model: NPTNetwork, values: Tensor, mask: Tensor) -> list[np.ndarray]:
    """One (heads, n, n) array per ABD block with attention, in depth order, for one batch."""
    captured: list[Tensor] = []
    hooks = []
    for kind, block in zip(model.block_kinds, model.blocks):
        if kind == "abd" and block.attend:
            hooks.append(
                block.register_forward_pre_hook(lambda module, args, store=captured: store.append(args[0].detach()))
            )
    model.eval()
    try:
        model.forward_codes(values, mask)
    finally:
        for hook in hooks:
            hook.remove()
    # NPTNetwork.blocks holds AttentionBlocks only
    blocks = [cast(AttentionBlock, b) for kind, b in zip(model.block_kinds, model.blocks) if kind == "abd" and b.attend]
    return [block_attention_weights(block, h)[0].float().cpu().numpy() for block, h in zip(blocks, captured)]


def attention_experiment(
    context: NPTContext, *, n_reference_rows: int = 1, max_rows: int | None = None, seed: int = 0
) -> dict[str, Any]:
    """Attention maps around a few test rows, rows ordered by distance to the reference row."""
    rng = np.random.default_rng(seed)
    test_rows = context.test_rows()
    if test_rows.size == 0:
        return {"references": [], "note": "no test rows with a known label"}
    references = np.sort(rng.choice(test_rows, size=min(n_reference_rows, test_rows.size), replace=False))
    table = context.table
    out: list[dict[str, Any]] = []
    for reference in references:
        batch = context.batch_of(int(reference)).cpu().numpy()
        others = batch[batch != reference]
        if max_rows is not None and others.size > max_rows - 1:
            others = rng.choice(others, size=max_rows - 1, replace=False)
        distance = pairwise_distances(context.features, int(reference), others)
        order = np.argsort(distance, kind="stable")
        rows = np.concatenate([[reference], others[order]])
        distances = np.concatenate([[0.0], distance[order]])
        index = torch.as_tensor(rows)
        maps = abd_attention(context.model, table.inputs[index], table.input_missing[index])
        roles = table.split[index].cpu().numpy()
        out.append(
            {
                "row": int(reference),
                "rows": rows,
                "roles": roles,
                "distances": distances,
                "maps": maps,
                "summary": summarise_maps(maps, distances),
            }
        )
    return {"references": out}


def summarise_maps(maps: list[np.ndarray], distances: np.ndarray) -> list[dict[str, Any]]:
    """Per layer and head: does the reference row (index 0) attend to near rows?"""
    near = max(1, math.ceil(0.1 * (len(distances) - 1)))
    summary = []
    for layer, heads in enumerate(maps):
        for head, weights in enumerate(heads):
            row = weights[0, 1:]
            rho = spearmanr(row, distances[1:]).statistic if row.size > 2 and np.ptp(row) > 0 else float("nan")
            summary.append(
                {
                    "layer": layer,
                    "head": head,
                    "spearman_weight_vs_distance": float(rho),
                    "mass_on_nearest_10pct": float(row[:near].sum()),
                    "uniform_mass_nearest_10pct": near / len(distances),
                    "self_weight": float(weights[0, 0]),
                }
            )
    return summary
