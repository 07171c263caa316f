"""Fault injection on committed run records: an edited byte anywhere in a record fails
`record --check`, and no command's advice accepts a changed result."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO
from tabrepro.cli import main
from tabrepro.reporting.records import (
    MANIFEST_FILE,
    RECORDS_DIR,
    RecordError,
    check_manifest,
    read_manifest,
    read_records,
    rejudge,
    restore,
)

RECORD = "bishop_cpu"
METRICS = "results/bishop/qsar/bishop/fold0/metrics.json"


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """A scratch copy of one committed record."""
    runs = tmp_path / "runs"
    shutil.copytree(REPO / RECORDS_DIR / RECORD, runs / RECORD)
    return runs


def edit_metric(path: Path, split: str) -> None:
    result = json.loads(path.read_text())
    result["metrics"][split]["accuracy_pct"] += 1.0
    path.write_text(json.dumps(result, indent=2))


def test_every_committed_record_matches_its_manifest() -> None:
    for directory, _ in read_records(REPO / RECORDS_DIR):
        check = check_manifest(directory)
        assert check.ok, check.problems()


@pytest.mark.parametrize(
    "relative",
    [
        METRICS,
        "record.json",
        "results/tables/bishop/table4_2.csv",
        "results/tables/bishop/table4_2.md",
        "results/tables/bishop/table4_2.tex",
        "results/scorecard/scorecard.md",
        "results/scorecard/summary.json",
    ],
)
def test_one_edited_byte_anywhere_is_found(records: Path, relative: str) -> None:
    path = records / RECORD / relative
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    check = check_manifest(records / RECORD)
    assert not check.ok
    assert relative in check.inputs + check.derived


def test_a_table_number_edited_is_found_and_rejudge_restores_it(records: Path) -> None:
    table = records / RECORD / "results/tables/bishop/table4_2.csv"
    original = table.read_text()
    edited, count = re.subn(r",\d+\.\d+,", ",1.0,", original, count=1)
    assert count == 1
    table.write_text(edited)
    check = check_manifest(records / RECORD)
    assert check.derived == ["results/tables/bishop/table4_2.csv"] and not check.inputs
    assert "`tabrepro record --rejudge` regenerates them" in " ".join(check.problems())
    rejudge(REPO / "params.yaml", records)
    assert table.read_text() == original
    assert check_manifest(records / RECORD).ok


@pytest.mark.parametrize("split", ["val", "test"])
def test_rejudge_refuses_an_edited_result_and_writes_nothing(records: Path, split: str) -> None:
    edit_metric(records / RECORD / METRICS, split)
    before = {p: p.read_bytes() for p in (records / RECORD).rglob("*") if p.is_file()}
    check = check_manifest(records / RECORD)
    assert check.inputs == [METRICS]
    advice = " ".join(check.problems())
    assert "--rejudge" not in advice and "--seal" not in advice and "git checkout" in advice
    with pytest.raises(RecordError, match=re.escape(METRICS)):
        rejudge(REPO / "params.yaml", records)
    assert {p: p.read_bytes() for p in (records / RECORD).rglob("*") if p.is_file()} == before


def test_rejudge_refuses_a_record_without_a_manifest(records: Path) -> None:
    (records / RECORD / MANIFEST_FILE).unlink()
    with pytest.raises(RecordError, match="no MANIFEST.sha256"):
        rejudge(REPO / "params.yaml", records)


def test_restore_refuses_an_edited_result(records: Path) -> None:
    edit_metric(records / RECORD / METRICS, "test")
    with pytest.raises(RecordError, match=re.escape(METRICS)):
        restore(object(), RECORD, records_dir=records)


def test_an_added_file_is_found(records: Path) -> None:
    extra = records / RECORD / "results/bishop/qsar/bishop/fold1/metrics.json"
    extra.parent.mkdir(parents=True)
    shutil.copy(records / RECORD / METRICS, extra)
    assert check_manifest(records / RECORD).inputs == ["results/bishop/qsar/bishop/fold1/metrics.json"]


def test_rejudge_keeps_the_manifest_consistent(records: Path) -> None:
    card = records / RECORD / "results/scorecard/scorecard.md"
    judged = card.read_text()
    card.write_text(judged.replace("differs", "reproduced"))
    before = read_manifest(records / RECORD)
    rejudge(REPO / "params.yaml", records)
    assert card.read_text() == judged
    assert read_manifest(records / RECORD) == before
    assert check_manifest(records / RECORD).ok


def test_record_check_fails_on_an_edited_test_metric_without_advising_rejudge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole command on a copy of the repository's README, docs and records."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "README.md", root / "README.md")
    shutil.copytree(REPO / RECORDS_DIR / RECORD, root / RECORDS_DIR / RECORD)
    for directory, _ in read_records(REPO / RECORDS_DIR):
        if directory.name != RECORD:
            shutil.copytree(directory, root / RECORDS_DIR / directory.name)
    edit_metric(root / RECORDS_DIR / RECORD / METRICS, "test")
    argv = ["--params", str(REPO / "params.yaml"), "record", "--check", "--readme", str(root / "README.md")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert METRICS in err and "git checkout" in err
    assert "record --rejudge" not in err  # the edited result's stale scorecard gets no advice to rejudge
