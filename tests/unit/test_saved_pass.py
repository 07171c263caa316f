"""Long prediction passes that survive a kill (tabrepro.nn.checkpoint.SavedPass): a job stopped
in the middle of NPT's evaluation pass or BiSHop's prediction pass goes on after the batches it
had saved, and ends with the outputs of an uninterrupted run, bit for bit."""

from __future__ import annotations

import logging

import pytest
import torch

from tabrepro.models.bishop import BiSHopTrainer
from tabrepro.models.bishop.model import BiSHopNetwork
from tabrepro.models.npt import NPTConfig, NPTTrainer
from tabrepro.models.npt.masking import TRAIN
from tabrepro.models.npt.model import NPTNetwork
from tabrepro.nn import checkpoint
from tabrepro.nn.checkpoint import PASS_FILE, SavedPass
from tabrepro.nn.progress import logged_batches
from test_bishop import split, tiny, toy_data
from test_npt import TINY, make_table

torch.set_num_threads(1)


class Killed(Exception):
    """Stands in for a job killed in the middle of a pass."""


@pytest.fixture
def save_every_batch(monkeypatch):
    monkeypatch.setattr(checkpoint, "SAVE_PASS_EVERY_S", 0.0)


# The resumes from a pass in the middle of training also on a GPU (the CUDA generator's state and
# device tensors go through the saved state); skipped where torch sees none, as tests/live/test_cuda.py.
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


def count_eval_batches(monkeypatch, network: type, method: str, kill_after: int | None = None) -> list[int]:
    """Count the network's forward calls in eval mode (prediction batches); raise Killed on call
    `kill_after + 1`. Returns the one-element counter."""
    calls = [0]
    original = getattr(network, method)

    def counted(self, *args, **kwargs):
        if not self.training:
            if kill_after is not None and calls[0] == kill_after:
                raise Killed
            calls[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(network, method, counted)
    return calls


# Two steps, one validation pass at the end over ceil(90 / 16) = 6 batches.
NPT_CONFIG = NPTConfig(**{**TINY, "eval_every_epochs": 50}, max_steps=2, batch_size=16)


@pytest.mark.parametrize("device", DEVICES)
def test_npt_killed_in_its_validation_pass_resumes_after_the_saved_batches(
    tmp_path, monkeypatch, save_every_batch, device
):
    table, config = make_table(90), NPT_CONFIG.replace(device=device)
    reference = NPTTrainer(table.attributes, config)
    expected = reference.fit(table)
    n_batches = len(reference.eval_batches(table))
    assert n_batches == 6

    with monkeypatch.context() as patch:
        count_eval_batches(patch, NPTNetwork, "forward_codes", kill_after=4)
        with pytest.raises(Killed):
            NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table)
    saved = torch.load(tmp_path / PASS_FILE, weights_only=True)
    assert saved["batches_done"] == 4
    # the file holds the outputs of the rows whose target is hidden, not a zero row per training row
    assert saved["outputs"].shape == (int((table.split != TRAIN).sum()), table.attributes[-1].one_hot_width)

    # No periodic checkpoint was due, but the pass saved the training state it follows before
    # its first batches: the resumed job trains no step again and goes on with the pass.
    state = torch.load(tmp_path / NPTTrainer.state_file, weights_only=False)
    assert state["step"] == 2 and state["validation_pending"] and state["val_history"] == []

    calls = count_eval_batches(monkeypatch, NPTNetwork, "forward_codes")
    steps = count_training_steps(monkeypatch, NPTTrainer)
    resumed = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path)
    result = resumed.fit(table)
    assert steps[0] == 0
    assert calls[0] == n_batches - 4  # the pass went on after the saved batches
    assert result.best_val_loss == expected.best_val_loss and result.test_loss == expected.test_loss
    assert result.val_history == expected.val_history and result.history == expected.history
    assert torch.equal(resumed.target_outputs(), reference.target_outputs())
    assert same_weights(resumed, reference)
    assert not (tmp_path / PASS_FILE).exists()  # removed once the pass was complete
    assert not torch.load(tmp_path / NPTTrainer.state_file, weights_only=False)["validation_pending"]


def same_weights(a: NPTTrainer | BiSHopTrainer, b: NPTTrainer | BiSHopTrainer) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))


def count_training_steps(monkeypatch, trainer: type) -> list[int]:
    """Count the trainer's train_step calls (a one-element counter)."""
    calls = [0]
    original = trainer.train_step

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(trainer, "train_step", counted)
    return calls


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("every", [None, 2])
def test_npt_state_saved_before_a_long_validation_pass_resumes_to_the_uninterrupted_run(
    tmp_path, monkeypatch, save_every_batch, every, device
):
    """A pending validation in the middle of training (one per epoch): killed in the pass of
    step 2 and again during step 3, the job ends with the uninterrupted weights and history. With
    a checkpoint due at step 2, the resumed validation is followed by it, and not run again."""
    config = NPTConfig(
        **{**TINY, "eval_every_epochs": 1, "device": device},
        max_steps=4,
        batch_size=45,
        p_target=0.5,
        checkpoint_every_steps=every,
    )
    table = make_table(90)
    reference = NPTTrainer(table.attributes, config)
    expected = reference.fit(table)
    steps_per_epoch = reference.steps_per_epoch
    n_batches = len(reference.eval_batches(table))

    def stop_at_step(step: int):
        def callback(at: int, record) -> None:
            if at == step:
                raise Killed

        return callback

    with monkeypatch.context() as patch:  # killed in the first epoch's validation pass
        count_eval_batches(patch, NPTNetwork, "forward_codes", kill_after=1)
        with pytest.raises(Killed):
            NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table)
    assert torch.load(tmp_path / NPTTrainer.state_file, weights_only=False)["step"] == steps_per_epoch
    with pytest.raises(Killed):  # resumed, then killed after the next step (its state not saved)
        NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(
            table, callback=stop_at_step(steps_per_epoch + 1)
        )
    steps = count_training_steps(monkeypatch, NPTTrainer)
    calls = count_eval_batches(monkeypatch, NPTNetwork, "forward_codes")
    resumed = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path)
    result = resumed.fit(table)
    assert n_batches > 1 and steps[0] == config.max_steps - steps_per_epoch
    assert calls[0] == (2 if every is None else 1) * n_batches  # step 2's validation again, or not
    assert result.val_history == expected.val_history and result.history == expected.history
    assert result.best_step == expected.best_step and result.test_loss == expected.test_loss
    assert same_weights(resumed, reference)


def test_a_saved_pass_of_other_weights_or_rows_is_not_used(tmp_path, monkeypatch, save_every_batch):
    table, other_rows = make_table(90), make_table(90, seed=1)
    trainer = NPTTrainer(table.attributes, NPT_CONFIG, checkpoint_dir=tmp_path)
    trainer.fit(table)
    n_batches = len(trainer.eval_batches(table))
    clean = NPTTrainer(table.attributes, NPT_CONFIG)  # the same model, nothing saved
    clean.model = trainer.model

    def killed_pass(rows) -> None:
        with monkeypatch.context() as patch:
            count_eval_batches(patch, NPTNetwork, "forward_codes", kill_after=3)
            with pytest.raises(Killed):
                trainer.target_outputs(rows)
        assert torch.load(tmp_path / PASS_FILE, weights_only=True)["batches_done"] == 3

    killed_pass(other_rows)
    with monkeypatch.context() as patch:
        calls = count_eval_batches(patch, NPTNetwork, "forward_codes")
        assert torch.equal(trainer.target_outputs(table), clean.target_outputs(table))  # other rows
    assert calls[0] == 2 * n_batches  # in full (and the clean pass)
    assert not (tmp_path / PASS_FILE).exists()

    killed_pass(other_rows)
    with torch.no_grad():
        next(trainer.model.parameters()).add_(0.01)  # other weights
    calls = count_eval_batches(monkeypatch, NPTNetwork, "forward_codes")
    assert torch.equal(trainer.target_outputs(other_rows), clean.target_outputs(other_rows))
    assert calls[0] == 2 * n_batches
    assert not (tmp_path / PASS_FILE).exists()


def test_bishop_killed_in_its_prediction_pass_resumes_after_the_saved_batches(tmp_path, monkeypatch, save_every_batch):
    data = toy_data(120)
    train, val, test = split(data, 60, 20)
    config = tiny(max_epochs=2, eval_batch_size=8)
    trainer = BiSHopTrainer(config, "classification", cardinalities=(3,), n_numerical=3, n_classes=2)
    trainer.checkpoint_dir = tmp_path
    trainer.fit(train, val)
    expected = trainer.outputs(test)  # 40 rows: 5 batches

    with monkeypatch.context() as patch:
        count_eval_batches(patch, BiSHopNetwork, "forward", kill_after=3)
        with pytest.raises(Killed):
            trainer.outputs(test)
    assert torch.load(tmp_path / PASS_FILE, weights_only=True)["batches_done"] == 3
    calls = count_eval_batches(monkeypatch, BiSHopNetwork, "forward")
    assert torch.equal(trainer.outputs(test), expected)
    assert calls[0] == 2
    assert not (tmp_path / PASS_FILE).exists()


@pytest.mark.parametrize("device", DEVICES)
def test_bishop_killed_in_a_validation_pass_goes_on_with_it_and_ends_as_uninterrupted(
    tmp_path, monkeypatch, save_every_batch, device
):
    """Checkpoints every 10 epochs, none due: the second epoch's validation pass saved the state
    of that epoch (training done) before its first batch; killed in that pass, the job trains no
    epoch again and ends with the uninterrupted weights and history."""
    data = toy_data(120)
    train, val, _ = split(data, 60, 40)
    config = tiny(max_epochs=3, eval_batch_size=8, checkpoint_every_epochs=10, device=device)
    make = lambda: BiSHopTrainer(config, "classification", cardinalities=(3,), n_numerical=3, n_classes=2)  # noqa: E731
    reference = make()
    expected = reference.fit(train, val)  # each validation pass: 40 rows, 5 batches

    with monkeypatch.context() as patch:  # passes of epoch 1 (5 batches), then 2 into epoch 2's
        count_eval_batches(patch, BiSHopNetwork, "forward", kill_after=7)
        killed = make()
        killed.checkpoint_dir = tmp_path
        with pytest.raises(Killed):
            killed.fit(train, val)
    state = torch.load(tmp_path / BiSHopTrainer.state_file, weights_only=False)
    assert state["epoch"] == 2 and state["pending_epoch"]["epoch"] == 2 and len(state["history"]) == 1

    calls = count_eval_batches(monkeypatch, BiSHopNetwork, "forward")
    steps = count_training_steps(monkeypatch, BiSHopTrainer)
    resumed = make()
    resumed.checkpoint_dir = tmp_path
    result = resumed.fit(train, val)
    assert result.resumed_from == 2 and steps[0] == len(reference._epoch_batches(2))  # epoch 3 only
    assert calls[0] == (5 - 2) + 5  # epoch 2's pass after its saved batches, then epoch 3's
    assert result.history == expected.history and result.best_epoch == expected.best_epoch
    assert same_weights(resumed, reference)
    assert torch.load(tmp_path / BiSHopTrainer.state_file, weights_only=False)["pending_epoch"] is None


def test_a_pass_shorter_than_the_save_interval_writes_nothing(tmp_path):
    table = make_table(90)
    trainer = NPTTrainer(table.attributes, NPT_CONFIG, checkpoint_dir=tmp_path)
    trainer.fit(table)
    trainer.target_outputs(make_table(90, seed=1))
    assert not (tmp_path / PASS_FILE).exists()


def test_saved_pass_writes_at_most_once_per_interval_and_computes_its_key_once(tmp_path, caplog):
    ticks = iter([0.0, 100.0, 310.0, 400.0, 620.0])  # construction, then after batches 1-4
    keys = []
    outputs = torch.zeros(4)
    saved = SavedPass(tmp_path, lambda: keys.append(1) or "key", outputs, every_s=300.0, clock=lambda: next(ticks))
    assert saved.resume() == 0 and not keys  # no file: no key needed
    writes = []
    for done in range(1, 5):
        outputs[done - 1] = done
        saved.batch_done(done)
        if (tmp_path / PASS_FILE).exists():
            writes.append(torch.load(tmp_path / PASS_FILE, weights_only=True)["batches_done"])
    assert sorted(set(writes)) == [2, 4] and len(keys) == 1
    again = SavedPass(tmp_path, lambda: "key", torch.zeros(4))
    assert again.resume() == 4 and torch.equal(again.outputs, torch.tensor([1.0, 2.0, 3.0, 4.0]))
    with caplog.at_level(logging.INFO, logger="tabrepro.nn.checkpoint"):
        assert SavedPass(tmp_path, lambda: "other", torch.zeros(4)).resume() == 0
        assert SavedPass(tmp_path, lambda: "key", torch.zeros(5)).resume() == 0  # other shape
    # a saved file that is not this pass's (say, carried from a machine whose weights differ) is
    # said in the job's log, not skipped in silence
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all(str(tmp_path / PASS_FILE) in m and "starts at its first batch" in m for m in said)
    assert "other weights" in said[0] and "another shape" in said[1]
    again.finish()
    assert not (tmp_path / PASS_FILE).exists()


def test_a_resumed_pass_logs_its_progress_from_where_it_went_on(caplog):
    ticks = iter([0.0, 70.0, 80.0, 150.0])
    log = logging.getLogger("test.progress")
    with caplog.at_level(logging.INFO, logger="test.progress"):
        seen = list(logged_batches(list("abcdef"), "pass", log, every_s=60.0, clock=lambda: next(ticks), start=3))
    assert seen == list("def")
    # 70 s for batch 4 (the first of this run), so about 140 s for the two left
    assert [r.getMessage() for r in caplog.records] == ["pass: 4/6 batches, 70 s elapsed, about 140 s left"]
