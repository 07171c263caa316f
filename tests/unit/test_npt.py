"""Non-Parametric Transformer: equivariance, label safety, masking, losses, optimiser, exact
determinism and resume, the lookup task, and the estimator adapter. CPU, one thread, fast."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from tabrepro.features import FeatureLayout, categorical, continuous
from tabrepro.models.npt import NPTConfig, NPTNetwork, NPTTable, NPTTrainer
from tabrepro.models.npt.estimator import NPTEstimator, _codes
from tabrepro.models.npt.masking import (
    TEST,
    TRAIN,
    VAL,
    batch_plan,
    draw_masks,
    entry_losses,
    feature_loss_weight,
    npt_loss,
)
from tabrepro.models.npt.optim import Lamb, Lookahead, LRSchedule, build_optimizer, clip_gradients
from tabrepro.models.npt.trainer import BEST_WEIGHTS_FILE, STATE_FILE
from tabrepro.nn.dropout import dropout_mask

torch.set_num_threads(1)

TINY = {"embed_dim": 8, "n_layers": 4, "n_heads": 2, "eval_every_epochs": 1, "device": "cpu"}
ATTRIBUTES = (continuous("a"), categorical(3, "b"), continuous("c"), continuous("d"), categorical(2, "target"))


def make_table(
    n: int = 60, seed: int = 0, attributes=ATTRIBUTES, fractions=(0.6, 0.2), missing_rate: float = 0.0
) -> NPTTable:
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn((n, len(attributes)), generator=generator)
    for j, attribute in enumerate(attributes):
        if attribute.is_categorical:
            values[:, j] = torch.randint(0, attribute.n_categories, (n,), generator=generator).float()
    if attributes[-1].is_categorical:  # a learnable target
        values[:, -1] = (values[:, 0] + values[:, 2] > 0).float()
    if missing_rate:
        holes = torch.rand((n, len(attributes)), generator=generator) < missing_rate
        holes[:, -1] = False
        values[holes] = float("nan")
    roles = torch.full((n,), TEST)
    order = torch.randperm(n, generator=generator)
    n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
    roles[order[:n_train]] = TRAIN
    roles[order[n_train : n_train + n_val]] = VAL
    return NPTTable(attributes, values, roles)


def with_test_labels(table: NPTTable, labels: torch.Tensor) -> NPTTable:
    """The same table with different labels on the test rows."""
    values = torch.where(table.missing, float("nan"), table.inputs)
    values[:, -1] = table.labels
    test = table.split == TEST
    values[test, -1] = labels[test]
    return NPTTable(table.attributes, values, table.split)


def weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- model
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"attention_scale": "full_width", "kv_from_normalised": False, "residual_bias": True},
        {"onednn_linear": False},
    ],
)
def test_rows_permutation_equivariance(options):
    config = NPTConfig(**TINY, **options)
    torch.manual_seed(0)
    model = NPTNetwork(ATTRIBUTES, config).eval()
    table = make_table(40)
    permutation = torch.randperm(40)
    with torch.no_grad():
        out = model.forward_codes(table.inputs, table.input_missing)
        out_perm = model.forward_codes(table.inputs[permutation], table.input_missing[permutation])
    for a, b in zip(out, out_perm):
        torch.testing.assert_close(a[permutation], b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("datapoint_attention", ["full", "isab", "rowwise", "identity"])
def test_the_outputs_of_some_rows_are_theirs_in_the_whole_batch(datapoint_attention):
    """forward(rows=...) (an evaluation pass's hidden targets) computes those rows' outputs only,
    attending to every row: what the whole batch gives them, up to float32 kernel rounding."""
    extra = {"n_inducing": 4} if datapoint_attention == "isab" else {}
    model = NPTNetwork(ATTRIBUTES, NPTConfig(**{**TINY, "datapoint_attention": datapoint_attention, **extra})).eval()
    table = make_table(40)
    rows = torch.tensor([3, 17, 18, 39])
    with torch.no_grad():
        whole = model.forward_codes(table.inputs, table.input_missing)
        some = model.forward_codes(table.inputs, table.input_missing, rows)
    assert [tuple(o.shape) for o in some] == [(4, o.shape[1]) for o in whole]
    for a, b in zip(whole, some, strict=True):
        torch.testing.assert_close(a[rows], b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="evaluation"):
        model.train().forward_codes(table.inputs, table.input_missing, rows)


def test_model_structure_and_ablation_switch():
    model = NPTNetwork(ATTRIBUTES, NPTConfig(**TINY))
    assert model.block_kinds == ("abd", "aba", "abd", "aba")
    assert model.blocks[0].width == 5 * 8 and model.blocks[1].width == 8
    out = model.forward_codes(make_table(10).inputs, make_table(10).input_missing)
    assert [tuple(o.shape) for o in out] == [(10, 1), (10, 3), (10, 1), (10, 1), (10, 2)]
    rowwise = NPTNetwork(ATTRIBUTES, NPTConfig(**{**TINY, "datapoint_attention": "rowwise"}))
    assert not rowwise.blocks[0].attend and not hasattr(rowwise.blocks[0], "qkv")
    identity = NPTNetwork(ATTRIBUTES, NPTConfig(**{**TINY, "datapoint_attention": "identity"}))
    assert identity.block_kinds == ("aba", "aba")
    # Without attention between datapoints a row's prediction ignores every other row.
    rowwise.eval()
    table = make_table(12)
    with torch.no_grad():
        full = rowwise.forward_codes(table.inputs, table.input_missing)[-1]
        alone = rowwise.forward_codes(table.inputs[:1], table.input_missing[:1])[-1]
    torch.testing.assert_close(full[:1], alone, rtol=1e-4, atol=1e-5)


def test_masked_values_never_reach_the_model():
    model = NPTNetwork(ATTRIBUTES, NPTConfig(**TINY)).eval()
    table = make_table(20)
    mask = torch.zeros_like(table.input_missing)
    mask[:, 2] = True
    changed = table.inputs.clone()
    changed[:, 2] = 123.0
    changed[::2, 2] = float("nan")
    with torch.no_grad():
        a = model.forward_codes(table.inputs, mask)
        b = model.forward_codes(changed, mask)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_onednn_linear_matches_plain_linear():
    torch.manual_seed(0)
    fast = NPTNetwork(ATTRIBUTES, NPTConfig(**TINY, onednn_linear=True)).eval()
    plain = NPTNetwork(ATTRIBUTES, NPTConfig(**TINY, onednn_linear=False)).eval()
    plain.load_state_dict(fast.state_dict())
    table = make_table(30)
    outs = []
    for model in (fast, plain):
        model.zero_grad()
        out = model.forward_codes(table.inputs, table.input_missing)
        sum(o.square().sum() for o in out).backward()
        outs.append((out, [p.grad.clone() for p in model.parameters()]))
    for a, b in zip(outs[0][0], outs[1][0]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(outs[0][1], outs[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-5)


def test_dropout_rate_and_scaling():
    generator = torch.Generator().manual_seed(0)

    class Source:
        pass

    source = Source()
    source.generator = generator
    x = torch.ones(400_000)
    keep = dropout_mask(x, 0.1, source)  # type: ignore[arg-type]
    values = torch.unique(keep).tolist()
    assert len(values) == 2 and values[0] == 0.0 and values[1] == pytest.approx(1 / 0.9)
    assert abs(float((keep == 0).float().mean()) - 0.1) < 0.003
    assert abs(float(keep.mean()) - 1.0) < 0.005


# --------------------------------------------------------------------------- label safety
def test_table_hides_non_training_targets_by_construction():
    table = make_table(50)
    hidden = table.split != TRAIN
    assert torch.all(table.inputs[hidden, -1] == 0)
    assert torch.all(table.input_missing[hidden, -1])
    assert not torch.all(table.labels[hidden] == 0)  # the labels exist, but only here
    train = table.split == TRAIN
    assert torch.equal(table.inputs[train, -1], table.labels[train])


@pytest.mark.parametrize("p_target", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("p_randomise", [0.0, 0.1, 1.0])
def test_no_masking_setting_reveals_hidden_targets(p_target, p_randomise):
    table = make_table(200)
    config = NPTConfig(p_target=p_target, p_randomise=p_randomise, p_feature=0.5)
    draw = draw_masks(table, config, torch.Generator().manual_seed(1))
    hidden = table.split != TRAIN
    assert torch.all(draw.mask[hidden, -1]) and torch.all(draw.values[hidden, -1] == 0)
    assert not torch.any(draw.target_selected[hidden])


@pytest.mark.parametrize("batch_size", [None, 16])
def test_test_labels_change_nothing(batch_size):
    table = make_table(60)
    flipped = with_test_labels(table, 1.0 - table.labels)
    assert torch.equal(table.inputs, flipped.inputs)
    config = NPTConfig(**TINY, max_steps=8, p_target=0.5, batch_size=batch_size, stratify_batches=True)
    runs = []
    for data in (table, flipped):
        trainer = NPTTrainer(data.attributes, config)
        result = trainer.fit(data)
        runs.append((result, trainer.model.state_dict(), trainer.target_outputs()))
    (r1, w1, o1), (r2, w2, o2) = runs
    assert r1.history == r2.history and r1.val_history == r2.val_history
    assert weights_equal(w1, w2)
    assert torch.equal(o1, o2)
    # ... while the test labels did change, and they are what test scoring sees.
    assert not torch.equal(table.labels, flipped.labels)


# --------------------------------------------------------------------------- masking
def test_masking_rates_and_90_10_rule():
    attributes = (continuous(), categorical(4), continuous(), categorical(3), continuous())
    n = 20_000
    table = make_table(n, attributes=attributes, fractions=(0.7, 0.1), missing_rate=0.05)
    config = NPTConfig(p_feature=0.15, p_target=0.5, p_randomise=0.1)
    draw = draw_masks(table, config, torch.Generator().manual_seed(3))
    train = table.split == TRAIN
    observed = ~table.missing

    features = draw.feature_selected[:, :-1]
    assert not torch.any(features & table.missing[:, :-1])  # missing entries never scored
    rate = features[observed[:, :-1]].float().mean()  # train and (semi-supervised) other rows
    assert abs(float(rate) - 0.15) < 0.005
    assert abs(float(draw.target_selected[train].float().mean()) - 0.5) < 0.015
    assert not torch.any(draw.target_selected[~train])

    selected = torch.cat([features, draw.target_selected[:, None]], dim=1)
    randomised = draw.randomised
    assert torch.all(randomised <= selected)
    assert abs(float(randomised.sum() / selected.sum()) - 0.1) < 0.01
    masked = selected & ~randomised
    assert torch.all(draw.mask[masked]) and torch.all(draw.values[masked] == 0)
    assert not torch.any(draw.mask[randomised])
    untouched = ~selected & ~table.input_missing
    assert torch.equal(draw.values[untouched], table.inputs[untouched])
    for j, attribute in enumerate(attributes):
        drawn = draw.values[randomised[:, j], j]
        if attribute.is_categorical:
            counts = torch.bincount(drawn.long(), minlength=attribute.n_categories).float()
            assert counts.numel() == attribute.n_categories
            assert float(counts.min() / counts.max()) > 0.6
        else:
            assert abs(float(drawn.mean())) < 0.15 and abs(float(drawn.std()) - 1) < 0.15

    # Feature masking restricted to training rows when asked.
    only_train = draw_masks(table, config.replace(feature_mask_non_train=False), torch.Generator().manual_seed(3))
    assert not torch.any(only_train.feature_selected[~train])


def _whole_table_draw(table, config, generator):
    """The mask draw as one call per random stream over the whole table (how it was drawn
    before it was drawn in pieces): the reference the pieces must reproduce bit for bit."""
    n, d = table.inputs.shape
    u_select, u_randomise, u_class = (torch.rand((n, d), generator=generator) for _ in range(3))
    z_value = torch.randn((n, d), generator=generator)
    is_train = table.split == TRAIN
    candidates = ~table.input_missing
    if not config.feature_mask_non_train:
        candidates[:, :-1] &= is_train.unsqueeze(1)
    candidates[:, -1] &= is_train
    rates = torch.full((d,), config.p_feature)
    rates[-1] = config.p_target
    selected = candidates & (u_select < rates)
    randomised = selected & (u_randomise < config.p_randomise)
    n_classes = torch.tensor([a.n_categories for a in table.attributes])
    random_class = torch.minimum(torch.floor(u_class * n_classes), (n_classes - 1).clamp(min=0))
    mask = table.input_missing | (selected & ~randomised)
    values = torch.where(randomised, torch.where(n_classes > 0, random_class, z_value), table.inputs)
    return {"values": torch.where(mask, 0.0, values), "mask": mask, "randomised": randomised, "selected": selected}


@pytest.mark.parametrize("piece_entries", [1, 16, 37, 1000, 1 << 22])
@pytest.mark.parametrize("feature_mask_non_train", [True, False])
def test_a_mask_draw_in_pieces_draws_the_whole_table_s_numbers(piece_entries, feature_mask_non_train):
    attributes = (continuous(), categorical(4), continuous(), categorical(3), continuous(), categorical(2))
    table = make_table(1003, attributes=attributes, fractions=(0.7, 0.1), missing_rate=0.05)
    config = NPTConfig(p_feature=0.15, p_target=0.5, p_randomise=0.3, feature_mask_non_train=feature_mask_non_train)
    draw = draw_masks(table, config, torch.Generator().manual_seed(5), piece_entries=piece_entries)
    whole = _whole_table_draw(table, config, torch.Generator().manual_seed(5))
    assert torch.equal(draw.values, whole["values"]) and torch.equal(draw.mask, whole["mask"])
    assert torch.equal(draw.randomised, whole["randomised"])
    assert torch.equal(draw.target_selected, whole["selected"][:, -1])
    assert torch.equal(draw.feature_selected[:, :-1], whole["selected"][:, :-1])
    assert not draw.feature_selected[:, -1].any()
    assert int(draw.randomised.sum()) > 50  # the random classes and values were exercised


def test_masks_are_redrawn_each_epoch_and_reproducible():
    table = make_table(100)
    config = NPTConfig(**TINY, max_steps=4)
    trainer = NPTTrainer(table.attributes, config)
    trainer.prepare(table)
    first, second = trainer._epoch_plan(0).masks, trainer._epoch_plan(1).masks
    assert not torch.equal(first.mask, second.mask)
    again = NPTTrainer(table.attributes, config)
    again.prepare(table)
    assert torch.equal(again._epoch_plan(1).masks.mask, second.mask)


def test_minibatches_keep_split_proportions_and_strata():
    table = make_table(200, fractions=(0.6, 0.1))
    rows = torch.arange(200)
    batches = batch_plan(table, rows, 50, torch.Generator().manual_seed(0), stratify=True)
    assert len(batches) == 4
    assert torch.equal(torch.sort(torch.cat(batches)).values, rows)
    for batch in batches:
        counts = torch.bincount(table.split[batch], minlength=3)
        assert counts.tolist() in ([30, 5, 15],)
        labels = table.inputs[batch][table.split[batch] == TRAIN, -1]
        share = float(labels.mean())
        overall = float(table.inputs[table.split == TRAIN, -1].mean())
        assert abs(share - overall) <= 1 / 30 + 1e-6


# --------------------------------------------------------------------------- loss
def test_losses_are_normalised_by_their_own_counts():
    attributes = (continuous(), categorical(3), categorical(2))
    generator = torch.Generator().manual_seed(0)
    n = 8
    outputs = [
        torch.randn(n, 1, generator=generator),
        torch.randn(n, 3, generator=generator),
        torch.randn(n, 2, generator=generator),
    ]
    truth = torch.stack(
        [
            torch.randn(n, generator=generator),
            torch.randint(0, 3, (n,), generator=generator).float(),
            torch.randint(0, 2, (n,), generator=generator).float(),
        ],
        dim=1,
    )
    target_selected = torch.tensor([1, 1, 0, 0, 1, 0, 0, 0], dtype=torch.bool)
    feature_selected = torch.zeros(n, 3, dtype=torch.bool)
    feature_selected[[0, 3, 5], 0] = True
    feature_selected[[1, 2], 1] = True

    terms = npt_loss(outputs, truth, target_selected, feature_selected, attributes, lam=0.25)
    ce = torch.nn.functional.cross_entropy
    expected_target = ce(outputs[2][target_selected], truth[target_selected, 2].long())
    feature_terms = torch.cat(
        [
            (outputs[0][[0, 3, 5], 0] - truth[[0, 3, 5], 0]) ** 2,
            ce(outputs[1][[1, 2]], truth[[1, 2], 1].long(), reduction="none"),
        ]
    )
    torch.testing.assert_close(terms.target, expected_target)
    torch.testing.assert_close(terms.feature, feature_terms.mean())
    torch.testing.assert_close(terms.total, 0.75 * expected_target + 0.25 * feature_terms.mean())
    assert float(terms.n_target) == 3 and float(terms.n_feature) == 5

    # Duplicating the batch leaves both (normalised) terms unchanged.
    doubled = npt_loss(
        [torch.cat([o, o]) for o in outputs],
        torch.cat([truth, truth]),
        torch.cat([target_selected] * 2),
        torch.cat([feature_selected] * 2),
        attributes,
        lam=0.25,
    )
    torch.testing.assert_close(doubled.total, terms.total)

    # Unselected entries get exactly zero gradient.
    outputs = [o.clone().requires_grad_() for o in outputs]
    npt_loss(outputs, truth, target_selected, feature_selected, attributes, 0.25).total.backward()
    assert torch.all(outputs[2].grad[~target_selected] == 0)
    assert torch.all(outputs[0].grad[~feature_selected[:, 0]] == 0)
    assert torch.all(outputs[1].grad[~feature_selected[:, 1]] == 0)
    assert entry_losses(outputs, truth, attributes).shape == (n, 3)


def test_lambda_cosine_schedule():
    config = NPTConfig(max_steps=100)
    assert feature_loss_weight(config, 0) == 1.0
    assert feature_loss_weight(config, 50) == pytest.approx(0.5)
    assert feature_loss_weight(config, 100) == pytest.approx(0.0)
    assert feature_loss_weight(config.replace(p_feature=0.0), 0) == 0.0
    assert feature_loss_weight(config.replace(feature_loss_weight=0.3), 10) == 0.3


# --------------------------------------------------------------------------- optimiser
def reference_lamb_step(p, g, m, v, step, lr, betas=(0.9, 0.999), eps=1e-6, wd=0.0):
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    r = (m / (1 - betas[0] ** step)) / ((v / (1 - betas[1] ** step)).sqrt() + eps) + wd * p
    w_norm, r_norm = p.norm().clamp(max=10.0), r.norm()
    trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
    return p - lr * trust * r, m, v


@pytest.mark.parametrize("implementation", ["foreach", "chunked"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_lamb_matches_reference(weight_decay, implementation, monkeypatch):
    monkeypatch.setattr(Lamb, "CHUNK", 4)  # several chunks per tensor
    generator = torch.Generator().manual_seed(0)
    params = [
        torch.randn(5, 3, generator=generator, dtype=torch.float64).requires_grad_(),
        torch.zeros(4, dtype=torch.float64, requires_grad=True),
    ]
    reference = [(p.detach().clone(), torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    optimizer = Lamb(params, lr=0.01, weight_decay=weight_decay, implementation=implementation)
    for step in range(1, 4):
        grads = [torch.randn(p.shape, generator=generator, dtype=torch.float64) for p in params]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizer.step()
        reference = [
            reference_lamb_step(p, g, m, v, step, 0.01, wd=weight_decay) for (p, m, v), g in zip(reference, grads)
        ]
        for p, (expected, _, _) in zip(params, reference):
            torch.testing.assert_close(p.detach(), expected)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_lamb_small_tensors_step_bit_for_bit_as_the_per_tensor_loop(weight_decay):
    """The multi-tensor path for tensors of one chunk does the per-tensor loop's operations in its
    order (NPT's results must not move when it is taken): float32, equal bits after 5 steps."""
    generator = torch.Generator().manual_seed(0)
    shapes = [(31, 16), (16,), (7, 3), (1,)]
    params = [torch.randn(s, generator=generator).requires_grad_() for s in shapes]
    params.append(torch.zeros(5, requires_grad=True))  # a zero tensor: trust 1
    loop = [(p.detach().clone(), torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    optimizer = Lamb(params, lr=0.01, weight_decay=weight_decay, implementation="chunked")
    b1, b2, lr = 0.9, 0.999, 0.01
    for step in range(1, 6):
        grads = [torch.randn(p.shape, generator=generator) for p in params]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizer.step()
        c1, c2 = 1 - b1**step, 1 - b2**step
        eps, scale = 1e-6 * math.sqrt(c2), math.sqrt(c2) / c1
        for (p, m, v), g in zip(loop, grads):  # `_chunked_update` on a tensor of one chunk
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            r = torch.sqrt(v).add_(eps)
            r = torch.div(m, r).mul_(scale)
            if weight_decay:
                r.add_(p, alpha=weight_decay)
            update_sq = torch.zeros((), dtype=torch.float64)
            update_sq += torch.dot(r.view(-1), r.view(-1))
            trust = float(Lamb._trust(torch.linalg.vector_norm(p), update_sq.sqrt().float(), 10.0))
            p.add_(r, alpha=-lr * trust)
        for p, (expected, _, _) in zip(params, loop):
            assert torch.equal(p.detach(), expected), step


def test_lookahead_syncs_every_k_steps():
    p = torch.nn.Parameter(torch.tensor([1.0]))
    inner = torch.optim.SGD([p], lr=0.1)
    optimizer = Lookahead(inner, alpha=0.5, k=3)
    for _ in range(3):
        p.grad = torch.tensor([1.0])
        optimizer.step()
    # fast went 1.0 -> 0.7; slow = 1.0 + 0.5 (0.7 - 1.0) = 0.85, and fast restarts there
    torch.testing.assert_close(p.detach(), torch.tensor([0.85]))
    torch.testing.assert_close(optimizer.slow_weights[0], torch.tensor([0.85]))
    state = optimizer.state_dict()
    other = Lookahead(torch.optim.SGD([torch.nn.Parameter(torch.tensor([0.0]))], lr=0.1), 0.5, 3)
    other.load_state_dict(state)
    assert other.inner_steps == 3 and torch.equal(other.slow_weights[0], optimizer.slow_weights[0])


def test_lr_schedules():
    flat = LRSchedule("flat_cosine", 1e-3, 100, flat_fraction=0.7)
    assert flat(0) == flat(69) == 1e-3
    assert flat(85) == pytest.approx(0.5e-3)
    assert flat(100) == pytest.approx(0.0)
    cyclic = LRSchedule("cosine_cyclic", 1e-3, 100, n_cycles=2, min_lr=1e-7)
    assert cyclic(0) == pytest.approx(1e-7) and cyclic(50) == pytest.approx(1e-7)
    assert cyclic(25) == pytest.approx(1e-3) and cyclic(75) == pytest.approx(1e-3)
    poly = LRSchedule("polynomial", 5e-3, 1000, warmup_fraction=0.01, min_lr=1e-7)
    assert poly(0) == pytest.approx(5e-4) and poly(9) == pytest.approx(5e-3)
    assert poly(10) == pytest.approx(5e-3) and poly(1000) == pytest.approx(1e-7)
    assert poly(505) == pytest.approx((5e-3 - 1e-7) * 0.5 + 1e-7)


def test_gradient_clipping_modes():
    p = torch.nn.Parameter(torch.zeros(4))
    p.grad = torch.tensor([3.0, -4.0, 0.0, 0.5])
    clip_gradients([p], "value", 1.0)
    assert p.grad.tolist() == [1.0, -1.0, 0.0, 0.5]
    p.grad = torch.tensor([3.0, -4.0, 0.0, 0.0])
    norm = clip_gradients([p], "norm", 1.0)
    assert float(norm) == pytest.approx(5.0)
    assert float(p.grad.norm()) == pytest.approx(1.0, rel=1e-5)


# --------------------------------------------------------------------------- determinism, resume
def test_same_seed_gives_identical_weights():
    table = make_table(60)
    config = NPTConfig(**TINY, max_steps=6, batch_size=25)
    results = []
    for seed in (0, 0, 1):
        trainer = NPTTrainer(table.attributes, config.replace(seed=seed))
        results.append((trainer.fit(table), trainer.model.state_dict()))
    assert results[0][0].history == results[1][0].history
    assert weights_equal(results[0][1], results[1][1])
    assert not weights_equal(results[0][1], results[2][1])


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("batch_size,kill_at", [(None, 7), (25, 8)])
def test_kill_and_resume_reaches_identical_weights(tmp_path: Path, batch_size, kill_at):
    table = make_table(60)
    config = NPTConfig(**TINY, max_steps=12, batch_size=batch_size, checkpoint_every_steps=5, p_target=0.5)

    reference = NPTTrainer(table.attributes, config)
    expected = reference.fit(table)

    def kill(step, record):
        if step == kill_at:
            raise Interrupt

    interrupted = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path)
    with pytest.raises(Interrupt):
        interrupted.fit(table, callback=kill)
    assert (tmp_path / STATE_FILE).exists()
    assert not list(tmp_path.glob(".*tmp*"))  # the atomic write left no temp file behind

    resumed = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path)
    result = resumed.fit(table)
    assert result.resumed_from == 5
    assert result.history == expected.history and result.val_history == expected.val_history
    assert result.best_step == expected.best_step
    assert weights_equal(resumed.model.state_dict(), reference.model.state_dict())
    saved = torch.load(tmp_path / BEST_WEIGHTS_FILE, weights_only=True)
    assert weights_equal(saved, reference.model.state_dict())

    # The weights-only file reproduces the predictions.
    loaded = NPTTrainer(table.attributes, config)
    loaded.load_weights(tmp_path / BEST_WEIGHTS_FILE)
    assert torch.equal(loaded.target_outputs(table), reference.target_outputs())

    # The final state file resumes to "already done"; other configs or data are refused.
    again = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path)
    assert again.fit(table).resumed_from == 12
    with pytest.raises(ValueError, match="different NPTConfig"):
        NPTTrainer(table.attributes, config.replace(lr=0.5), checkpoint_dir=tmp_path).fit(table)
    with pytest.raises(ValueError, match="different data"):
        NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(make_table(60, seed=1))


def test_config_dict_round_trip_and_unknown_fields():
    config = NPTConfig(**TINY)
    assert NPTConfig.from_dict(config.to_dict()) == config
    assert config.replace(lr=0.5).lr == 0.5 and config.lr != 0.5
    with pytest.raises(ValueError, match=r"unknown NPTConfig field\(s\): bogus"):
        NPTConfig.from_dict({**config.to_dict(), "bogus": 1})


@pytest.mark.skipif(not hasattr(torch.ops.mkldnn, "_linear_pointwise"), reason="no oneDNN linear op in this build")
def test_flop_counter_counts_the_onednn_linear():
    from benchmarks.steps.common import flop_counter
    from tabrepro.nn.kernels import Linear

    layer = Linear(16, 8, onednn=True)
    with flop_counter() as counter:
        layer(torch.randn(4, 16))
    assert counter.get_total_flops() == 2 * 4 * 16 * 8


def test_model_selection_keeps_best_validation_weights():
    table = make_table(60)
    trainer = NPTTrainer(table.attributes, NPTConfig(**TINY, max_steps=10, lr=3e-3))
    result = trainer.fit(table)
    losses = dict(result.val_history)
    assert result.best_val_loss == min(losses.values())
    assert losses[result.best_step] == result.best_val_loss
    outputs = trainer.target_outputs()
    assert trainer.split_loss(outputs, VAL) == pytest.approx(result.best_val_loss, rel=1e-6)


@pytest.mark.parametrize("max_steps,lr", [(10, 3e-3), (12, 0.05)])
def test_final_outputs_reuse_the_selected_weights_validation_pass(max_steps, lr, monkeypatch):
    table = make_table(60)
    trainer = NPTTrainer(table.attributes, NPTConfig(**TINY, max_steps=max_steps, lr=lr, batch_size=25))
    result = trainer.fit(table)
    assert all(p.grad is None for p in trainer.model.parameters())  # freed after every step
    fresh = trainer.target_outputs(table)  # a table passed in: a new pass over the eval batches
    passes = []
    forward = trainer.model.forward_codes
    monkeypatch.setattr(trainer.model, "forward_codes", lambda *a: passes.append(1) or forward(*a))
    reused = trainer.target_outputs()
    assert not passes and torch.equal(reused, fresh)
    assert trainer.split_loss(reused, VAL) == result.best_val_loss
    trainer.train_step()  # a step (new weights, in general): the next call runs the model again
    trainer.target_outputs()
    assert passes


@pytest.mark.parametrize(
    "options",
    [
        {"bf16_autocast": True},
        {"bf16_autocast": True, "kv_from_normalised": False, "grad_clip": "value"},
        {"lr_schedule": "cosine_cyclic", "attention_dropout": 0.0, "p_feature": 0.0},
        {"lr_schedule": "polynomial", "semi_supervised": False, "batch_size": 20},
    ],
)
def test_training_variants_run(options):
    table = make_table(60)
    result = NPTTrainer(table.attributes, NPTConfig(**TINY, max_steps=4, **options)).fit(table)
    assert result.steps == 4 and all(math.isfinite(h["loss"]) for h in result.history)
    assert result.best_val_loss is not None and result.test_loss is not None
    if options.get("p_feature") == 0.0:
        assert all(h["lambda"] == 0.0 for h in result.history)


def test_without_semi_supervision_training_batches_hold_training_rows_only():
    table = make_table(60)
    trainer = NPTTrainer(table.attributes, NPTConfig(**TINY, max_steps=2, semi_supervised=False, batch_size=10))
    trainer.prepare(table)
    for rows in trainer._epoch_plan(0).batches:
        assert torch.all(table.split[rows] == TRAIN)
    assert trainer.steps_per_epoch == 4  # 36 training rows in batches of <= 10
    trainer.fit(table)


# --------------------------------------------------------------------------- lookup task
def lookup_batch(generator: torch.Generator, m: int = 32, n_features: int = 4):
    """m rows with hidden targets plus exact duplicates with the targets revealed.

    Features and targets are independent noise: only looking the duplicate up can help.
    """
    rows = torch.randn((m, n_features + 1), generator=generator)
    originals = rows.clone()
    originals[:, -1] = 0.0
    values = torch.cat([originals, rows])
    mask = torch.zeros_like(values, dtype=torch.bool)
    mask[:m, -1] = True
    selected = torch.zeros(2 * m, dtype=torch.bool)
    selected[:m] = True
    return values, mask, torch.cat([rows, rows]), selected


def train_lookup(datapoint_attention: str, steps: int = 1200) -> float:
    attributes = tuple(continuous() for _ in range(5))
    config = NPTConfig(
        embed_dim=16,
        n_layers=2,
        n_heads=4,
        lr=1e-2,
        max_steps=steps,
        attention_dropout=0.0,
        hidden_dropout=0.0,
        embedding_dropout=0.0,
        datapoint_attention=datapoint_attention,
    )
    torch.manual_seed(0)
    model = NPTNetwork(attributes, config)
    optimizer, schedule = build_optimizer(model, config), LRSchedule.from_config(config)
    generator = torch.Generator().manual_seed(0)
    no_features = torch.zeros((64, 5), dtype=torch.bool)
    for step in range(steps):
        values, mask, truth, selected = lookup_batch(generator)
        schedule.apply(optimizer, step)
        outputs = model.forward_codes(values, mask)
        loss = npt_loss(outputs, truth, selected, no_features, attributes, 0.0).total
        optimizer.zero_grad()
        loss.backward()
        clip_gradients(model.parameters(), "norm", 1.0)
        optimizer.step()
    model.eval()
    fresh = torch.Generator().manual_seed(12345)
    errors = []
    with torch.no_grad():
        for _ in range(10):
            values, mask, truth, _ = lookup_batch(fresh)
            prediction = model.forward_codes(values, mask)[-1][:32, 0]
            errors.append(float(((prediction - truth[:32, -1]) ** 2).mean()))
    return float(np.mean(errors))


def test_lookup_needs_attention_between_datapoints():
    with_abd = train_lookup("full")
    without = train_lookup("rowwise")
    assert with_abd < 0.05, with_abd  # targets have variance 1
    assert without > 0.8, without


# --------------------------------------------------------------------------- estimator
def encoded_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x0, x2 = rng.normal(size=n), rng.normal(size=n)
    category = rng.integers(0, 3, size=n)
    X = np.column_stack([x0, np.eye(3)[category], x2])
    y_class = (x0 + x2 > 0).astype(int)
    return X, y_class, x0 - x2


def test_estimator_fit_predict():
    layout = FeatureLayout.from_groups([("continuous", 1), ("categorical", 3), ("continuous", 1)])
    X, y, y_reg = encoded_data(70, 0)
    decoded = layout.decode(X[:3])
    assert decoded.shape == (3, 3) and set(decoded[:, 1]) <= {0.0, 1.0, 2.0}
    config = NPTConfig(**TINY, max_steps=6)
    clf = NPTEstimator("classification", config).fit(X[:40], y[:40], X[40:55], y[40:55], layout=layout, X_test=X[55:])
    proba = clf.predict_proba(X[55:])
    assert proba.shape == (15, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(clf.predict(X[55:]), proba.argmax(axis=1))
    # X_test given at fit: the same table the trainer evaluated during training.
    trainer_outputs = clf.trainer_.target_outputs()[clf.trainer_.table.rows(TEST)]
    assert np.allclose(np.log(proba), torch.log_softmax(trainer_outputs, 1).double().numpy(), atol=1e-5)
    reg = NPTEstimator("regression", config).fit(X[:40], y_reg[:40], X[40:55], y_reg[40:55], layout=layout)
    prediction = reg.predict(X[55:])
    assert prediction.shape == (15,) and np.isfinite(prediction).all()
    with pytest.raises(AttributeError):
        reg.predict_proba(X[55:])
    assert math.isfinite(reg.fit_result_.best_val_loss)


def test_estimator_predicts_the_fit_rows_from_the_fit_time_pass(monkeypatch):
    """X_val and X_test given to fit are recognised (their codes kept in float32, the table's
    precision) and predicted from the training table's last pass, not from a new table."""
    layout = FeatureLayout.from_groups([("continuous", 1), ("categorical", 3), ("continuous", 1)])
    X, y, _ = encoded_data(70, 0)
    clf = NPTEstimator("classification", NPTConfig(**TINY, max_steps=4)).fit(
        X[:40], y[:40], X[40:55], y[40:55], layout=layout, X_test=X[55:]
    )
    tables = []
    original = clf.trainer_.target_outputs

    def recorded(table=None, **kw):
        tables.append(table)
        return original(table, **kw)

    monkeypatch.setattr(clf.trainer_, "target_outputs", recorded)
    built = []
    table = clf._table
    monkeypatch.setattr(clf, "_table", lambda parts: built.append(len(parts[-1][0])) or table(parts))
    val_logits, test_logits = clf._outputs(X[40:55]), clf._outputs(X[55:])
    assert tables == [None, None] and built == []  # nor is the fit-time table built again
    outputs = original().double().numpy()  # the fit-time table's rows: train, validation, test
    assert np.array_equal(val_logits, outputs[40:55]) and np.array_equal(test_logits, outputs[55:])
    clf.predict_proba(X[:10])  # other rows: a table of their own
    assert tables[-1] is not None and tables[-1].n_rows == 40 + 15 + 10 and built == [10]


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_the_estimators_table_holds_the_stacked_values_in_float32_and_gives_them_back(task):
    """Filled into one float32 array: the same values, bit for bit, as stacking the codes beside
    the (float64) targets and casting the whole, without the float64 copies; the context rows
    are read back from it exactly as fit was given them (missing values included)."""
    layout = FeatureLayout.from_groups([("continuous", 1), ("categorical", 3), ("continuous", 1)])
    X, y_class, y_reg = encoded_data(70, 1)
    X[[3, 45, 60], 0] = np.nan  # a missing value in a training, a validation and a test row
    y = y_class if task == "classification" else y_reg
    est = NPTEstimator(task, NPTConfig(**TINY, max_steps=1)).fit(
        X[:40], y[:40], X[40:55], y[40:55], layout=layout, X_test=X[55:]
    )
    codes = [_codes(layout, X[rows]) for rows in (slice(0, 40), slice(40, 55), slice(55, 70))]
    stacked = np.concatenate(
        [
            np.column_stack([codes[0], y[:40]]),
            np.column_stack([codes[1], y[40:55]]),
            np.column_stack([codes[2], np.full(15, np.nan)]),
        ]
    )
    roles = torch.cat([torch.full((40,), TRAIN), torch.full((15,), VAL), torch.full((15,), TEST)])
    expected = NPTTable(est._attributes, torch.as_tensor(stacked, dtype=torch.float32), roles)
    table = est.trainer_.table
    assert table.fingerprint() == expected.fingerprint()
    assert torch.equal(table.inputs, expected.inputs) and torch.equal(table.input_missing, expected.input_missing)
    assert torch.equal(table.rows(TEST), torch.arange(55, 70)) and torch.equal(table.rows(VAL), torch.arange(40, 55))
    for role, given, targets in ((TRAIN, codes[0], y[:40]), (VAL, codes[1], y[40:55]), (TEST, codes[2], None)):
        read_codes, read_targets = est._fit_rows(role)
        assert read_codes.dtype == np.float32 and np.array_equal(read_codes, given, equal_nan=True)
        assert np.isnan(read_codes).sum() == 1
        if targets is not None:
            assert np.array_equal(read_targets, targets.astype(np.float32))
    rebuilt = est._table((est._fit_rows(TRAIN), est._fit_rows(VAL), (codes[2], None)))
    assert rebuilt.fingerprint() == table.fingerprint() and torch.equal(rebuilt.inputs, table.inputs)
