"""The real dataset files (offline copies in ../shared/datasets) through the real fetch and parse code.

Every file listed in the folder's SHA256SUMS is served from a local 127.0.0.1 server, fetched with
the registry's expectations (checksum verified), and parsed to the registry's expected shape.
When only part of a dataset is there (poker's 1,000,000-row test file is not), the entry is
reduced to the files present and the expected rows become the sum of their per-file `rows`.

bank.csv is the 10% sample of the Bank Marketing data; the registry's source is bank.zip with
member bank-full.csv (45,211 rows), which is not in the folder. The sample has the same columns and
format, so it is checked with the bank_marketing entry's own parse options against its documented
shape (README: 4,521 x 17, i.e. 16 features + target) and the checksum SHA256SUMS gives it.

Without the folder (or $TABREPRO_SHARED_DATASETS) every test here is skipped, saying so.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import SHARED_DATASETS as SHARED
from data_server import DataServer
from tabrepro.data.fetch import MANIFEST_NAME, ChecksumMismatchError, FetchOptions, fetch_source
from tabrepro.data.parse import parse_source
from tabrepro.data.registry import DatasetSource, Expected, RemoteFile, get_source, load_registry

pytestmark = pytest.mark.skipif(
    SHARED is None,
    reason="offline dataset copies not found (../shared/datasets or $TABREPRO_SHARED_DATASETS); "
    "real-file fetch/parse tests skipped",
)

BANK_SAMPLE = {"bank_marketing/bank.csv": 4521, "bank_marketing/bank-names.txt": None}  # path -> rows


def read_sums() -> dict[str, str]:
    """SHA256SUMS as {relative path: sha256}."""
    if SHARED is None:
        return {}
    sums: dict[str, str] = {}
    for line in (SHARED / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            digest, path = line.split(maxsplit=1)
            sums[path.strip().removeprefix("./")] = digest
    return sums


SUMS = read_sums()


def shared_entries() -> list[str]:
    """Registry entries with at least one data/test file among the shared copies."""
    return sorted(n for n, s in load_registry().items() if any(f.mirror_path in SUMS for f in s.table_files))


def available_part(source: DatasetSource) -> DatasetSource:
    """The entry reduced to the shared files, fetched only through the mirror (no internet)."""
    files = tuple(dataclasses.replace(f, url=None) for f in source.files if f.mirror_path in SUMS)
    table_files = [f for f in files if f.role in ("data", "test")]
    complete = len(table_files) == len(source.table_files)
    rows = source.expected.rows if complete else sum(f.rows or 0 for f in table_files)
    return dataclasses.replace(
        source,
        files=files,
        expected=Expected(rows, source.expected.features),
        fixed_test_tail_rows=source.fixed_test_tail_rows if complete else 0,
    )


def fetch_and_parse(source: DatasetSource, raw: Path, server: DataServer) -> tuple[list[Path], object]:
    paths = fetch_source(source, raw, FetchOptions(mirror=server.url, retries=0, timeout_seconds=30, progress=False))
    return paths, parse_source(source, raw)


def assert_manifest_matches_sums(source: DatasetSource, raw: Path) -> None:
    recorded = dict(
        (name, digest)
        for digest, name in (
            line.split("  ", 1) for line in (raw / source.name / MANIFEST_NAME).read_text().splitlines()
        )
    )
    for remote in source.files:
        assert recorded[remote.name] == SUMS[remote.mirror_path], remote.name


def test_every_shared_file_is_accounted_for() -> None:
    mirror_paths = {f.mirror_path for s in load_registry().values() for f in s.files}
    unaccounted = sorted(p for p in SUMS if p not in mirror_paths and p not in BANK_SAMPLE)
    assert not unaccounted, f"shared files the registry does not know: {unaccounted}"


def test_registry_checksums_accept_the_shared_copies() -> None:
    for source in load_registry().values():
        for remote in source.files:
            if remote.mirror_path in SUMS:
                assert SUMS[remote.mirror_path] in remote.accepted_sha256, (source.name, remote.name)


@pytest.mark.parametrize("name", shared_entries())
def test_real_files_fetch_and_parse_to_expected_shape(
    name: str, shared_data_server: DataServer, tmp_path: Path
) -> None:
    source = available_part(get_source(name))
    paths, table = fetch_and_parse(source, tmp_path, shared_data_server)
    assert sorted(p.name for p in paths) == sorted(f.name for f in source.files)
    assert_manifest_matches_sums(source, tmp_path)
    expected_rows, features = source.expected.rows, source.expected.features
    assert expected_rows is not None and features is not None
    assert table.frame.shape == (expected_rows, features + 1)  # type: ignore[attr-defined]
    test_rows = sum(f.rows or 0 for f in source.files if f.role == "test") or source.fixed_test_tail_rows
    assert table.schema.n_fixed_test_rows == test_rows  # type: ignore[attr-defined]
    assert table.frame.columns[-1] == table.schema.target  # type: ignore[attr-defined]
    assert_no_feature_is_the_target(table)


def assert_no_feature_is_the_target(table) -> None:
    """The label is never an input: not by name, and no feature is a relabelling of it (one
    BiSHop run fed Spambase's label in as a feature)."""
    schema, frame = table.schema, table.frame
    names = [c.name for c in schema.features]
    assert schema.target not in names
    target_codes = pd.factorize(frame[schema.target])[0]
    for name in names:
        assert not np.array_equal(pd.factorize(frame[name])[0], target_codes), f"feature {name!r} copies the target"


def test_bank_sample_parses_with_bank_full_options(shared_data_server: DataServer, tmp_path: Path) -> None:
    bank = get_source("bank_marketing")
    files = tuple(
        RemoteFile(
            name=Path(path).name,
            url=None,
            mirror_path=path,
            sha256=SUMS[path],
            role="data" if rows else "doc",
            rows=rows,
        )
        for path, rows in BANK_SAMPLE.items()
    )
    sample = dataclasses.replace(bank, files=files, expected=Expected(4521, bank.expected.features))
    _, table = fetch_and_parse(sample, tmp_path, shared_data_server)
    assert_manifest_matches_sums(sample, tmp_path)
    assert table.frame.shape == (4521, 17)  # type: ignore[attr-defined]
    assert table.schema.target_column.levels == ["no", "yes"]  # type: ignore[attr-defined]
    kinds = {c.name: c.kind for c in table.schema.columns}  # type: ignore[attr-defined]
    assert [n for n, k in kinds.items() if k == "categorical"] == [*bank.categorical, "y"]  # type: ignore[misc]


def test_shared_copy_with_wrong_bytes_is_refused(tmp_path: Path) -> None:
    """A damaged mirror copy of a real file fails verification and leaves nothing behind."""
    assert SHARED is not None
    source = available_part(get_source("breast_cancer"))
    mirror = tmp_path / "mirror"
    (mirror / "breast_cancer_wdbc").mkdir(parents=True)
    real = (SHARED / "breast_cancer_wdbc" / "wdbc.data").read_bytes()
    (mirror / "breast_cancer_wdbc" / "wdbc.data").write_bytes(real.replace(b"M", b"B", 1))
    (mirror / "breast_cancer_wdbc" / "wdbc.names").write_bytes(
        (SHARED / "breast_cancer_wdbc" / "wdbc.names").read_bytes()
    )
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(ChecksumMismatchError, match=r"wdbc.data.*expected sha256 d606af41"):
        fetch_source(source, raw, FetchOptions(mirror=str(mirror), retries=0, progress=False))
    assert list(raw.iterdir()) == []
