"""tabrepro.io: every writer replaces a file whole, leaves no temporary file, and gives every
file the permissions an ordinary open() would."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tabrepro.errors import one_line
from tabrepro.io import atomic_open, atomic_path, atomic_write, read_state, write_json


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _plain_mode(tmp_path: Path) -> int:
    reference = tmp_path / "reference"
    reference.write_bytes(b"")
    return _mode(reference)


def test_atomic_write_bytes_and_text_replace_the_file(tmp_path: Path):
    target = tmp_path / "deep" / "dir" / "out.txt"
    atomic_write(target, b"first\n")
    assert target.read_bytes() == b"first\n"
    atomic_write(target, "zweite Zeile, caf\u00e9\r\n")  # text: UTF-8, newlines as given
    assert target.read_bytes() == "zweite Zeile, caf\u00e9\r\n".encode()
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.txt"]
    assert _mode(target) == _plain_mode(tmp_path)


def test_a_failing_writer_leaves_the_old_file_and_no_temporary_file(tmp_path: Path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_open(target) as handle:
            handle.write(b"half of the new")
            raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_path(tmp_path / "new.png", suffix=".png") as temp:
            temp.write_bytes(b"partial")
            raise RuntimeError("boom")
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_atomic_path_serves_writers_that_want_a_file_name(tmp_path: Path):
    target = tmp_path / "figure.png"
    with atomic_path(target, suffix=".png") as temp:
        assert temp.parent == tmp_path and temp.name.startswith(".figure.png.") and temp.suffix == ".png"
        temp.write_bytes(b"png bytes")
    assert target.read_bytes() == b"png bytes" and not temp.exists()
    assert _mode(target) == _plain_mode(tmp_path)


def test_write_json_options_and_final_newline(tmp_path: Path):
    target = tmp_path / "result.json"
    write_json(target, {"b": 1, "a": [1.5, None]})
    assert target.read_text() == '{\n  "a": [\n    1.5,\n    null\n  ],\n  "b": 1\n}\n'
    write_json(target, {"b": "\u00e9", "a": 2}, indent=None, sort_keys=False, ensure_ascii=False)
    assert target.read_bytes() == '{"b": "\u00e9", "a": 2}\n'.encode()
    with pytest.raises(ValueError):
        write_json(target, {"x": float("nan")}, allow_nan=False)
    assert json.loads(target.read_text()) == {"b": "\u00e9", "a": 2}  # untouched by the failure


def test_atomic_open_refuses_modes_that_are_not_a_whole_new_file(tmp_path: Path):
    for mode in ("ab", "r+b", "a"):
        with pytest.raises(ValueError, match="whole new file"):
            with atomic_open(tmp_path / "x", mode):
                pass
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "not a result (Expecting value"),
        (b'{"metrics": ', "not a result (Expecting"),
        (b"\xff\xfe", "not a result ("),
        (b"[1, 2]", "not a result (not a JSON object)"),
    ],
)
def test_an_unreadable_state_file_is_set_aside_and_read_as_none(tmp_path: Path, caplog, content, problem):
    path = tmp_path / "finished.json"
    path.write_bytes(content)
    assert read_state(path, "a result", "the fold is trained again") is None
    assert not path.exists() and (tmp_path / "finished.json.corrupt").read_bytes() == content
    assert problem in caplog.text and "the fold is trained again" in caplog.text


def test_a_state_file_is_read_as_its_object_and_a_missing_one_as_none(tmp_path: Path):
    path = tmp_path / "finished.json"
    assert read_state(path, "a result", "again") is None
    write_json(path, {"metrics": {"auroc": 0.5}})
    assert read_state(path, "a result", "again") == {"metrics": {"auroc": 0.5}} and path.exists()


def test_one_line_joins_lines_collapses_spaces_and_caps_its_length():
    assert one_line(ValueError("bad  row\n\n  at   line 3 ")) == "bad row; at line 3"
    assert one_line(ValueError("x" * 300), 200) == "x" * 200
    assert one_line(KeyError()) == "KeyError"
