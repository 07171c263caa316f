"""The heap setting every command applies: taken on glibc, left alone when the user set glibc's own
variables, and applied by the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tabrepro.nn import session

ON_LINUX = sys.platform.startswith("linux")


class RecordingLibc:
    """Stands in for libc: records each mallopt call and accepts it (mallopt is a plain function,
    which takes the argtypes/restype attributes ctypes' own functions take)."""

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}

        def mallopt(param: int, value: int) -> int:
            self.calls[param] = value
            return 1

        self.mallopt = mallopt


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> RecordingLibc:
    fake = RecordingLibc()
    monkeypatch.setattr(session, "_malloc_tuned", False)
    monkeypatch.setattr(session.ctypes, "CDLL", lambda name: fake)
    for name in session._USER_MALLOC_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return fake


@pytest.mark.skipif(not ON_LINUX, reason="glibc only")
def test_applied_in_a_fresh_process() -> None:
    code = "from tabrepro.nn.session import retain_freed_memory; print(retain_freed_memory())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={})
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize("variable", session._USER_MALLOC_VARIABLES)
def test_user_settings_win(variable: str, libc: RecordingLibc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, "1048576")
    assert session.retain_freed_memory() is False
    assert libc.calls == {}


@pytest.mark.skipif(not ON_LINUX, reason="glibc only")
def test_sets_all_three(libc: RecordingLibc) -> None:
    assert session.retain_freed_memory(trim_threshold=3, mmap_threshold=2, top_pad=1) is True
    assert libc.calls == {session._M_MMAP_THRESHOLD: 2, session._M_TRIM_THRESHOLD: 3, session._M_TOP_PAD: 1}


def test_cli_applies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from tabrepro import cli

    applied: list[bool] = []
    monkeypatch.setattr(cli, "retain_freed_memory", lambda: applied.append(True) or True)
    assert cli.main(["list", "profiles"]) == 0
    assert applied == [True]


@pytest.mark.parametrize("command", ["fetch", "prepare", "split"])
def test_not_for_one_pass_over_a_table(monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    import argparse

    from tabrepro import cli

    subcommands = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert command in subcommands.choices and command in cli.TABLE_COMMANDS
    applied: list[bool] = []
    monkeypatch.setattr(cli, "retain_freed_memory", lambda: applied.append(True) or True)
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_of(command))
    cli.main([])
    assert applied == []


def _parser_of(command: str):
    import argparse

    parser = argparse.ArgumentParser()
    parser.set_defaults(command=command, func=lambda args: None)
    return parser


def test_the_trainers_apply_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the CLI too (Python use, the step benchmarks): each trainer's prepare asks for it."""
    from tabrepro.models.bishop import BiSHopTrainer
    from tabrepro.models.bishop import trainer as bishop_trainer
    from tabrepro.models.npt import NPTConfig, NPTTrainer
    from tabrepro.models.npt import trainer as npt_trainer
    from test_bishop import split, tiny, toy_data
    from test_npt import TINY, make_table

    applied: list[str] = []
    monkeypatch.setattr(npt_trainer, "retain_freed_memory", lambda: applied.append("npt") or True)
    monkeypatch.setattr(bishop_trainer, "retain_freed_memory", lambda: applied.append("bishop") or True)
    table = make_table(20)
    NPTTrainer(table.attributes, NPTConfig(**TINY, max_steps=1)).prepare(table)
    train, val, _ = split(toy_data(30), 20, 5)
    bishop = BiSHopTrainer(tiny(), "classification", cardinalities=(3,), n_numerical=3, n_classes=2)
    bishop.prepare(train, val)
    assert applied == ["npt", "bishop"]
