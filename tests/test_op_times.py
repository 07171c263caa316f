"""scripts/op_times.py: a wall clock around every aten call of a training step."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from conftest import REPO

TINY = ["d_model=16", "n_heads=2", "ffn_dim=32", "embed_dim=8", "patch_size=4", "n_pooling=3"]


def _script():
    spec = importlib.util.spec_from_file_location("op_times", REPO / "scripts" / "op_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_product_flops_counts_two_per_multiply_add_and_nothing_else():
    flops = _script().product_flops
    a, b, bias = torch.empty(5, 3), torch.empty(3, 7), torch.empty(7)
    assert flops("mm", (a, b)) == 2 * 5 * 3 * 7
    assert flops("addmm", (bias, a, b)) == 2 * 5 * 3 * 7
    assert flops("bmm", (torch.empty(4, 5, 3), torch.empty(4, 3, 7))) == 2 * 4 * 5 * 3 * 7
    assert flops("_linear_pointwise", (a, torch.empty(7, 3))) == 2 * 5 * 3 * 7
    assert flops("gelu", (a,)) == 0


def test_the_clock_sees_every_call_and_the_products_flops():
    script = _script()
    a, b = torch.randn(8, 4), torch.randn(4, 6)
    with script.OpClock() as clock:
        out = torch.relu(a @ b)
    assert torch.equal(out, torch.relu(a @ b))  # the mode changes nothing it times
    assert clock.by_op["mm"][1] == 1 and clock.by_op["relu"][1] == 1
    seconds, flops = clock.products()
    assert flops == 2 * 8 * 4 * 6 and 0 < seconds <= sum(v[0] for v in clock.by_op.values())
    assert ("mm", "(8, 4) (4, 6)") in clock.by_shape


def test_a_tiny_bishop_step_is_broken_down(capsys):
    script = _script()
    assert script.main(["bishop", "--steps", "1", "--warmup", "1", "--threads", "1", "--top", "3", "--set", *TINY]) == 0
    out = capsys.readouterr().out
    assert "matrix products:" in out and "by operation and operand shapes:" in out
    assert out.count(" calls") == 6  # three rows in each table


def test_bad_settings_are_refused():
    script = _script()
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        script.main(["bishop", "--set", "d_model"])
    with pytest.raises(SystemExit, match="--set is for bishop"):
        script.main(["npt", "--set", "d_model=16"])
