"""NPT with induced set attention between datapoints (datapoint_attention="isab", Set Transformer
ISAB): shapes, cost linear in the rows, permutation equivariance, the label-leak guarantee,
determinism and resume. The helpers are test_npt's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tabrepro.models.npt import NPTConfig, NPTNetwork, NPTTrainer
from tabrepro.models.npt.trainer import STATE_FILE
from test_npt import ATTRIBUTES, TINY, Interrupt, make_table, weights_equal, with_test_labels

ISAB = {**TINY, "datapoint_attention": "isab", "n_inducing": 4}


def test_isab_blocks_have_inducing_points_and_predict_every_attribute():
    model = NPTNetwork(ATTRIBUTES, NPTConfig(**ISAB))
    assert model.block_kinds == ("abd", "aba", "abd", "aba")
    abd = model.blocks[0]
    assert abd.n_inducing == 4 and tuple(abd.inducing_points.shape) == (4, 5 * 8)
    assert model.blocks[1].n_inducing is None  # attention between attributes is unchanged
    full = NPTNetwork(ATTRIBUTES, NPTConfig(**TINY))
    assert not hasattr(full.blocks[0], "inducing_points")
    table = make_table(10)
    out = model.forward_codes(table.inputs, table.input_missing)
    assert [tuple(o.shape) for o in out] == [(10, 1), (10, 3), (10, 1), (10, 1), (10, 2)]
    with pytest.raises(ValueError, match="n_inducing"):
        NPTConfig(**{**ISAB, "n_inducing": 0})


def test_isab_is_equivariant_to_row_order():
    torch.manual_seed(0)
    model = NPTNetwork(ATTRIBUTES, NPTConfig(**ISAB)).eval()
    table = make_table(40)
    permutation = torch.randperm(40)
    with torch.no_grad():
        out = model.forward_codes(table.inputs, table.input_missing)
        out_perm = model.forward_codes(table.inputs[permutation], table.input_missing[permutation])
    for a, b in zip(out, out_perm):
        torch.testing.assert_close(a[permutation], b, rtol=1e-4, atol=1e-5)


def test_isab_rows_still_see_each_other_and_attention_memory_is_linear_in_rows(monkeypatch):
    model = NPTNetwork(ATTRIBUTES, NPTConfig(**ISAB)).eval()
    table = make_table(30)
    changed = table.inputs.clone()
    changed[1:, 0] += 1.0  # every row but the first
    with torch.no_grad():
        a = model.forward_codes(table.inputs, table.input_missing)[-1][0]
        b = model.forward_codes(changed, table.input_missing)[-1][0]
    assert not torch.equal(a, b)  # row 0's prediction depends on the other rows
    # The weights of the rows' attention are (rows x m), never (rows x rows).
    shapes = []
    hook = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        shapes.append((q.shape[-2], k.shape[-2]))
        return hook(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        model.forward_codes(make_table(50).inputs, make_table(50).input_missing)
    assert (4, 50) in shapes and (50, 4) in shapes and (50, 50) not in shapes


def test_isab_test_labels_change_nothing():
    table = make_table(60)
    flipped = with_test_labels(table, 1.0 - table.labels)
    config = NPTConfig(**ISAB, max_steps=6, p_target=0.5)
    runs = []
    for data in (table, flipped):
        trainer = NPTTrainer(data.attributes, config)
        result = trainer.fit(data)
        runs.append((result, trainer.model.state_dict(), trainer.target_outputs()))
    (r1, w1, o1), (r2, w2, o2) = runs
    assert r1.history == r2.history and weights_equal(w1, w2) and torch.equal(o1, o2)


def test_isab_is_deterministic_and_resumes_to_identical_weights(tmp_path: Path):
    table = make_table(60)
    config = NPTConfig(**ISAB, max_steps=10, checkpoint_every_steps=4, p_target=0.5)
    reference = NPTTrainer(table.attributes, config)
    expected = reference.fit(table)
    again = NPTTrainer(table.attributes, config)
    assert again.fit(table).history == expected.history
    assert weights_equal(again.model.state_dict(), reference.model.state_dict())

    def kill(step, record):
        if step == 6:
            raise Interrupt

    with pytest.raises(Interrupt):
        NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table, callback=kill)
    assert (tmp_path / STATE_FILE).exists()
    resumed = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path)
    result = resumed.fit(table)
    assert result.resumed_from == 4 and result.history == expected.history
    assert weights_equal(resumed.model.state_dict(), reference.model.state_dict())


def test_capacity_search_doubles_then_bisects(monkeypatch):
    from benchmarks.steps import npt_capacity as capacity

    tried = []

    def fake_probe(config, rows, features, *, memory_gb, steps=0, threads):
        tried.append(rows)
        return (rows <= 5000, {"rows": rows, "peak_rss_gib": rows / 1000} if rows <= 5000 else "too big")

    monkeypatch.setattr(capacity, "probe", fake_probe)
    rows, best, failure = capacity.largest_rows(
        {}, 30, 24.0, start=1000, tolerance=0.05, threads=1, report=lambda _: None
    )
    assert 5000 * 0.95 <= rows <= 5000 and best == {"rows": rows, "peak_rss_gib": rows / 1000}
    assert tried[:4] == [1000, 2000, 4000, 8000] and failure == "too big"
    tried.clear()
    assert (
        capacity.largest_rows({}, 30, 24.0, start=40_000, tolerance=0.05, threads=1, report=lambda _: None)[0] <= 5000
    )
    assert tried[:3] == [40_000, 20_000, 10_000]
