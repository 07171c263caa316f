"""Prediction in bounded batches (what keeps 500k-row test sets in memory): BiSHop's evaluation
batches give the one-batch outputs, and NPT predicts every row once, each from its own batch as
context (NPT's definition of minibatched prediction), never mixing batches."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from tabrepro.models.bishop import BiSHopTrainer
from tabrepro.models.npt import NPTConfig, NPTTrainer
from tabrepro.models.npt.masking import TRAIN
from tabrepro.nn import progress
from tabrepro.nn.progress import logged_batches
from test_bishop import split, tiny, toy_data
from test_npt import TINY, make_table

torch.set_num_threads(1)


@pytest.mark.parametrize("classification", [True, False])
def test_bishop_outputs_in_small_batches_equal_the_one_batch_outputs(classification):
    data = toy_data(120, classification=classification)
    train, val, _ = split(data, 80, 20)
    trainer = BiSHopTrainer(
        tiny(max_epochs=2),
        "classification" if classification else "regression",
        cardinalities=(3,),
        n_numerical=3,
        n_classes=2 if classification else None,
    )
    trainer.fit(train, val)
    rows = data.rows(torch.arange(80, 120))
    trainer.config = dataclasses.replace(trainer.config, eval_batch_size=len(rows))
    one_batch = trainer.outputs(rows)
    for size in (1, 7, 16):
        trainer.config = dataclasses.replace(trainer.config, eval_batch_size=size)
        batched = trainer.outputs(rows)
        # Same rows, other matrix shapes: equal up to float32 kernel rounding.
        torch.testing.assert_close(batched, one_batch, rtol=1e-5, atol=1e-6)
        if classification:
            assert torch.equal(batched.argmax(1), one_batch.argmax(1))


def test_npt_predicts_every_row_once_each_from_its_own_batch():
    table = make_table(90)
    trainer = NPTTrainer(table.attributes, NPTConfig(**TINY, max_steps=3, batch_size=16))
    trainer.fit(table)
    batches = trainer.eval_batches(table)
    assert max(len(b) for b in batches) <= 16 < table.n_rows
    covered = torch.cat(batches).sort().values
    assert torch.equal(covered, torch.arange(table.n_rows))  # every row exactly once
    outputs = trainer.target_outputs(table)
    model = trainer.model
    assert model is not None
    hidden = table.split != TRAIN
    assert hidden.any() and not outputs[~hidden].any()  # training rows' outputs are not computed
    with torch.no_grad():
        for rows in batches:  # each batch alone (its rows are the context) gives the same outputs
            alone = model.forward_codes(table.inputs[rows], table.input_missing[rows])[-1].float()
            targets = hidden[rows]
            # computed for the hidden targets' rows only: other GEMM shapes, the same values up to
            # float32 kernel rounding (bit for bit on the AVX2 machine this was written on)
            torch.testing.assert_close(outputs[rows][targets], alone[targets], rtol=1e-5, atol=1e-6)


def test_a_long_pass_logs_its_progress_at_most_once_per_interval(caplog):
    ticks = iter([0.0, 10.0, 70.0, 80.0, 200.0, 260.0])  # start, then after each of 5 batches
    log = logging.getLogger("test.progress")
    with caplog.at_level(logging.INFO, logger="test.progress"):
        seen = list(logged_batches(list("abcde"), "pass", log, every_s=60.0, clock=lambda: next(ticks)))
    assert seen == list("abcde")
    # 70 s after batch 2 and 200 s after batch 4; never after the last batch.
    assert [r.getMessage() for r in caplog.records] == [
        "pass: 2/5 batches, 70 s elapsed, about 105 s left",
        "pass: 4/5 batches, 200 s elapsed, about 50 s left",
    ]


def test_a_short_pass_logs_nothing(caplog):
    with caplog.at_level(logging.INFO):
        assert list(logged_batches([1, 2, 3], "pass", logging.getLogger("test.progress"))) == [1, 2, 3]
    assert not caplog.records


def test_npt_and_bishop_prediction_passes_report_progress(caplog, monkeypatch):
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    table = make_table(60)
    npt = NPTTrainer(table.attributes, NPTConfig(**TINY, max_steps=1, batch_size=16))
    npt.fit(table)
    data = toy_data(40)
    bishop = BiSHopTrainer(
        tiny(max_epochs=1, eval_batch_size=8), "classification", cardinalities=(3,), n_numerical=3, n_classes=2
    )
    bishop.fit(*split(data, 30, 10)[:2])
    with caplog.at_level(logging.INFO):
        npt.target_outputs(table)
        bishop.outputs(data)
    messages = [r.getMessage() for r in caplog.records]
    n_npt = len(npt.eval_batches(table))
    assert any(m.startswith(f"npt evaluation pass: 1/{n_npt} batches") for m in messages)
    assert any(m.startswith("bishop prediction pass: 1/5 batches") for m in messages)
