"""NPT's `recompute_blocks`: the blocks' activations are recomputed in the backward pass, with the
dropout masks replayed from the network's own generator, so training is bit-identical to keeping
them, while the forward pass keeps far fewer bytes for the backward pass."""

from __future__ import annotations

import pytest
import torch

from tabrepro.models.npt import NPTConfig, NPTNetwork, NPTTrainer
from test_npt import ATTRIBUTES, TINY, make_table, weights_equal

VARIANTS = {"full": {}, "isab": {"datapoint_attention": "isab", "n_inducing": 4}}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_recomputing_the_blocks_trains_bit_identically(variant):
    table = make_table(60)
    base = {**TINY, **VARIANTS[variant], "max_steps": 6, "p_target": 0.5}
    assert NPTConfig(**base).hidden_dropout > 0 and NPTConfig(**base).attention_dropout > 0
    kept = NPTTrainer(table.attributes, NPTConfig(**base))
    expected = kept.fit(table)
    recomputing = NPTTrainer(table.attributes, NPTConfig(**base, recompute_blocks=True))
    assert recomputing.fit(table).history == expected.history
    assert weights_equal(recomputing.model.state_dict(), kept.model.state_dict())


def _saved_bytes(model: NPTNetwork, table) -> int:
    """Bytes the forward pass keeps for the backward pass (tensors saved by autograd)."""
    total = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    model.dropout_generator = torch.Generator().manual_seed(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        outputs = model.forward_codes(table.inputs, table.input_missing)
    sum(output.sum() for output in outputs).backward()
    return total


def test_recomputing_the_blocks_keeps_a_fraction_of_the_activations():
    table = make_table(200)
    torch.manual_seed(0)
    kept = NPTNetwork(ATTRIBUTES, NPTConfig(**TINY)).train()
    recomputing = NPTNetwork(ATTRIBUTES, NPTConfig(**TINY, recompute_blocks=True)).train()
    recomputing.load_state_dict(kept.state_dict())
    assert _saved_bytes(recomputing, table) < _saved_bytes(kept, table) / 3
