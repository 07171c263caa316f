"""The CPU attention kernel (tabrepro.nn.kernels.attention) against plain autograd attention.

Its hand-written backward and the layouts it picks for the products (few large matrices through
oneDNN, many tiny ones through transposed batched products) must give the same output and the
same gradients as softmax(q k^T / sqrt) -> dropout -> @ v written out with autograd, up to float
rounding, with the very dropout mask the kernel drew.
"""

from __future__ import annotations

import pytest
import torch

from tabrepro.nn import kernels
from tabrepro.nn.dropout import DropoutSource, keep_mask, mask_values

P_DROPOUT = 0.1
SCALE = 0.3


def _packed_heads(n: int, length: int, heads: int, head_dim: int, seed: int = 0) -> torch.Tensor:
    """A packed QKV tensor as the NPT block makes it: (n, L, 3 * heads * head_dim)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, length, 3 * heads * head_dim, generator=generator).requires_grad_()


def _split(qkv: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, length, width = qkv.shape
    q, k, v = qkv.view(n, length, 3, heads, width // (3 * heads)).permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v


def _source(seed: int = 1) -> DropoutSource:
    source = DropoutSource()
    source.generator = torch.Generator().manual_seed(seed)
    return source


def _reference(q, k, v, keep):
    weights = torch.softmax((q * SCALE) @ k.transpose(-2, -1), dim=-1)
    return (weights * keep / (1.0 - P_DROPOUT)) @ v


@pytest.mark.parametrize(
    "shape",
    [
        (569, 31, 8, 4),  # attention between attributes: thousands of tiny matrices
        (1, 200, 8, 24),  # attention between datapoints: a few large matrices (oneDNN)
        (3, 50, 2, 16),  # few matrices
    ],
    ids=["many-tiny", "few-large", "few-small"],
)
@pytest.mark.parametrize("onednn", [True, False], ids=["onednn", "plain"])
def test_attention_with_dropout_matches_autograd_attention(shape, onednn):
    n, length, heads, head_dim = shape
    ours_input = _packed_heads(*shape)
    reference_input = ours_input.detach().clone().requires_grad_()
    upstream = torch.randn(n, heads, length, head_dim, generator=torch.Generator().manual_seed(2))

    out = kernels.attention(*_split(ours_input, heads), SCALE, P_DROPOUT, _source(), onednn)
    keep = keep_mask((n, heads, length, length), P_DROPOUT, _source(), torch.device("cpu")).float()
    expected = _reference(*_split(reference_input, heads), keep)
    assert 0.0 < keep.mean() < 1.0
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)

    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(ours_input.grad, reference_input.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_mask_values_are_the_boolean_mask_as_ones_and_zeros(dtype):
    """The byte-wise conversion gives keep.to(dtype) exactly, strided views included."""
    keep = keep_mask((7, 3, 31, 31), 0.3, _source(), torch.device("cpu"))
    for mask in (keep, keep.transpose(-2, -1), keep[:, 1]):
        values = mask_values(mask, dtype)
        assert values.dtype == dtype and values.shape == mask.shape
        assert torch.equal(values, mask.to(dtype))
    assert 0.0 < mask_values(keep, dtype).float().mean() < 1.0


def test_attention_without_dropout_is_scaled_dot_product_attention():
    q, k, v = _split(_packed_heads(4, 10, 2, 8), 2)
    out = kernels.attention(q, k, v, SCALE, 0.0, _source())
    expected = torch.softmax((q * SCALE) @ k.transpose(-2, -1), dim=-1) @ v
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("capability", "expected"), [("AVX512", True), ("AVX2", False), ("DEFAULT", False), ("NO AVX", False)]
)
def test_auto_takes_onednn_only_where_torch_runs_avx512(monkeypatch, capability, expected):
    """oneDNN's GEMMs were the faster ones on an AVX-512 CPU and the slower ones on an AVX2-only one."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    assert kernels.use_onednn("auto") is expected
    assert kernels.use_onednn(True) is True
    assert kernels.use_onednn(False) is False


@pytest.mark.parametrize("capability", ["AVX512", "AVX2"])
def test_networks_built_with_auto_follow_the_cpu(monkeypatch, capability):
    from tabrepro.features import continuous
    from tabrepro.models.bishop.config import BiSHopConfig
    from tabrepro.models.bishop.model import BiSHopNetwork
    from tabrepro.models.npt.config import NPTConfig
    from tabrepro.models.npt.model import NPTNetwork

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    expected = capability == "AVX512" and kernels._ONEDNN_LINEAR
    npt = NPTNetwork([continuous("x"), continuous("y")], NPTConfig(embed_dim=8, n_layers=2, n_heads=2))
    assert {m.onednn for m in npt.modules() if isinstance(m, kernels.Linear)} == {expected}
    small = BiSHopConfig(embed_dim=8, patch_size=4, n_levels=1, d_model=8, n_heads=2, ffn_dim=8, n_decoded=4)
    bishop = BiSHopNetwork(small, cardinalities=[], n_numerical=3, n_outputs=2)
    assert {m.onednn for m in bishop.modules() if isinstance(m, kernels.Linear)} == {expected}


@pytest.mark.parametrize("config_module", ["tabrepro.models.npt.config", "tabrepro.models.bishop.config"])
def test_onednn_linear_takes_true_false_or_auto(config_module):
    import importlib

    module = importlib.import_module(config_module)
    config_class = module.NPTConfig if hasattr(module, "NPTConfig") else module.BiSHopConfig
    assert config_class().onednn_linear == "auto"
    for value in (True, False, "auto"):
        assert config_class(onednn_linear=value).onednn_linear == value
    with pytest.raises(ValueError, match="onednn_linear must be true, false or 'auto', got 'fast'"):
        config_class(onednn_linear="fast")
    with pytest.raises(ValueError, match="onednn_linear must be true, false or 'auto', got 1"):
        config_class(onednn_linear=1)  # equal to True, but not a boolean
