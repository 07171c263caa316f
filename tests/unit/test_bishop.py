"""BiSHop: α-entmax (values, limits, gradients), PLE, model shapes and parameter count, every
ablation switch, learning on a toy task, exact determinism and kill-and-resume, the estimator
adapter. CPU, one thread, fast (tiny configurations except the parameter-count test)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from entmax import sparsemax as reference_sparsemax

from tabrepro.features import FeatureLayout
from tabrepro.models.bishop import (
    AlphaEntmax,
    BiSHopConfig,
    BiSHopEstimator,
    BiSHopNetwork,
    BiSHopTrainer,
    PiecewiseLinearEncoding,
    TabularTensors,
)
from tabrepro.models.bishop.entmax import _newton_start, alpha_from_logit, entmax, entmax_bisect
from tabrepro.models.bishop.trainer import STATE_FILE, WEIGHTS_FILE

torch.set_num_threads(1)

TINY = dict(
    d_model=16,
    n_heads=2,
    ffn_dim=32,
    embed_dim=8,
    patch_size=4,
    n_pooling=3,
    n_levels=2,
    merge_factor=2,
    n_decoded=8,
    head_hidden=(1.0,),
    batch_size=32,
    onednn_linear=False,
    device="cpu",
)
SOLVERS = ("newton", "bisect")


def tiny(**overrides) -> BiSHopConfig:
    return BiSHopConfig(**{**TINY, **overrides})


def toy_data(n: int = 240, seed: int = 0, n_num: int = 3, cards=(3,), classification=True):
    """Rows whose label depends on a numerical feature and a categorical one."""
    g = torch.Generator().manual_seed(seed)
    x_num = torch.randn((n, n_num), generator=g)
    x_cat = (
        torch.stack([torch.randint(0, c, (n,), generator=g) for c in cards], 1)
        if cards
        else torch.zeros((n, 0), dtype=torch.long)
    )
    signal = x_num[:, 0] + (x_cat[:, 0] == 1).float() * 1.5 - 0.5 if cards else x_num[:, 0]
    if classification:
        y = (signal > 0).long()
    else:
        y = signal + 0.1 * torch.randn(n, generator=g)
    return TabularTensors(x_cat, x_num, y)


def split(data: TabularTensors, n_train: int, n_val: int):
    idx = torch.arange(len(data))
    return (data.rows(idx[:n_train]), data.rows(idx[n_train : n_train + n_val]), data.rows(idx[n_train + n_val :]))


def weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------- entmax
@pytest.mark.parametrize("solver", SOLVERS)
def test_entmax_alpha_one_is_softmax(solver):
    z = torch.randn(20, 7, dtype=torch.float64) * 3
    p = entmax(z, 0.0, solver=solver)
    torch.testing.assert_close(p, torch.softmax(z, -1), rtol=0, atol=1e-12)
    torch.testing.assert_close(entmax_bisect(z, 1.0), torch.softmax(z, -1), rtol=0, atol=1e-12)
    # and the limit is approached continuously
    near = entmax(z, 1e-7, solver=solver)
    assert (near - torch.softmax(z, -1)).abs().max() < 1e-5


@pytest.mark.parametrize("solver", SOLVERS)
def test_entmax_alpha_two_is_sparsemax(solver):
    z = torch.randn(20, 7, dtype=torch.float64) * 3
    p = entmax(z, 1.0, solver=solver)
    torch.testing.assert_close(p, reference_sparsemax(z, -1), rtol=0, atol=1e-12)
    assert (p == 0).any()  # genuinely sparse


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_entmax_is_a_distribution_and_solvers_agree(dtype):
    z = (torch.randn(4, 5, 6, 9) * 4).to(dtype)
    for eps in (0.0, 0.05, 0.3, 0.5, 0.9, 1.0):
        p_newton = entmax(z, eps, dim=-1, solver="newton")
        p_bisect = entmax(z, eps, dim=-1, solver="bisect")
        assert (p_newton >= 0).all()
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        torch.testing.assert_close(p_newton.sum(-1), torch.ones_like(p_newton.sum(-1)), rtol=0, atol=tol)
        torch.testing.assert_close(p_newton, p_bisect, rtol=0, atol=10 * tol)
    # along another dimension, with one alpha per head (broadcast)
    eps = torch.tensor([0.2, 0.5, 0.8, 1.0, 0.0], dtype=dtype).view(1, 5, 1, 1)
    p = entmax(z, eps, dim=2)
    torch.testing.assert_close(p.sum(2), torch.ones_like(p.sum(2)), rtol=0, atol=1e-5)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("alpha", [1.05, 1.3, 1.5, 1.8])
def test_entmax_gradcheck_scores_and_alpha(solver, alpha):
    z = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    eps = torch.tensor(alpha - 1.0, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s, e: entmax(s, e, solver=solver), (z, eps))
    # per-head alphas (the gradient is reduced over the broadcast dimensions)
    z4 = torch.randn(2, 3, 2, 5, dtype=torch.float64, requires_grad=True)
    eps4 = torch.tensor([0.1, alpha - 1.0, 0.9], dtype=torch.float64).view(1, 3, 1, 1)
    assert torch.autograd.gradcheck(lambda s, e: entmax(s, e, solver=solver), (z4, eps4.requires_grad_()))


@pytest.mark.parametrize("eps", [0.02, 0.3, 0.5, 1.0])
def test_newton_starts_left_of_the_root(eps):
    """Jensen's start leaves at least unit mass, so Newton still climbs monotonically; on a
    uniform row it is the root itself."""
    g = torch.Generator().manual_seed(0)
    u = torch.randn(500, 12, generator=g, dtype=torch.float64) * torch.rand(500, 1, generator=g, dtype=torch.float64)
    u = 4 * (u - u.amax(-1, keepdim=True))
    e = torch.tensor(eps, dtype=torch.float64)
    hi = -torch.expm1(-e * math.log(12)) / e
    tau = _newton_start(u, hi, -1)
    mass = torch.clamp(1 + e * (u - tau), min=0).pow(1 / e).sum(-1)
    assert (mass >= 1 - 1e-12).all()
    assert (tau > 0).any()
    torch.testing.assert_close(_newton_start(torch.zeros(3, 12, dtype=torch.float64), hi, -1), hi.expand(3, 1))


@pytest.mark.parametrize("eps", [0.02, 0.08, 0.1, 0.5, 0.95])
def test_entmax_float32_gradients_match_float64(eps):
    """Both forms of the α gradient (series below ε = 0.1, closed form from there) and the
    score gradient keep float32 close to a float64 reference, along a leading axis too."""
    g = torch.Generator().manual_seed(1)
    z = torch.randn(64, 5, 30, generator=g, dtype=torch.float64) * 3
    w = torch.randn(z.shape, generator=g, dtype=torch.float64)
    grads = {}
    for dtype in (torch.float64, torch.float32):
        zz = z.to(dtype).requires_grad_(True)
        e = torch.tensor(eps, dtype=dtype, requires_grad=True)
        out = (entmax(zz, e, dim=1) * w.to(dtype)).sum()
        grads[dtype] = [g.double() for g in torch.autograd.grad(out, (zz, e))]
    (gz64, ge64), (gz32, ge32) = grads[torch.float64], grads[torch.float32]
    # near sparsemax an entry on the support's edge may fall either side in float32
    assert float((gz32 - gz64).abs().max()) < 1e-4 * float(gz64.abs().max())
    assert abs(float(ge32 - ge64)) < 1e-4 * max(1.0, abs(float(ge64)))


def test_entmax_alpha_gradient_has_the_softmax_limit():
    """At α = 1 the α-gradient is the one-sided derivative (no 0/0 cancellation)."""
    z = torch.randn(4, 6, dtype=torch.float64)
    w = torch.randn(4, 6, dtype=torch.float64)

    def f(e: float | torch.Tensor) -> torch.Tensor:
        return (entmax(z, e) * w).sum()

    e0 = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(f(e0), e0)
    h = 1e-5
    one_sided = (-3 * f(0.0) + 4 * f(h) - f(2 * h)) / (2 * h)
    assert math.isfinite(float(grad))
    assert abs(float(grad) - float(one_sided)) < 1e-6 * max(1.0, abs(float(grad)))


def test_alpha_reparametrisation_stays_in_range_during_training():
    layer = AlphaEntmax(alpha_init=1.5)
    assert abs(float(layer.alpha) - 1.5) < 1e-7
    opt = torch.optim.SGD(layer.parameters(), lr=50.0)
    z = torch.randn(8, 5)
    for sign in (1.0, -1.0):
        for _ in range(30):  # push θ hard both ways
            opt.zero_grad()
            p = layer(z)
            (sign * (p * torch.log(p.clamp(min=1e-12))).sum()).backward()
            opt.step()
            alpha = float(alpha_from_logit(layer.theta.detach()))
            assert 1.0 < alpha < 2.0 or alpha in (1.0, 2.0)  # (1, 2), endpoints only by rounding
            assert torch.isfinite(layer(z)).all()
    # and inside a model trained for a few steps
    data = toy_data(64)
    trainer = BiSHopTrainer(
        tiny(lr=1e-2, max_epochs=2), "classification", cardinalities=(3,), n_numerical=3, n_classes=2
    )
    trainer.fit(data, None)
    alphas = trainer.model.alphas()
    assert len(alphas) > 0 and all(1.0 < a <= 2.0 for a in alphas)
    assert any(a != 1.5 for a in alphas)  # α is learned


# ------------------------------------------------------------------------------- PLE
def test_ple_formula_extrapolation_and_degenerate_bins():
    ple = PiecewiseLinearEncoding(1, 4)
    ple.fit(torch.tensor([[0.0], [1.0], [1.0], [1.0], [2.0], [3.0], [4.0], [4.0], [4.0]]))
    edges = ple.edges[0].tolist()
    assert edges == sorted(edges)
    # hand-made edges: b = (0, 1, 1, 2, 4) -> bin 2 is degenerate
    ple.edges.copy_(torch.tensor([[0.0, 1.0, 1.0, 2.0, 4.0]]))
    x = torch.tensor([[-1.0], [0.5], [1.0], [1.5], [3.0], [6.0]])
    e = ple(x)[:, 0]
    expected = torch.tensor(
        [
            [-1.0, 0.0, 0.0, 0.0],  # below b_0: the first component extrapolates
            [0.5, 0.0, 0.0, 0.0],
            [1.0, 1.0, 0.0, 0.0],  # the degenerate bin is a step at 1
            [1.0, 1.0, 0.5, 0.0],
            [1.0, 1.0, 1.0, 0.5],
            [1.0, 1.0, 1.0, 2.0],  # above b_G: the last component extrapolates
        ]
    )
    torch.testing.assert_close(e, expected)


def test_ple_bins_depend_on_training_rows_only():
    data = toy_data(120)
    train, val_a, _ = split(data, 60, 30)
    val_b = toy_data(30, seed=5)
    val_b = TabularTensors(val_b.x_cat, val_b.x_num * 10 + 3, val_b.y)
    edges = []
    for val in (val_a, val_b, None):
        trainer = BiSHopTrainer(tiny(), "classification", cardinalities=(3,), n_numerical=3, n_classes=2)
        trainer.prepare(train, val)
        edges.append(trainer.model.ple.edges.clone())
    assert torch.equal(edges[0], edges[1]) and torch.equal(edges[0], edges[2])
    expected = torch.nanquantile(train.x_num.double(), torch.linspace(0, 1, 9, dtype=torch.float64), dim=0).T.float()
    torch.testing.assert_close(edges[0], expected)
    # the bins are part of the state dict (saved with the model)
    assert "ple.edges" in trainer.model.state_dict()


# ------------------------------------------------------------------------------- model
def test_shapes_and_parameter_count_at_defaults():
    """30 numerical features, binary target, all defaults.

    16,985,727 parameters; the authors' code has 18,708,619 for the same input: their decoder
    has H + 1 levels (the first attends to the embedded input) where the thesis describes H.
    With decoder_input_level=True our count equals theirs exactly.
    """
    x_cat = torch.zeros((4, 0), dtype=torch.long)
    x_num = torch.randn(4, 30)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BiSHopNetwork(BiSHopConfig(), (), 30, 2)
        authors = BiSHopNetwork(BiSHopConfig(decoder_input_level=True), (), 30, 2)
    assert model.n_parameters() == 16_985_727
    assert authors.n_parameters() == 18_708_619
    head = sum(p.numel() for name, p in model.named_parameters() if name.startswith("head"))
    assert head == 7_264_082  # 720 -> 2880 -> 1440 -> 720 -> 2
    assert len(model.alphas()) == 21 and len(authors.alphas()) == 25
    model.fit_encoding(x_cat, x_num)
    model.eval()
    with torch.no_grad():
        encoded = model.encode(x_cat, x_num)
        assert [tuple(t.shape) for t in encoded] == [(4, 30, 4, 256), (4, 30, 4, 256), (4, 30, 1, 256), (4, 30, 1, 256)]
        assert model.decode(encoded).shape == (4, 30, 24)
        assert model(x_cat, x_num).shape == (4, 2)


def test_rows_are_independent_and_eval_decoder_sharing_is_exact():
    """Evaluation output of a row does not depend on the other rows of the batch (the decoder's
    first block runs once for the whole batch in eval mode)."""
    data = toy_data(6)
    model = BiSHopNetwork(tiny(), (3,), 3, 2)
    model.fit_encoding(data.x_cat, data.x_num)
    model.eval()
    with torch.no_grad():
        together = model(data.x_cat, data.x_num)
        alone = torch.cat([model(data.x_cat[i : i + 1], data.x_num[i : i + 1]) for i in range(6)])
        model.config = model.config.replace(share_decoder_input=False)
        model.train()
        model.dropout_source.generator = torch.Generator().manual_seed(0)
        # dropout off: train-mode path with per-row decoder input gives the same numbers
        for m in model.modules():
            if hasattr(m, "p_dropout"):
                m.p_dropout = 0.0
        model.config = model.config.replace(head_dropout=0.0)
        per_row = model(data.x_cat, data.x_num)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(together, per_row, rtol=1e-5, atol=1e-6)


def _per_row_decode(model: BiSHopNetwork, encoded: list[torch.Tensor]) -> torch.Tensor:
    """The straightforward decoder: E_pos expanded over the batch, every level per row."""
    batch = encoded[0].shape[0]
    memories = encoded if model.config.decoder_input_level else encoded[1:]
    y = model.pos_decoder.unsqueeze(0).expand(batch, -1, -1, -1)
    total = None
    for layer, memory in zip(model.decoder, memories):
        y, contribution = layer(y, memory)
        total = contribution if total is None else total + contribution
    return total.flatten(-2)


def _train_outputs_and_grads(model: BiSHopNetwork, data: TabularTensors):
    model.zero_grad(set_to_none=True)
    model.dropout_generator = torch.Generator().manual_seed(7)
    out = model(data.x_cat, data.x_num)
    (out.square().sum() + out.sum()).backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    "overrides", [{}, {"block": "mlp"}, {"n_decoded": 4}], ids=["bishop", "mlp-block", "one-decoder-patch"]
)
def test_shared_decoder_input_fast_path_matches_per_row_computation(overrides, monkeypatch):
    """Training with per-row dropout: the decoder's first level computes its batch-independent
    part once (rows=batch) and the fused residual dropout (addcmul). Pinned against the plain
    per-row computation with the same dropout masks: same outputs and gradients."""
    data = toy_data(12)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = BiSHopNetwork(tiny(**overrides), (3,), 3, 2)
    model.fit_encoding(data.x_cat, data.x_num)
    model.train()
    fast_out, fast_grads = _train_outputs_and_grads(model, data)
    monkeypatch.setattr(model, "decode", lambda encoded: _per_row_decode(model, encoded))
    slow_out, slow_grads = _train_outputs_and_grads(model, data)
    torch.testing.assert_close(fast_out, slow_out, rtol=1e-5, atol=1e-6)
    assert fast_grads.keys() == slow_grads.keys()
    for name, grad in fast_grads.items():
        torch.testing.assert_close(grad, slow_grads[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("path", ["fold_into_queries", "fold_into_memory"])
@pytest.mark.parametrize(
    "overrides",
    [{}, {"n_heads": 3, "d_model": 16}, {"attention": "hopfield", "learn_beta": True}, {"attention": "attention"}],
    ids=["gsh", "heads-not-dividing", "hopfield-learned-beta", "attention"],
)
def test_folded_projection_paths_match_the_direct_computation(overrides, path, monkeypatch):
    """Each re-associated path, forced on every GSH layer that can take it (column, pooling, row
    and cross layers alike), gives the direct computation's outputs and gradients with the
    same dropout masks."""
    from tabrepro.models.bishop.model import HopfieldLayer

    data = toy_data(12, n_num=6)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = BiSHopNetwork(tiny(n_pooling=2, **overrides), (3,), 6, 2)
    model.fit_encoding(data.x_cat, data.x_num)
    model.train()
    taken: list[str] = []
    monkeypatch.setattr(HopfieldLayer, "cheapest_path", lambda *a: taken.append(path) or path)
    folded_out, folded_grads = _train_outputs_and_grads(model, data)
    assert len(taken) >= 10  # every level's column, pooling and row layers, the cross layers
    monkeypatch.setattr(HopfieldLayer, "fold_projections", False)
    direct_out, direct_grads = _train_outputs_and_grads(model, data)
    torch.testing.assert_close(folded_out, direct_out, rtol=1e-5, atol=1e-6)
    assert folded_grads.keys() == direct_grads.keys()
    # atol from the largest gradient: "attention"'s W_K biases get 0 up to rounding (softmax is
    # shift-invariant), which the two paths round differently
    atol = 1e-6 * max(g.abs().max().item() for g in direct_grads.values())
    for name, grad in folded_grads.items():
        torch.testing.assert_close(grad, direct_grads[name], rtol=1e-4, atol=atol, msg=name)


def test_path_choice_at_the_defaults():
    """At the defaults (D 256, 4 heads, C 10, 30 features) the pooling GSH folds W_K and W_V
    into the queries and the row GSH W_Q and W_O into the memory; self-attention over patches
    and the decoder's cross layer stay direct (folding would cost more there)."""
    from tabrepro.models.bishop.model import HopfieldLayer
    from tabrepro.nn.dropout import DropoutSource

    layer = HopfieldLayer(BiSHopConfig(onednn_linear=False), DropoutSource())
    b, n, p, c, d = 32, 30, 4, 10, 256
    x, pooled, pooling = (b, n, p, d), (b, p, c, d), (p, c, d)
    assert layer.cheapest_path(torch.Size(pooling), torch.Size(x), -2, -3) == "fold_into_queries"
    assert layer.cheapest_path(torch.Size(x), torch.Size(pooled), -3, -2) == "fold_into_memory"
    assert layer.cheapest_path(torch.Size(x), torch.Size(x), -2, -2) == "direct"
    assert layer.cheapest_path(torch.Size((b, n, 3, d)), torch.Size(x), -2, -2) == "direct"


def test_fused_residual_dropout_matches_plain_dropout():
    from tabrepro.models.bishop.model import add_dropped
    from tabrepro.nn.dropout import DropoutSource, dropout

    x = torch.randn(4, 5, 3, 8, requires_grad=True)
    branch = torch.randn(4, 5, 3, 8, requires_grad=True)
    source = DropoutSource()
    results = []
    for fused in (True, False):
        source.generator = torch.Generator().manual_seed(0)
        out = add_dropped(x, branch, 0.2, True, source) if fused else x + dropout(branch, 0.2, True, source)
        gx, gb = torch.autograd.grad(out.square().sum(), (x, branch))
        results.append((out, gx, gb))
    for fused, plain in zip(*results):
        torch.testing.assert_close(fused, plain)
    assert torch.equal(add_dropped(x, branch, 0.2, False, source), x + branch)


@pytest.mark.parametrize("max_norm", [1e-3, 1e3], ids=["clipping", "not-clipping"])
def test_clipping_folded_into_fused_adam_matches_clip_grad_norm(max_norm):
    """BiSHopTrainer._clipped_step (skip at factor 1, grad_scale in fused Adam otherwise) gives
    the update of clip_grad_norm_ followed by the step."""
    data = toy_data(32)
    trainer = BiSHopTrainer(
        tiny(grad_clip_norm=max_norm, lr=1e-2), "classification", cardinalities=(3,), n_numerical=3, n_classes=2
    )
    trainer.prepare(data)
    model, optimizer = trainer.model, trainer.optimizer
    reference = {k: v.clone() for k, v in model.state_dict().items()}
    reference_model = BiSHopNetwork(trainer.config, (3,), 3, 2)
    reference_model.load_state_dict(reference)
    reference_optimizer = torch.optim.Adam(reference_model.parameters(), lr=1e-2, fused=True)
    for m, opt in ((model, None), (reference_model, reference_optimizer)):
        m.eval()  # no dropout: both see the same gradients
        trainer.loss(m(data.x_cat, data.x_num), data.y).backward()
        if opt is None:
            trainer._clipped_step()
        else:
            torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm)
            opt.step()
    assert not hasattr(optimizer, "grad_scale")
    for (name, a), b in zip(model.named_parameters(), reference_model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7, msg=name)
        assert not torch.equal(a, reference[name]) or a.grad is None or not a.grad.any()


ABLATIONS = [
    {"categorical_encoding": "onehot"},
    {"numerical_encoding": "raw"},
    {"patch_size": 1},
    {"decoder": False},
    {"block": "mlp"},
    {"attention": "hopfield"},
    {"attention": "hopfield", "learn_beta": True},
    {"attention": "attention"},
    {"decoder_input_level": True},
    {"merge_first_level": True},
    {"share_decoder_input": True},
    {"entmax_solver": "bisect"},
    {"categorical_encoding": "onehot", "numerical_encoding": "raw"},
    {"embed_dim": 10, "patch_size": 4, "n_decoded": 5},  # G, S not multiples of L
    {"d_model": 18, "n_heads": 4},  # heads of width 18 // 4 = 4 (Table A.4 has such pairs)
    {"n_pooling": 1},
]


@pytest.mark.parametrize("overrides", ABLATIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_every_ablation_switch_builds_and_runs(overrides):
    data = toy_data(10, cards=(3, 2))
    model = BiSHopNetwork(tiny(**overrides), (3, 2), 3, 2)
    model.fit_encoding(data.x_cat, data.x_num)
    model.dropout_generator = torch.Generator().manual_seed(0)
    model.train()
    out = model(data.x_cat, data.x_num)
    assert out.shape == (10, 2) and torch.isfinite(out).all()
    out.sum().backward()
    model.eval()
    with torch.no_grad():
        assert torch.isfinite(model(data.x_cat, data.x_num)).all()
    if overrides.get("categorical_encoding") == "onehot":
        assert model.categorical is None and model.n_tokens == 3 + 3 + 2
    if overrides.get("attention") in ("hopfield", "attention") or overrides.get("block") == "mlp":
        assert model.alphas() == [] or overrides.get("block") == "mlp"
    if overrides.get("block") == "mlp":
        assert not any(isinstance(m, torch.nn.Module) and type(m).__name__ == "BiSHopModule" for m in model.modules())


def test_a_single_feature_works():
    model = BiSHopNetwork(tiny(), (), 1, 3)
    x_cat, x_num = torch.zeros((5, 0), dtype=torch.long), torch.randn(5, 1)
    model.fit_encoding(x_cat, x_num)
    model.train()
    out = model(x_cat, x_num)
    assert out.shape == (5, 3) and torch.isfinite(out).all()
    out.sum().backward()


def test_missing_categories_and_numbers_are_handled():
    model = BiSHopNetwork(tiny(), (3,), 2, 2)
    x_cat = torch.tensor([[0], [-1], [2]])
    x_num = torch.tensor([[0.1, float("nan")], [1.0, 2.0], [float("nan"), -1.0]])
    model.fit_encoding(x_cat, x_num)
    model.eval()
    with torch.no_grad():
        assert torch.isfinite(model(x_cat, x_num)).all()


# ------------------------------------------------------------------------------- training
def test_learns_a_toy_classification_task():
    data = toy_data(400)
    train, val, test = split(data, 240, 80)
    trainer = BiSHopTrainer(
        tiny(lr=1e-2, max_epochs=25, batch_size=48), "classification", cardinalities=(3,), n_numerical=3, n_classes=2
    )
    result = trainer.fit(train, val)
    accuracy = float((trainer.outputs(test).argmax(1) == test.y).float().mean())
    assert accuracy > 0.8, accuracy
    assert result.best_val_loss is not None and result.best_val_loss < math.log(2)
    assert len(result.history) == result.epochs


def test_batches_per_epoch_caps_the_steps_of_every_epoch(monkeypatch):
    """A benchmark on millions of rows runs a few steps per epoch; without the cap every row is
    seen once per epoch; a cap of zero is refused."""
    data = toy_data(240)
    train, val, _ = split(data, 200, 40)
    steps: list[int] = []
    original = BiSHopTrainer.train_step

    def counting(self, rows):
        steps.append(rows.numel())
        return original(self, rows)

    monkeypatch.setattr(BiSHopTrainer, "train_step", counting)
    for cap, expected in ((None, [32] * 6 + [8]), (2, [32, 32])):
        steps.clear()
        config = tiny(max_epochs=1, batches_per_epoch=cap)
        BiSHopTrainer(config, "classification", cardinalities=(3,), n_numerical=3, n_classes=2).fit(train, val)
        assert steps == expected
    with pytest.raises(ValueError, match="batches_per_epoch"):
        tiny(batches_per_epoch=0)


def test_regression_trains_on_the_standardised_target():
    data = toy_data(160, classification=False)
    train, val, test = split(data, 100, 30)
    trainer = BiSHopTrainer(tiny(lr=3e-3, max_epochs=6, batch_size=50), "regression", cardinalities=(3,), n_numerical=3)
    result = trainer.fit(train, val)
    out = trainer.outputs(test)
    assert out.shape == (len(test), 1) and torch.isfinite(out).all()
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]


def test_bf16_autocast_option_trains():
    data = toy_data(64)
    trainer = BiSHopTrainer(
        tiny(max_epochs=1, bf16_autocast=True), "classification", cardinalities=(3,), n_numerical=3, n_classes=2
    )
    trainer.fit(data, data)
    out = trainer.outputs(data)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()


def test_same_seed_gives_identical_weights_and_other_seed_does_not():
    data = toy_data(100)
    train, val, _ = split(data, 70, 30)
    states = []
    for seed in (3, 3, 4):
        trainer = BiSHopTrainer(
            tiny(max_epochs=3, seed=seed, lr=1e-3), "classification", cardinalities=(3,), n_numerical=3, n_classes=2
        )
        trainer.fit(train, val)
        states.append({k: v.clone() for k, v in trainer.model.state_dict().items()})
    assert weights_equal(states[0], states[1])
    assert not weights_equal(states[0], states[2])


class _Killed(Exception):
    pass


def test_kill_and_resume_ends_with_identical_weights(tmp_path: Path):
    data = toy_data(100)
    train, val, _ = split(data, 70, 30)
    # lr_patience 0 and patience 3: the scheduler and early stopping act within the run, so
    # resume must restore them (and the dropout generator, optimiser, best weights) exactly
    config = tiny(max_epochs=8, lr=3e-3, lr_patience=0, early_stopping_patience=3)

    def make(directory):
        return BiSHopTrainer(
            config, "classification", cardinalities=(3,), n_numerical=3, n_classes=2, checkpoint_dir=directory
        )

    reference = make(tmp_path / "straight")
    expected = reference.fit(train, val)

    def kill_after(epoch_to_die: int):
        def callback(epoch, record):
            if epoch == epoch_to_die:
                raise _Killed

        return callback

    interrupted = tmp_path / "interrupted"
    with pytest.raises(_Killed):
        make(interrupted).fit(train, val, callback=kill_after(2))
    assert (interrupted / STATE_FILE).exists() and not (interrupted / WEIGHTS_FILE).exists()
    with pytest.raises(_Killed):  # killed a second time, later
        make(interrupted).fit(train, val, callback=kill_after(min(4, expected.epochs - 1)))
    resumed_trainer = make(interrupted)
    resumed = resumed_trainer.fit(train, val)
    assert resumed.resumed_from is not None and resumed.resumed_from >= 2
    assert resumed.epochs == expected.epochs and resumed.best_epoch == expected.best_epoch
    assert resumed.best_val_loss == expected.best_val_loss
    assert resumed.history == expected.history
    assert weights_equal(resumed_trainer.model.state_dict(), reference.model.state_dict())
    # resuming a finished run changes nothing
    again = make(interrupted)
    again.fit(train, val)
    assert weights_equal(again.model.state_dict(), reference.model.state_dict())
    # the weights-only artefact reproduces the predictions
    loaded = make(None)
    loaded.load_weights(interrupted / WEIGHTS_FILE)
    assert torch.equal(loaded.outputs(val), reference.outputs(val))


def test_resume_refuses_a_different_config_or_data(tmp_path: Path):
    data = toy_data(80)
    train, val, _ = split(data, 50, 30)
    BiSHopTrainer(
        tiny(max_epochs=1), "classification", cardinalities=(3,), n_numerical=3, n_classes=2, checkpoint_dir=tmp_path
    ).fit(train, val)
    with pytest.raises(ValueError, match="different BiSHopConfig"):
        BiSHopTrainer(
            tiny(max_epochs=1, lr=1e-2),
            "classification",
            cardinalities=(3,),
            n_numerical=3,
            n_classes=2,
            checkpoint_dir=tmp_path,
        ).fit(train, val)
    with pytest.raises(ValueError, match="different data"):
        BiSHopTrainer(
            tiny(max_epochs=1),
            "classification",
            cardinalities=(3,),
            n_numerical=3,
            n_classes=2,
            checkpoint_dir=tmp_path,
        ).fit(val, train)


def test_config_dict_round_trip_and_unknown_fields():
    config = tiny(head_hidden=(2.0, 1.0))
    assert BiSHopConfig.from_dict(config.to_dict()) == config
    assert config.replace(lr=0.5).lr == 0.5 and config.lr != 0.5
    with pytest.raises(ValueError, match=r"unknown BiSHopConfig field\(s\): bogus, other"):
        BiSHopConfig.from_dict({**config.to_dict(), "other": 1, "bogus": 2})


def test_early_stopping_stops_and_keeps_the_best_epoch():
    data = toy_data(90)
    train, val, _ = split(data, 60, 30)
    trainer = BiSHopTrainer(
        tiny(max_epochs=30, lr=5e-2, early_stopping_patience=2),
        "classification",
        cardinalities=(3,),
        n_numerical=3,
        n_classes=2,
    )
    result = trainer.fit(train, val)
    val_losses = [r["val_loss"] for r in result.history]
    assert result.stopped_early and result.epochs < 30
    assert result.best_epoch == 1 + int(np.argmin(val_losses))
    assert result.epochs - result.best_epoch == 2
    assert trainer.mean_loss(val) == pytest.approx(min(val_losses), rel=1e-5)


@pytest.mark.parametrize("restore_best", [True, False])
def test_predicting_the_validation_rows_reuses_the_selected_weights_pass(restore_best, monkeypatch):
    X, y, groups = _encoded_matrix(300)
    config = tiny(lr=5e-2, max_epochs=12, batch_size=48, early_stopping_patience=3, restore_best=restore_best)
    est = BiSHopEstimator("classification", config, n_classes=2)
    est.fit(X[:200], y[:200], X[200:260], y[200:260], layout=FeatureLayout.from_groups(groups))
    trainer = est.trainer_
    fresh = trainer.outputs(est._tensors(X[200:260])).double().numpy()
    passes = []
    run = trainer.outputs
    monkeypatch.setattr(trainer, "outputs", lambda data: passes.append(len(data)) or run(data))
    reused = est._outputs(X[200:260].copy())
    assert not passes and np.array_equal(reused, fresh)
    est._outputs(X[260:])  # other rows: the model runs
    assert passes == [40]


# ------------------------------------------------------------------------------- estimator
def _encoded_matrix(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    c = rng.integers(0, 3, n)
    b = rng.integers(0, 2, n)
    onehot = np.eye(3)[c]
    onehot[rng.random(n) < 0.05] = 0.0  # missing category
    X = np.column_stack([a, onehot, b, rng.normal(size=n)])
    y = ((a + (c == 1) * 1.5 - 0.5) > 0).astype(np.int64)
    groups = [("continuous", 1), ("categorical", 3), ("categorical", 1), ("continuous", 1)]
    return X, y, groups


def test_feature_layout_decodes_the_project_matrix():
    X, _, groups = _encoded_matrix(50)
    layout = FeatureLayout.from_groups(groups)
    x_cat, x_num, cards = (
        layout.category_codes(X),
        layout.continuous_values(X).astype(np.float32),
        layout.category_counts,
    )
    assert cards == (3, 2) and x_cat.shape == (50, 2) and x_num.shape == (50, 2)
    missing = X[:, 1:4].sum(1) == 0
    assert (x_cat[missing, 0] == -1).all()
    assert (x_cat[~missing, 0] == X[~missing, 1:4].argmax(1)).all()
    assert (x_cat[:, 1] == X[:, 4]).all()
    np.testing.assert_allclose(x_num, X[:, [0, 5]].astype(np.float32))


def test_estimator_fit_predict_and_save_weights(tmp_path: Path):
    X, y, groups = _encoded_matrix(360)
    est = BiSHopEstimator(
        "classification", tiny(lr=3e-3, max_epochs=10, batch_size=48), n_classes=2, checkpoint_dir=tmp_path / "ckpt"
    )
    est.fit(X[:240], y[:240], X[240:300], y[240:300], layout=FeatureLayout.from_groups(groups))
    proba = est.predict_proba(X[300:])
    assert proba.shape == (60, 2)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-12)
    assert (est.predict(X[300:]) == proba.argmax(1)).all()
    assert (est.predict(X[300:]) == y[300:]).mean() > 0.75
    path = est.save_weights(tmp_path / "weights.pt")
    assert path.exists() and path.stat().st_size < 5_000_000
    state = torch.load(path, weights_only=True)
    assert "ple.edges" in state and all(isinstance(v, torch.Tensor) for v in state.values())

    reg = BiSHopEstimator("regression", tiny(max_epochs=2))
    reg.fit(X[:100], X[:100, 5], None, None, layout=FeatureLayout.from_groups(groups))
    assert reg.predict(X[300:]).shape == (60,)
    with pytest.raises(AttributeError):
        reg.predict_proba(X[:3])
