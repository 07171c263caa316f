"""Fault injection for what a fetch may trust: a misbehaving local server must never get bytes,
hashes or download locations accepted that did not pass every check."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import repo_raw_params
from data_server import DataServer, bypass_proxies
from tabrepro.cli import main
from tabrepro.config import ParamsError, validate_schema
from tabrepro.data import openml
from tabrepro.data.availability import FetchStatus, read_fetch_status, write_fetch_status
from tabrepro.data.fetch import (
    MANIFEST_NAME,
    DeadlineExceededError,
    FetchError,
    FetchOptions,
    UnprovenDownloadError,
    fetch_source,
    fetch_source_status,
)
from tabrepro.data.registry import DatasetSource, RegistryError, source_from_dict

TOY = b"a,b,label\r\n1,x,yes\r\n2,y,no\r\n3,x,yes\r\n4,,no\r\n"
TOY_SHA = hashlib.sha256(TOY).hexdigest()
HTML = b"<html><body>Moved. Please see our new site.</body></html>\n"
CREDIT = "openml_361055_credit"  # a registry OpenML task; its API is pointed at a local server


@pytest.fixture(autouse=True)
def _direct_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    bypass_proxies(monkeypatch)


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    path = tmp_path / "raw"
    path.mkdir()
    return path


def options(**overrides: Any) -> FetchOptions:
    base: dict[str, Any] = {"retries": 1, "backoff_seconds": 0.01, "timeout_seconds": 5, "progress": False}
    return FetchOptions(**{**base, **overrides})


def toy_source(url: str, *, file_name: str = "toy.csv", member: str | None = None, sha256: str | None = None):
    remote: dict[str, Any] = {"name": file_name, "url": url, "mirror_path": f"toy/{file_name}", "sha256": sha256}
    if member:
        remote["member"] = member
    entry = {
        "task": "binary",
        "source": "url",
        "files": [remote],
        "format": {"kind": "csv", "header": "infer"},
        "target": "label",
        "categorical": ["b"],
        "expected": {"rows": 4, "features": 2},
    }
    return source_from_dict("toy", entry)


def manifest(directory: Path) -> str:
    path = directory / MANIFEST_NAME
    return path.read_text() if path.is_file() else ""


def zipped(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(name, data)
    return buffer.getvalue()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ----------------------------------------------------------------------------------------------
# trust on first use only for bytes that passed every check


def test_unpinned_archive_that_is_not_a_zip_is_forgotten(raw: Path) -> None:
    with DataServer(files={"/toy/toy.zip": HTML}) as bad:
        with pytest.raises(FetchError, match=r"not a readable zip archive.*toy.zip removed with its recorded hash"):
            fetch_source(toy_source(bad.url_for("toy/toy.zip"), file_name="toy.zip", member="toy.csv"), raw, options())
    assert not (raw / "toy" / "toy.zip").exists()
    assert "toy.zip" not in manifest(raw / "toy")
    with DataServer(files={"/toy/toy.zip": zipped("toy.csv", TOY)}) as good:
        source = toy_source(good.url_for("toy/toy.zip"), file_name="toy.zip", member="toy.csv")
        fetch_source(source, raw, options())
        assert good.requested("toy/toy.zip") == 1  # the later fetch asked a source again
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY


def test_unpinned_file_that_does_not_parse_is_forgotten(raw: Path) -> None:
    with DataServer(files={"/toy/toy.csv": HTML}) as bad:
        with pytest.raises(FetchError, match=r"toy.csv.*unpinned toy.csv removed with their recorded hashes"):
            fetch_source(toy_source(bad.url_for("toy/toy.csv")), raw, options())
    assert not (raw / "toy" / "toy.csv").exists()
    assert "toy.csv" not in manifest(raw / "toy")
    with DataServer(files={"/toy/toy.csv": TOY}) as good:
        fetch_source(toy_source(good.url_for("toy/toy.csv")), raw, options())
        assert good.requested("toy/toy.csv") == 1
    assert manifest(raw / "toy") == f"{TOY_SHA}  toy.csv\n"


def test_body_cut_short_without_content_length_is_not_trusted(raw: Path) -> None:
    with DataServer(files={"/toy/toy.csv": TOY}) as srv:
        srv.unannounced("toy/toy.csv", keep_bytes=len(TOY) - 8)  # whole lines: it would still parse
        with pytest.raises(UnprovenDownloadError, match="without a Content-Length"):
            fetch_source(toy_source(srv.url_for("toy/toy.csv")), raw, options())
        assert not (raw / "toy").exists()
        srv.unannounced("toy/toy.csv")  # a pinned file needs no Content-Length: its checksum decides
        fetch_source(toy_source(srv.url_for("toy/toy.csv"), sha256=TOY_SHA), raw, options())
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY


# ----------------------------------------------------------------------------------------------
# where downloads may go


def test_ftp_redirect_is_not_followed(raw: Path) -> None:
    with DataServer(files={"/toy/toy.csv": TOY}) as srv:
        srv.redirect("toy/toy.csv", f"ftp://127.0.0.1:{closed_port()}/toy.csv")
        with pytest.raises(FetchError, match=r"redirects to 'ftp://127\.0\.0\.1:\d+/toy.csv'; only https"):
            fetch_source(toy_source(srv.url_for("toy/toy.csv"), sha256=TOY_SHA), raw, options(retries=3))
        assert srv.requested("toy/toy.csv") == 1  # refused, not retried
    assert not (raw / "toy").exists()


def test_plain_http_redirect_only_stays_on_the_configured_mirror(raw: Path) -> None:
    with DataServer(files={"/elsewhere/toy.csv": TOY}) as other, DataServer(files={"/moved.csv": TOY}) as mirror:
        mirror.redirect("toy/toy.csv", other.url_for("elsewhere/toy.csv").replace("127.0.0.1", "localhost"))
        source = toy_source(f"{mirror.url}/missing.csv", sha256=TOY_SHA)
        with pytest.raises(FetchError, match=r"redirects to 'http://localhost:\d+/elsewhere/toy.csv'"):
            fetch_source(source, raw, options(mirror=mirror.url))
        assert other.requested("elsewhere/toy.csv") == 0
        mirror.redirect("toy/toy.csv", "/moved.csv")  # the mirror's own host: followed
        fetch_source(source, raw, options(mirror=mirror.url))
        assert mirror.requested("moved.csv") == 1
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY


def test_trickling_server_is_given_up_on_at_the_deadline(raw: Path) -> None:
    with DataServer(files={"/toy/toy.csv": TOY}) as srv:
        srv.drip("toy/toy.csv", seconds=0.1)  # 4.5 s for the whole body, no read ever times out
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError, match=r"not finished within 1 s \(fetch.deadline_seconds\)"):
            fetch_source(toy_source(srv.url_for("toy/toy.csv"), sha256=TOY_SHA), raw, options(deadline_seconds=1))
        assert time.monotonic() - started < 3
        assert srv.requested("toy/toy.csv") == 1
    assert not (raw / "toy").exists()


# ----------------------------------------------------------------------------------------------
# OpenML: the md5 never comes from the mirror that serves the bytes

ARFF = b"@RELATION toy\n@ATTRIBUTE x REAL\n@ATTRIBUTE y {no,yes}\n@DATA\n1,yes\n2,no\n3,yes\n4,no\n"
FAKE_ARFF = ARFF.replace(b"1,yes", b"9,no")


def task_doc(task_id: int, dataset_id: Any = 4242) -> bytes:
    data_set = {"data_set_id": dataset_id, "target_feature": "y"}
    task = {"task_id": str(task_id), "task_type": "Supervised Classification"}
    return json.dumps({"task": {**task, "input": [{"name": "source_data", "data_set": data_set}]}}).encode()


def dataset_doc(arff: bytes, dataset_id: int = 4242, **fields: Any) -> bytes:
    desc = {"id": str(dataset_id), "format": "ARFF", "file_id": "777", "md5_checksum": hashlib.md5(arff).hexdigest()}
    return json.dumps({"data_set_description": {**desc, **fields}}).encode()


def api_files(task_id: int = 99, arff: bytes = ARFF) -> dict[str, bytes]:
    return {
        f"/api/v1/json/task/{task_id}": task_doc(task_id),
        "/api/v1/json/data/4242": dataset_doc(arff),
        "/data/v1/download/777": arff,
    }


def mirror_files(name: str, arff: bytes, task_id: int = 99, **dataset_fields: Any) -> dict[str, bytes]:
    return {
        f"/{name}/task.json": task_doc(task_id),
        f"/{name}/dataset.json": dataset_doc(arff, **dataset_fields),
        f"/{name}/dataset.arff": arff,
    }


def openml_source(name: str = "openml_99_toy") -> DatasetSource:
    return source_from_dict(name, {"task": "binary", "source": "openml_task", "openml": {"task_id": 99}})


def test_mirror_md5_is_not_trusted_when_the_api_answers(raw: Path) -> None:
    with DataServer(files=api_files()) as api, DataServer(files=mirror_files("openml_99_toy", FAKE_ARFF)) as mirror:
        status = fetch_source_status(openml_source(), raw, options(openml_url=api.url, mirror=mirror.url))
        assert mirror.requested("openml_99_toy/dataset.arff") == 1  # tried first, refused by the API's md5
        assert api.requested("data/v1/download/777") == 1
    assert status.verified
    assert (raw / "openml_99_toy" / "dataset.arff").read_bytes() == ARFF


def test_mirror_only_openml_fetch_is_recorded_unverified(raw: Path) -> None:
    dead_api = f"http://127.0.0.1:{closed_port()}"
    with DataServer(files=mirror_files("openml_99_toy", ARFF)) as mirror:
        status = fetch_source_status(openml_source(), raw, options(openml_url=dead_api, mirror=mirror.url))
    assert not status.verified
    assert "task.json" not in manifest(raw / "openml_99_toy")  # asked of the API again next time
    with DataServer(files=api_files()) as api:
        again = fetch_source_status(openml_source(), raw, options(openml_url=api.url))
        assert api.requested("data/v1/download/777") == 0  # the bytes were right; now they are verified
    assert again.verified


def test_fetch_record_keeps_the_verified_flag_and_reads_old_records(raw: Path) -> None:
    write_fetch_status(raw, FetchStatus(CREDIT, ok=True, files=["x"], verified=False))
    assert json.loads((raw / CREDIT / "fetch_status.json").read_text())["verified"] is False
    assert read_fetch_status(raw, CREDIT) == FetchStatus(CREDIT, ok=True, files=["x"], verified=False)
    (raw / CREDIT / "fetch_status.json").write_text(json.dumps({"source": CREDIT, "ok": True, "files": []}))
    assert read_fetch_status(raw, CREDIT).verified  # a record from before the field


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"url": "/etc/hostname"}, r"names download url '/etc/hostname'; only an https address"),
        ({"url": "file:///etc/hostname"}, r"names download url 'file:///etc/hostname'"),
        ({"file_id": "../../../etc/hostname"}, r"file_id '\.\./\.\./\.\./etc/hostname' is not a positive integer"),
    ],
)
def test_hostile_dataset_description_names_no_path(
    raw: Path, monkeypatch: pytest.MonkeyPatch, fields: dict[str, str], message: str
) -> None:
    local = Path("/etc/hostname")
    arff_md5 = hashlib.md5(local.read_bytes()).hexdigest() if local.is_file() else "0" * 32
    hostile = mirror_files("openml_99_toy", ARFF, **fields)
    hostile["/openml_99_toy/dataset.json"] = dataset_doc(ARFF, **fields, md5_checksum=arff_md5)
    del hostile["/openml_99_toy/dataset.arff"]
    with DataServer(files={}) as api, DataServer(files=hostile) as mirror:
        monkeypatch.setattr(openml, "OPENML_DEFAULT_URL", api.url)  # the description's url counts for the API
        with pytest.raises(FetchError, match=message):
            fetch_source(openml_source(), raw, options(openml_url=api.url, mirror=mirror.url))
        assert not any(".." in path for path in api.requests + mirror.requests)
    assert not (raw / "openml_99_toy" / "dataset.arff").exists()
    assert not (raw / "openml_99_toy" / "dataset.json").exists()


@pytest.mark.parametrize("bad_id", ["4242abc", "٤٢٤٢", True, "-1", "1_000"])
def test_task_dataset_id_must_be_an_integer(raw: Path, bad_id: Any) -> None:
    files = api_files()
    files["/api/v1/json/task/99"] = task_doc(99, dataset_id=bad_id)
    with DataServer(files=files) as api:
        with pytest.raises(FetchError, match="data_set_id .* is not a positive integer id"):
            fetch_source(openml_source(), raw, options(openml_url=api.url))
        assert api.requests == ["/api/v1/json/task/99"]


# ----------------------------------------------------------------------------------------------
# tabrepro fetch --refresh starts over


def params_file(tmp_path: Path, **fetch_settings: Any) -> str:
    raw = repo_raw_params()
    raw["paths"] = {"data": str(tmp_path / "data"), "results": str(tmp_path / "results")}
    raw["fetch"].update(retries=0, backoff_seconds=0.01, timeout_seconds=5, **fetch_settings)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def test_refresh_deletes_files_hashes_and_record_then_fetches_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    params = params_file(tmp_path)
    directory = tmp_path / "data" / "raw" / CREDIT
    with DataServer(files=api_files(task_id=361055)) as api:
        monkeypatch.setenv("TABREPRO_OPENML_URL", api.url)
        assert main(["--params", params, "--quiet", "fetch", "--record", CREDIT]) == 0
        (directory / "notes.txt").write_text("mine")  # not the fetch's: kept
        assert main(["--params", params, "--quiet", "fetch", "--record", CREDIT]) == 0
        assert api.requested("data/v1/download/777") == 1  # present and verified: not fetched again
        assert main(["--params", params, "--quiet", "fetch", "--refresh", CREDIT]) == 0
        assert api.requested("data/v1/download/777") == 2
        assert api.requested("api/v1/json/task/361055") == 2
    err = capsys.readouterr().err
    assert f"removed {directory / 'fetch_status.json'}" in err and f"removed {directory / MANIFEST_NAME}" in err
    assert not (directory / "fetch_status.json").exists()  # no --record this time
    assert (directory / "notes.txt").read_text() == "mine"
    assert (directory / "dataset.arff").read_bytes() == ARFF


def test_cli_records_a_mirror_only_fetch_as_unverified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = params_file(tmp_path)
    monkeypatch.setenv("TABREPRO_OPENML_URL", f"http://127.0.0.1:{closed_port()}")
    with DataServer(files=mirror_files(CREDIT, ARFF, task_id=361055)) as mirror:
        assert main(["--params", params, "--quiet", "fetch", "--record", "--mirror", mirror.url, CREDIT]) == 0
    status = read_fetch_status(tmp_path / "data" / "raw", CREDIT)
    assert status is not None and status.ok and not status.verified


def test_cli_takes_the_deadline_from_params_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = repo_raw_params()
    raw["fetch"]["deadline_seconds"] = 0
    with pytest.raises(ParamsError, match=r"at fetch\.deadline_seconds"):
        validate_schema(raw)
    params = params_file(tmp_path, deadline_seconds=1)
    monkeypatch.setenv("TABREPRO_OPENML_URL", f"http://127.0.0.1:{closed_port()}")
    with DataServer(files=mirror_files(CREDIT, ARFF, task_id=361055)) as mirror:
        mirror.drip(f"{CREDIT}/task.json", seconds=0.05)
        assert main(["--params", params, "--quiet", "fetch", "--mirror", mirror.url, CREDIT]) == 2
    assert "not finished within 1 s (fetch.deadline_seconds)" in capsys.readouterr().err
    assert not (tmp_path / "data" / "raw" / CREDIT).exists()


@pytest.mark.parametrize("url", ["https:///etc/hostname", "https://user@example.org/toy.csv", "file:///etc/hostname"])
def test_registry_url_names_a_web_host(url: str) -> None:
    with pytest.raises(RegistryError, match="must be http\\(s\\) with a host"):
        toy_source(url)
