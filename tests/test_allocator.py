"""The CLI's heap settings: applied on glibc, left alone when the user set glibc's own variables."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from tabrepro import allocator

ON_GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _run(code: str, **env: str) -> str:
    """Run `code` in a fresh interpreter (mallopt changes the whole process)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return result.stdout.strip()


@pytest.mark.skipif(not ON_GLIBC, reason="glibc only")
def test_applied_on_glibc() -> None:
    code = "from tabrepro.allocator import keep_freed_memory; print(keep_freed_memory())"
    assert _run(code, PATH="/usr/bin:/bin") == "True"


@pytest.mark.parametrize("variable", allocator._USER_VARIABLES)
def test_user_settings_win(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, "1048576")
    calls: list[tuple[int, int]] = []

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: FakeLibc())
    assert allocator.keep_freed_memory() is False
    assert calls == []


@pytest.mark.skipif(not ON_GLIBC, reason="glibc only")
def test_sets_all_three(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in allocator._USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    calls: dict[int, int] = {}

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            calls[param] = value
            return 1

    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: FakeLibc())
    assert allocator.keep_freed_memory() is True
    assert calls == {
        allocator._M_MMAP_THRESHOLD: allocator.MMAP_THRESHOLD_BYTES,
        allocator._M_TRIM_THRESHOLD: allocator.TRIM_THRESHOLD_BYTES,
        allocator._M_TOP_PAD: allocator.TOP_PAD_BYTES,
    }


def test_cli_applies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from tabrepro import cli

    applied: list[bool] = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: applied.append(True) or True)
    assert cli.main(["list", "profiles"]) == 0
    assert applied == [True]
