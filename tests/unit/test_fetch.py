"""Fetching against a local misbehaving server: verified, atomic, retried, mirror first."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from data_server import DataServer, bypass_proxies
from tabrepro.data import download
from tabrepro.data.fetch import (
    MANIFEST_NAME,
    ChecksumMismatchError,
    FetchError,
    FetchOptions,
    NotFoundError,
    TruncatedDownloadError,
    UnsafeArchiveError,
    extract_member,
    fetch_dataset,
    fetch_source,
)
from tabrepro.data.parse import parse_source
from tabrepro.data.registry import DatasetSource, UnknownDatasetError, source_from_dict

TOY = b"a,b,label\r\n1,x,yes\r\n2,y,no\r\n3,x,yes\r\n4,,no\r\n"
TOY_SHA = hashlib.sha256(TOY).hexdigest()


@pytest.fixture(autouse=True)
def _direct_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    bypass_proxies(monkeypatch)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    root = tmp_path / "remote"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "toy.csv").write_bytes(TOY)
    return root


@pytest.fixture
def server(remote: Path, data_server) -> DataServer:
    return data_server(remote)


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    path = tmp_path / "raw"
    path.mkdir()
    return path


def toy_source(
    url: str | None,
    *,
    sha256: str | None = TOY_SHA,
    name: str = "toy",
    file_name: str = "toy.csv",
    member: str | None = None,
    mirror_path: str = "toy/toy.csv",
    note: str | None = None,
) -> DatasetSource:
    remote_file: dict[str, Any] = {"name": file_name, "url": url, "mirror_path": mirror_path, "sha256": sha256}
    if member:
        remote_file["member"] = member
    return source_from_dict(
        name,
        {
            "task": "binary",
            "source": "url",
            "files": [remote_file],
            "format": {"kind": "csv", "header": "infer"},
            "target": "label",
            "categorical": ["b"],
            "expected": {"rows": 4, "features": 2},
            "note": note,
        },
    )


def options(**overrides: Any) -> FetchOptions:
    base: dict[str, Any] = {"retries": 2, "backoff_seconds": 0.01, "timeout_seconds": 5, "progress": False}
    return FetchOptions(**{**base, **overrides})


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ----------------------------------------------------------------------------------------------
# the good path


def test_good_file_is_fetched_verified_and_parsed(server: DataServer, raw: Path) -> None:
    source = toy_source(server.url_for("toy/toy.csv"))
    paths = fetch_source(source, raw, options())
    assert paths == [raw / "toy" / "toy.csv"]
    assert paths[0].read_bytes() == TOY
    assert tree(raw) == ["toy", f"toy/{MANIFEST_NAME}", "toy/toy.csv"]
    assert (raw / "toy" / MANIFEST_NAME).read_text() == f"{TOY_SHA}  toy.csv\n"
    table = parse_source(source, raw)
    assert table.frame.shape == (4, 3)
    assert list(table.frame.columns) == ["a", "b", "label"]
    assert table.schema.target_column.levels == ["no", "yes"]
    assert table.frame["b"].isna().sum() == 1


def test_present_verified_file_is_not_downloaded_again(server: DataServer, raw: Path) -> None:
    source = toy_source(server.url_for("toy/toy.csv"))
    fetch_source(source, raw, options())
    fetch_source(source, raw, options())
    assert server.requested("toy/toy.csv") == 1


def test_present_damaged_file_is_replaced(server: DataServer, raw: Path) -> None:
    source = toy_source(server.url_for("toy/toy.csv"))
    (raw / "toy").mkdir()
    (raw / "toy" / "toy.csv").write_bytes(b"damaged")
    fetch_source(source, raw, options())
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY
    assert server.requested("toy/toy.csv") == 1


def test_unpinned_file_is_recorded_then_reverified(server: DataServer, raw: Path) -> None:
    source = toy_source(server.url_for("toy/toy.csv"), sha256=None)
    fetch_source(source, raw, options())
    assert TOY_SHA in (raw / "toy" / MANIFEST_NAME).read_text()
    (raw / "toy" / "toy.csv").write_bytes(TOY.replace(b"yes", b"yep"))
    fetch_source(source, raw, options())  # the recorded hash no longer matches: fetched again
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY
    assert server.requested("toy/toy.csv") == 2


# ----------------------------------------------------------------------------------------------
# refused downloads leave nothing behind


def test_truncated_download_is_refused(server: DataServer, raw: Path) -> None:
    server.truncate("toy/toy.csv", keep_bytes=10)
    url = server.url_for("toy/toy.csv")
    with pytest.raises(TruncatedDownloadError) as info:
        fetch_source(toy_source(url), raw, options(retries=1))
    message = str(info.value)
    assert "toy.csv" in message and url in message
    assert f"expected {len(TOY)} bytes, got 10" in message
    assert tree(raw) == []
    assert server.requested("toy/toy.csv") == 2  # a cut connection is worth one retry


def test_wrong_checksum_is_refused(server: DataServer, raw: Path) -> None:
    server.corrupt("toy/toy.csv")
    with pytest.raises(ChecksumMismatchError) as info:
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options())
    message = str(info.value)
    assert "file toy.csv" in message and "'toy'" in message
    assert f"expected sha256 {TOY_SHA}" in message and "got " in message
    assert tree(raw) == []
    assert server.requested("toy/toy.csv") == 1  # wrong bytes are not retried


def test_not_found_fails_at_once_with_url(server: DataServer, raw: Path) -> None:
    url = server.url_for("toy/missing.csv")
    with pytest.raises(NotFoundError) as info:
        fetch_source(toy_source(url), raw, options(retries=3, backoff_seconds=5))
    message = str(info.value)
    assert url in message and "dataset 'toy'" in message and "HTTP 404" in message
    assert server.requested("toy/missing.csv") == 1
    assert tree(raw) == []


def test_existing_empty_dataset_dir_is_kept_empty(server: DataServer, raw: Path) -> None:
    (raw / "toy").mkdir()
    server.corrupt("toy/toy.csv")
    with pytest.raises(ChecksumMismatchError):
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options())
    assert tree(raw) == ["toy"]


def test_keyboard_interrupt_leaves_no_partial_file(
    server: DataServer, raw: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_read = download._read_chunk
    calls = {"n": 0}

    def interrupted(*args: Any) -> bytes:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real_read(*args)

    monkeypatch.setattr(download, "CHUNK_SIZE", 8)
    monkeypatch.setattr(download, "_read_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options())
    assert tree(raw) == []


# ----------------------------------------------------------------------------------------------
# retries


def test_retry_after_server_errors_succeeds(server: DataServer, raw: Path) -> None:
    server.fail_then_ok("toy/toy.csv", failures=2, status=500)
    fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(retries=2))
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY
    assert server.requested("toy/toy.csv") == 3


def test_persistent_server_errors_give_up(server: DataServer, raw: Path) -> None:
    server.fail_then_ok("toy/toy.csv", failures=99, status=503)
    with pytest.raises(FetchError, match=r"HTTP 503 .*gave up after 3 attempt\(s\)"):
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(retries=2))
    assert server.requested("toy/toy.csv") == 3
    assert tree(raw) == []


def test_slow_server_times_out_and_is_retried(server: DataServer, raw: Path) -> None:
    server.slow("toy/toy.csv", seconds=1.0)
    started = time.monotonic()
    with pytest.raises(FetchError, match="gave up after 2 attempt"):
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(retries=1, timeout_seconds=0.2))
    assert time.monotonic() - started < 3
    assert server.requested("toy/toy.csv") == 2
    assert tree(raw) == []


def test_stall_in_the_middle_of_the_body_times_out(server: DataServer, raw: Path) -> None:
    server.stall("toy/toy.csv", seconds=1.0)
    with pytest.raises(FetchError, match="failed after"):
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(retries=0, timeout_seconds=0.2))
    assert tree(raw) == []


def test_client_errors_are_not_retried(server: DataServer, raw: Path) -> None:
    server.fail_then_ok("toy/toy.csv", failures=99, status=403)
    with pytest.raises(FetchError, match="HTTP 403"):
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(retries=3))
    assert server.requested("toy/toy.csv") == 1


# ----------------------------------------------------------------------------------------------
# mirrors


def test_url_mirror_is_tried_first(remote: Path, raw: Path) -> None:
    with DataServer(remote) as mirror, DataServer(remote) as canonical:
        source = toy_source(canonical.url_for("toy/toy.csv"))
        fetch_source(source, raw, options(mirror=mirror.url + "/"))
    assert mirror.requests == ["/toy/toy.csv"]
    assert canonical.requests == []


def test_url_mirror_without_the_file_falls_back_to_canonical(remote: Path, raw: Path) -> None:
    with DataServer(files={}) as mirror, DataServer(remote) as canonical:
        source = toy_source(canonical.url_for("toy/toy.csv"))
        fetch_source(source, raw, options(mirror=mirror.url))
        assert mirror.requests == ["/toy/toy.csv"] and canonical.requests == ["/toy/toy.csv"]
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY


def test_directory_mirror_is_tried_first(server: DataServer, remote: Path, raw: Path) -> None:
    fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(mirror=str(remote)))
    assert server.requests == []
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY


def test_stale_directory_mirror_falls_back_to_canonical(server: DataServer, tmp_path: Path, raw: Path) -> None:
    stale = tmp_path / "stale"
    (stale / "toy").mkdir(parents=True)
    (stale / "toy" / "toy.csv").write_bytes(b"old copy")
    fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(mirror=f"file://{stale}"))
    assert server.requests == ["/toy/toy.csv"]
    assert (raw / "toy" / "toy.csv").read_bytes() == TOY


def test_every_source_failing_names_all_of_them(server: DataServer, tmp_path: Path, raw: Path) -> None:
    server.corrupt("toy/toy.csv")
    with pytest.raises(ChecksumMismatchError) as info:
        fetch_source(toy_source(server.url_for("toy/toy.csv")), raw, options(mirror=str(tmp_path / "empty")))
    message = str(info.value)
    assert "checksum mismatch" in message and "not found in mirror" in message
    assert tree(raw) == []


def test_file_without_url_needs_a_mirror(raw: Path) -> None:
    source = toy_source(None, note="download it by hand and use a mirror")
    with pytest.raises(FetchError, match=r"no public download URL.*mirror that holds toy/toy.csv"):
        fetch_source(source, raw, options())
    assert tree(raw) == []


# ----------------------------------------------------------------------------------------------
# zip archives


def _zip(entries: dict[str, bytes], *, link: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def test_zip_member_is_extracted_alone(raw: Path) -> None:
    archive = _zip({"toy.csv": TOY, "other.csv": b"x", "../evil.csv": b"evil"})
    with DataServer(files={"/toy/toy.zip": archive}) as srv:
        source = toy_source(
            srv.url_for("toy/toy.zip"),
            sha256=hashlib.sha256(archive).hexdigest(),
            file_name="toy.zip",
            member="toy.csv",
            mirror_path="toy/toy.zip",
        )
        paths = fetch_source(source, raw, options())
    assert paths == [raw / "toy" / "toy.zip", raw / "toy" / "toy.csv"]
    assert tree(raw) == ["toy", f"toy/{MANIFEST_NAME}", "toy/toy.csv", "toy/toy.zip"]
    assert parse_source(source, raw).frame.shape == (4, 3)


@pytest.mark.parametrize("member", ["../evil.csv", "/tmp/evil.csv", "a/../../evil.csv"])
def test_zip_traversal_is_rejected(tmp_path: Path, member: str) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(_zip({member: b"evil", "ok.csv": b"ok"}))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(UnsafeArchiveError, match="refusing member"):
        extract_member(archive, member, dest)
    assert tree(dest) == []
    assert not (tmp_path / "evil.csv").exists()


def test_zip_link_member_is_rejected(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(_zip({}, link="link.csv"))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(UnsafeArchiveError, match="directory or link"):
        extract_member(archive, "link.csv", dest)
    assert tree(dest) == []


def test_zip_missing_member_lists_contents(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(_zip({"ok.csv": b"ok"}))
    with pytest.raises(FetchError, match=r"no member 'x.csv' \(it holds: ok.csv\)"):
        extract_member(archive, "x.csv", tmp_path)


# ----------------------------------------------------------------------------------------------
# OpenML


TOY_ARFF = b"""% fabricated for tests
@RELATION toy
@ATTRIBUTE row_id NUMERIC
@ATTRIBUTE colour {red,green,blue}
@ATTRIBUTE size REAL
@ATTRIBUTE leak REAL
@ATTRIBUTE y {no,yes}
@DATA
1,red,1.5,0,yes
2,green,?,0,no
3,?,2.5,1,yes
4,blue,0.5,1,no
"""


def openml_files(
    task_id: int,
    dataset_id: int = 4242,
    file_id: int = 777,
    *,
    task_type: str = "Supervised Classification",
    md5: str | None = None,
) -> dict[str, bytes]:
    task = {
        "task": {
            "task_id": str(task_id),
            "task_type": task_type,
            "input": [
                {"name": "source_data", "data_set": {"data_set_id": str(dataset_id), "target_feature": "y"}},
                {"name": "estimation_procedure", "estimation_procedure": {"type": "crossvalidation"}},
            ],
        }
    }
    data = {
        "data_set_description": {
            "id": str(dataset_id),
            "name": "toy",
            "format": "ARFF",
            "file_id": str(file_id),
            "md5_checksum": md5 or hashlib.md5(TOY_ARFF).hexdigest(),
            "url": f"https://api.openml.invalid/data/v1/download/{file_id}/toy.arff",
            "default_target_attribute": "colour",
            "row_id_attribute": "row_id",
            "ignore_attribute": ["leak"],
        }
    }
    return {
        f"/api/v1/json/task/{task_id}": json.dumps(task).encode(),
        f"/api/v1/json/data/{dataset_id}": json.dumps(data).encode(),
        f"/data/v1/download/{file_id}": TOY_ARFF,
    }


def openml_source(task: str = "binary", name: str = "openml_99_toy") -> DatasetSource:
    return source_from_dict(name, {"task": task, "source": "openml_task", "openml": {"task_id": 99}})


def test_openml_task_is_resolved_fetched_and_parsed(raw: Path) -> None:
    with DataServer(files=openml_files(99)) as api:
        paths = fetch_source(openml_source(), raw, options(openml_url=api.url))
        assert api.requests == ["/api/v1/json/task/99", "/api/v1/json/data/4242", "/data/v1/download/777"]
    names = [p.name for p in paths]
    assert names == ["task.json", "dataset.json", "dataset.arff"]
    table = parse_source(openml_source(), raw)
    assert list(table.frame.columns) == ["colour", "size", "y"]  # row id and ignored column dropped
    assert table.schema.target == "y"  # the task's target, not the dataset's default
    assert [c.kind for c in table.schema.columns] == ["categorical", "continuous", "categorical"]
    assert table.schema.columns[0].levels == ["blue", "green", "red"]
    assert table.frame["colour"].isna().sum() == 1 and table.frame["size"].isna().sum() == 1


def test_openml_md5_mismatch_is_refused(raw: Path) -> None:
    with DataServer(files=openml_files(99, md5="0" * 32)) as api:
        with pytest.raises(ChecksumMismatchError, match=r"dataset.arff.*expected md5 0{32}, got [0-9a-f]{32}"):
            fetch_source(openml_source(), raw, options(openml_url=api.url))
    assert not (raw / "openml_99_toy" / "dataset.arff").exists()
    assert not list((raw / "openml_99_toy").glob(".*part"))


def test_openml_task_type_must_match_registry(raw: Path) -> None:
    with DataServer(files=openml_files(99, task_type="Supervised Regression")) as api:
        with pytest.raises(FetchError, match="registry says binary but the OpenML task is Supervised Regression"):
            fetch_source(openml_source(), raw, options(openml_url=api.url))
    assert tree(raw) == []


def test_openml_api_url_comes_from_environment(raw: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with DataServer(files=openml_files(361055)) as api:
        monkeypatch.setenv("TABREPRO_OPENML_URL", api.url)
        paths = fetch_dataset("openml_361055_credit", raw, retries=0, progress=False)
    assert [p.name for p in paths] == ["task.json", "dataset.json", "dataset.arff"]
    assert all(p.parent == raw / "openml_361055_credit" for p in paths)


def test_unknown_dataset_is_refused_before_any_download(raw: Path) -> None:
    with pytest.raises(UnknownDatasetError, match="'higs'.*did you mean higgs"):
        fetch_dataset("higs", raw)
    assert tree(raw) == []


def test_missing_mirror_copy_does_not_hide_a_network_failure(tmp_path: Path, raw: Path) -> None:
    with DataServer(files={}) as canonical:
        canonical.fail_then_ok("toy/toy.csv", failures=99, status=502)
        with pytest.raises(FetchError) as info:
            fetch_source(
                toy_source(canonical.url_for("toy/toy.csv")), raw, options(mirror=str(tmp_path / "empty"), retries=0)
            )
    assert type(info.value) is FetchError
    assert str(info.value).startswith("dataset 'toy', file toy.csv: HTTP 502")
    assert "not found in mirror" in str(info.value)


def test_failing_local_file_without_source_is_kept_and_reported(raw: Path) -> None:
    (raw / "toy").mkdir()
    (raw / "toy" / "toy.csv").write_bytes(b"someone's own copy")
    with pytest.raises(FetchError, match=r"toy.csv fails verification and there is no public download URL"):
        fetch_source(toy_source(None, note="use a mirror"), raw, options())
    assert (raw / "toy" / "toy.csv").read_bytes() == b"someone's own copy"
