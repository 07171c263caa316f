"""Fault injection on the data path, all traffic on 127.0.0.1: a hostile or broken server, mirror
or file must stop the fetch or parse with one line, or be worked around, never slip through."""

from __future__ import annotations

import hashlib
import io
import time
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import SHARED_DATASETS, repo_raw_params
from data_server import DataServer, bypass_proxies
from tabrepro.cli import main
from tabrepro.data.fetch import (
    MANIFEST_NAME,
    DeadlineExceededError,
    FetchError,
    FetchOptions,
    fetch_source,
    fetch_source_status,
)
from tabrepro.data.parse import ParseError, parse_source
from tabrepro.data.registry import RegistryError, get_source, source_from_dict

TOY = b"a,b,label\n1,x,yes\n2,y,no\n3,x,yes\n4,z,no\n"
TOY_INF = b"a,b,label\n1,x,yes\n2,y,no\ninf,x,yes\n4,z,no\n"
CREDIT = "openml_361055_credit"


@pytest.fixture(autouse=True)
def _direct_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    bypass_proxies(monkeypatch)


def options(**overrides: Any) -> FetchOptions:
    base: dict[str, Any] = {"retries": 0, "backoff_seconds": 0.01, "timeout_seconds": 5, "progress": False}
    return FetchOptions(**{**base, **overrides})


def toy_source(url: str | None, *, sha256: str | None = None, **entry_fields: Any):
    remote = {"name": "toy.csv", "url": url, "mirror_path": "toy/toy.csv", "sha256": sha256}
    entry = {
        "task": "binary",
        "source": "url",
        "files": [remote],
        "format": {"kind": "csv", "header": "infer"},
        "target": "label",
        "categorical": ["b"],
        "expected": {"rows": 4, "features": 2},
        **entry_fields,
    }
    return source_from_dict("toy", entry)


def params_file(tmp_path: Path, **fetch_settings: Any) -> str:
    raw = repo_raw_params()
    raw["paths"] = {"data": str(tmp_path / "data"), "results": str(tmp_path / "results")}
    raw["fetch"].update(retries=0, backoff_seconds=0.01, timeout_seconds=5, **fetch_settings)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


# ------------------------------------------------------------------------------ infinite values
def test_an_inf_in_a_numeric_column_is_refused_naming_file_column_and_row(tmp_path: Path) -> None:
    directory = tmp_path / "toy"
    directory.mkdir()
    (directory / "toy.csv").write_bytes(TOY_INF)
    with pytest.raises(ParseError, match=r"file toy\.csv, column a: 1 non-finite value\(s\).*data row 3"):
        parse_source(toy_source(None), tmp_path)


def test_a_registry_entry_may_read_inf_as_missing(tmp_path: Path) -> None:
    directory = tmp_path / "toy"
    directory.mkdir()
    (directory / "toy.csv").write_bytes(TOY_INF)
    table = parse_source(toy_source(None, non_finite="missing"), tmp_path)
    assert table.frame["a"].isna().tolist() == [False, False, True, False]
    with pytest.raises(RegistryError, match="non_finite"):
        toy_source(None, non_finite="zero")


def bank_zip_with_inf() -> bytes:
    """bank.zip as the registry's bank_marketing expects it, its member a copy of the shared
    bank.csv whose `balance` reads `inf` in the 5th data row."""
    lines = (SHARED_DATASETS / "bank_marketing" / "bank.csv").read_text().splitlines(keepends=True)
    header = [c.strip('"') for c in lines[0].strip().split(";")]
    row = lines[5].split(";")
    row[header.index("balance")] = "inf"
    lines[5] = ";".join(row)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("bank-full.csv", "".join(lines))
    return buffer.getvalue()


@pytest.mark.skipif(SHARED_DATASETS is None, reason="offline dataset copies not found")
def test_a_served_bank_csv_with_inf_is_not_fetched(tmp_path: Path) -> None:
    source = get_source("bank_marketing")
    with DataServer(files={"bank_marketing/bank.zip": bank_zip_with_inf()}) as mirror:
        mirror.not_found("canonical/bank.zip")  # the registry's URL, served here
        local = replace(source, files=(replace(source.files[0], url=mirror.url_for("canonical/bank.zip")),))
        with pytest.raises(FetchError, match=r"file bank-full\.csv, column balance: .*data row 5") as caught:
            fetch_source(local, tmp_path, options(mirror=mirror.url))
        assert mirror.requested("canonical/bank.zip") == 1  # the canonical URL was tried after the bad copy
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "bank_marketing").exists()  # nothing of the unpinned copy is kept


@pytest.mark.skipif(SHARED_DATASETS is None, reason="offline dataset copies not found")
def test_prepare_stops_on_a_bank_csv_with_inf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = params_file(tmp_path)
    archive = bank_zip_with_inf()
    raw = tmp_path / "data" / "raw" / "bank_marketing"
    raw.mkdir(parents=True)
    (raw / "bank.zip").write_bytes(archive)
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        (raw / "bank-full.csv").write_bytes(opened.read("bank-full.csv"))
    assert main(["--params", params, "--quiet", "prepare", "bank_marketing"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "tabrepro prepare: error:" in err[0] and "file bank-full.csv, column balance" in err[0]
    assert "data row 5" in err[0]
    assert not (tmp_path / "data" / "processed").exists()


# ------------------------------------------------------------------------------ deadline
def test_headers_sent_a_byte_a_second_do_not_outlive_the_deadline(tmp_path: Path) -> None:
    with DataServer(files={"toy/toy.csv": TOY}) as server:
        server.header_drip("toy/toy.csv", seconds=1.0)
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError, match="not finished within 1.5 s"):
            fetch_source(toy_source(server.url_for("toy/toy.csv")), tmp_path, options(deadline_seconds=1.5))
        assert time.monotonic() - started < 4
    assert not (tmp_path / "toy").exists()


# ------------------------------------------------------------------------------ verified
def test_an_unpinned_file_is_recorded_unverified_and_a_pinned_one_verified(tmp_path: Path) -> None:
    with DataServer(files={"toy/toy.csv": TOY}) as server:
        url = server.url_for("toy/toy.csv")
        unpinned = fetch_source_status(toy_source(url), tmp_path / "a", options())
        pinned = fetch_source_status(toy_source(url, sha256=hashlib.sha256(TOY).hexdigest()), tmp_path / "b", options())
    assert unpinned.ok and not unpinned.verified
    assert pinned.ok and pinned.verified


# ------------------------------------------------------------------------------ refetch edges
def test_a_bad_mirror_copy_of_an_unpinned_file_falls_back_to_the_canonical_url(tmp_path: Path) -> None:
    with DataServer(files={"toy/toy.csv": b"<html>not a table</html>\n"}) as mirror:
        with DataServer(files={"canonical/toy.csv": TOY}) as canonical:
            source = toy_source(canonical.url_for("canonical/toy.csv"))
            fetch_source(source, tmp_path, options(mirror=mirror.url))
            assert canonical.requested("canonical/toy.csv") == 1
    assert (tmp_path / "toy" / "toy.csv").read_bytes() == TOY
    assert hashlib.sha256(TOY).hexdigest() in (tmp_path / "toy" / MANIFEST_NAME).read_text()


def test_fetch_refresh_keeps_the_good_copy_until_the_new_one_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_fetch_trust import ARFF, api_files

    params = params_file(tmp_path)
    directory = tmp_path / "data" / "raw" / CREDIT
    with DataServer(files=api_files(task_id=361055)) as api:
        monkeypatch.setenv("TABREPRO_OPENML_URL", api.url)
        assert main(["--params", params, "--quiet", "fetch", "--record", CREDIT]) == 0
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    with DataServer(files=api_files(task_id=361055, arff=ARFF)) as bad_api:
        bad_api.corrupt("data/v1/download/777")
        monkeypatch.setenv("TABREPRO_OPENML_URL", bad_api.url)
        assert main(["--params", params, "--quiet", "fetch", "--refresh", CREDIT]) == 2
    assert "the earlier copy is kept" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    assert not [p for p in directory.parent.iterdir() if p.name.startswith(".")]  # nothing set aside is left
