"""Fault injection on resuming: a state file a job cannot use is set aside with one line and the
job starts over, never crashes on every retry nor resumes state written under other settings."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tabrepro.config import Job
from tabrepro.config_jobs import _state_dir
from tabrepro.models.npt.config import NPTConfig
from tabrepro.models.npt.interface import NPTModel
from tabrepro.models.npt.trainer import STATE_FILE, NPTTrainer
from test_npt import TINY, make_table


def test_a_state_file_of_another_checkpoint_format_is_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = make_table(40)
    config = NPTConfig(**{**TINY, "max_steps": 2})
    reference = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path / "ref").fit(table)
    NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table)
    state = torch.load(tmp_path / STATE_FILE, weights_only=True)
    torch.save({**state, "format": 99}, tmp_path / STATE_FILE)
    with caplog.at_level(logging.WARNING):
        result = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table)
    assert result.resumed_from is None  # started from scratch
    assert result.val_history == reference.val_history
    lines = [r.getMessage() for r in caplog.records if "checkpoint format 99" in r.getMessage()]
    assert len(lines) == 1 and "moved aside" in lines[0] and "training starts from scratch" in lines[0]
    assert (tmp_path / (STATE_FILE + ".corrupt")).is_file()


def test_the_state_key_includes_the_checkpoint_format(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = SimpleNamespace(seed=0, job=Job("npt", "breast_cancer", "npt", 0))
    data = SimpleNamespace(split=SimpleNamespace(sha256="ab" * 32))
    before = _state_dir(tmp_path, spec, data, {"lr": 1e-3})  # type: ignore[arg-type]
    monkeypatch.setattr(NPTModel, "checkpoint_format", NPTModel.checkpoint_format + 1)
    after = _state_dir(tmp_path, spec, data, {"lr": 1e-3})  # type: ignore[arg-type]
    assert before != after
