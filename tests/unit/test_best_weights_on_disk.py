"""`best_weights_on_disk` (NPTConfig, BiSHopConfig): the best-so-far weights kept in a file of the
checkpoint directory instead of in RAM. Same results as in RAM; never a state without its best
weights on disk, whenever the run is killed; nothing left behind that no state names."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tabrepro.models.bishop import BiSHopTrainer
from tabrepro.models.bishop.trainer import STATE_FILE as BISHOP_STATE_FILE
from tabrepro.models.npt import NPTConfig, NPTTrainer
from tabrepro.models.npt.trainer import BEST_WEIGHTS_FILE, STATE_FILE
from tabrepro.nn.checkpoint import BEST_WEIGHTS_PREFIX
from test_bishop import split, tiny, toy_data
from test_npt import TINY, make_table, weights_equal


class Interrupt(Exception):
    pass


def best_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob(f"{BEST_WEIGHTS_PREFIX}*.pt"))


def state_names_existing_best_weights(directory: Path, state_file: str) -> bool:
    state = torch.load(directory / state_file, weights_only=True)
    best = state["best"]
    if best.get("weights_file") is None:
        return best["weights"] is not None or best["loss"] is None
    return best["weights"] is None and (directory / best["weights_file"]).is_file()


# ------------------------------------------------------------------------------------- NPT
def npt_config(**options) -> NPTConfig:
    return NPTConfig(**TINY, max_steps=12, batch_size=25, checkpoint_every_steps=2, p_target=0.5, **options)


def test_npt_on_disk_gives_the_in_memory_run_and_holds_no_copy_in_ram(tmp_path: Path):
    table = make_table(60)
    in_memory = NPTTrainer(table.attributes, npt_config(), checkpoint_dir=tmp_path / "memory")
    expected = in_memory.fit(table)

    seen = []

    def check(step, record):  # after each step's checkpoint: no RAM copy, the state names a file
        seen.append((trainer.best_weights is None, best_files(tmp_path / "disk")))
        if (tmp_path / "disk" / STATE_FILE).exists():
            assert state_names_existing_best_weights(tmp_path / "disk", STATE_FILE)

    trainer = NPTTrainer(table.attributes, npt_config(best_weights_on_disk=True), checkpoint_dir=tmp_path / "disk")
    result = trainer.fit(table, callback=check)
    assert result.history == expected.history and result.best_step == expected.best_step
    assert result.best_val_loss == expected.best_val_loss and result.test_loss == expected.test_loss
    assert weights_equal(trainer.model.state_dict(), in_memory.model.state_dict())
    assert all(no_copy for no_copy, _ in seen) and any(files for _, files in seen)
    assert max(len(files) for _, files in seen) <= 2  # the newest, and one until a state names it
    assert best_files(tmp_path / "disk") == [f"{BEST_WEIGHTS_PREFIX}{expected.best_step}.pt"]
    saved = torch.load(tmp_path / "disk" / BEST_WEIGHTS_FILE, weights_only=True)
    assert weights_equal(saved, torch.load(tmp_path / "memory" / BEST_WEIGHTS_FILE, weights_only=True))
    state = torch.load(tmp_path / "disk" / STATE_FILE, weights_only=True)
    assert state["best"]["weights"] is None  # the state file does not carry the weights


@pytest.mark.parametrize("kill_at", [3, 7, 10])
def test_npt_killed_anywhere_resumes_to_the_uninterrupted_weights(tmp_path: Path, kill_at: int):
    table = make_table(60)
    config = npt_config(best_weights_on_disk=True)
    reference = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path / "straight")
    expected = reference.fit(table)

    def kill(step, record):
        if step == kill_at:
            raise Interrupt

    directory = tmp_path / "killed"
    with pytest.raises(Interrupt):
        NPTTrainer(table.attributes, config, checkpoint_dir=directory).fit(table, callback=kill)
    (directory / f"{BEST_WEIGHTS_PREFIX}999.pt").write_bytes(b"an orphan no state names")
    resumed = NPTTrainer(table.attributes, config, checkpoint_dir=directory)
    result = resumed.fit(table)
    assert result.resumed_from is not None
    assert result.history == expected.history and result.best_step == expected.best_step
    assert weights_equal(resumed.model.state_dict(), reference.model.state_dict())
    assert best_files(directory) == best_files(tmp_path / "straight")  # the orphan is gone


def test_npt_a_state_whose_best_weights_file_is_missing_is_refused(tmp_path: Path):
    table = make_table(60)
    config = npt_config(best_weights_on_disk=True)
    NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table)
    for path in tmp_path.glob(f"{BEST_WEIGHTS_PREFIX}*.pt"):
        path.unlink()
    with pytest.raises(ValueError, match="which are missing"):
        NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table)


def test_the_setting_can_change_between_a_kill_and_the_resume(tmp_path: Path):
    table = make_table(60)
    expected = NPTTrainer(table.attributes, npt_config()).fit(table)

    def kill(step, record):
        if step == 6:
            raise Interrupt

    with pytest.raises(Interrupt):
        NPTTrainer(table.attributes, npt_config(), checkpoint_dir=tmp_path).fit(table, callback=kill)
    result = NPTTrainer(table.attributes, npt_config(best_weights_on_disk=True), checkpoint_dir=tmp_path).fit(table)
    assert result.history == expected.history and result.best_step == expected.best_step


def test_on_disk_without_a_checkpoint_directory_is_refused():
    table = make_table(60)
    with pytest.raises(ValueError, match="best_weights_on_disk needs a checkpoint directory"):
        NPTTrainer(table.attributes, npt_config(best_weights_on_disk=True)).fit(table)


# ---------------------------------------------------------------------------------- BiSHop
def bishop(config, directory: Path | None) -> BiSHopTrainer:
    return BiSHopTrainer(
        config, "classification", cardinalities=(3,), n_numerical=3, n_classes=2, checkpoint_dir=directory
    )


def test_bishop_on_disk_killed_and_resumed_gives_the_in_memory_run(tmp_path: Path):
    data = toy_data(100)
    train, val, _ = split(data, 70, 30)
    options = dict(max_epochs=6, lr=3e-3, lr_patience=0, early_stopping_patience=3)
    reference = bishop(tiny(**options), tmp_path / "memory")
    expected = reference.fit(train, val)

    def kill(epoch, record):
        assert state_names_existing_best_weights(tmp_path / "disk", BISHOP_STATE_FILE)
        if epoch == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        bishop(tiny(**options, best_weights_on_disk=True), tmp_path / "disk").fit(train, val, callback=kill)
    resumed = bishop(tiny(**options, best_weights_on_disk=True), tmp_path / "disk")
    result = resumed.fit(train, val)
    assert result.history == expected.history and result.best_epoch == expected.best_epoch
    assert weights_equal(resumed.model.state_dict(), reference.model.state_dict())
    assert resumed.best_weights is None
    assert best_files(tmp_path / "disk") == [f"{BEST_WEIGHTS_PREFIX}{expected.best_epoch}.pt"]
