"""benchmarks/steps/op_times.py: a wall clock around every aten call of a training step."""

from __future__ import annotations

import pytest
import torch

from benchmarks.steps import op_times

TINY = ["d_model=16", "n_heads=2", "ffn_dim=32", "embed_dim=8", "patch_size=4", "n_pooling=3"]


def _script():
    return op_times


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
    with script.OpClock() as clock:
        torch.addmm(torch.zeros(6), a, b)
        torch.bmm(torch.randn(3, 8, 4), torch.randn(3, 4, 6))
    assert clock.by_op["addmm"][2] == 2 * 8 * 4 * 6 and clock.by_op["bmm"][2] == 3 * 2 * 8 * 4 * 6


@pytest.mark.skipif(not hasattr(torch.ops.mkldnn, "_linear_pointwise"), reason="torch without oneDNN's linear op")
def test_the_onednn_linear_op_counts_as_a_product():
    from tabrepro.nn.kernels import Linear

    layer = Linear(4, 6, onednn=True)
    with _script().OpClock() as clock:
        layer(torch.randn(8, 4))
    assert clock.products()[1] == 2 * 8 * 4 * 6


def test_a_tiny_bishop_step_is_broken_down(capsys):
    script = _script()
    assert script.main(["bishop", "--steps", "1", "--warmup", "1", "--threads", "1", "--top", "3", "--set", *TINY]) == 0
    out = capsys.readouterr().out
    assert "matrix products:" in out and "by operation and operand shapes:" in out
    assert out.count(" calls") == 6  # three rows in each table


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bishop", "--set", "d_model"], "expected KEY=VALUE"),
        (["bishop", "--set", "d_modl=16"], "unexpected keyword argument 'd_modl'"),
        (["npt", "--set", "d_model=16"], "--set is for bishop"),
        (["npt", "--case", "iris"], "invalid choice: 'iris'"),
    ],
)
def test_bad_arguments_get_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _script().main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
