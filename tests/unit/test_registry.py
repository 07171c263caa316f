"""The dataset registry: complete for params.yaml, internally consistent, strict about mistakes."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from conftest import REPO
from tabrepro.config import read_params_file
from tabrepro.data.registry import (
    DatasetSource,
    RegistryError,
    UnknownDatasetError,
    get_source,
    load_registry,
    safe_relative_path,
    source_from_dict,
)


def _params_sources() -> set[str]:
    """Sources the papers name, the stand-ins a profile substitutes for them, and the alternatives
    their entries name."""
    params = read_params_file(REPO / "params.yaml")
    named = {d["source"] for paper in params["papers"].values() for d in paper["datasets"].values()}
    substitutes = {
        o["source"]
        for profile in params["profiles"].values()
        for paper in (profile.get("dataset_overrides") or {}).values()
        for o in paper.values()
    }
    alternatives = {load_registry()[n].alternative for n in named if n in load_registry()} - {None}
    return named | substitutes | alternatives


def _good_entry() -> dict[str, Any]:
    return {
        "task": "binary",
        "source": "url",
        "files": [
            {"name": "toy.csv", "url": "https://example.org/toy.csv", "mirror_path": "toy/toy.csv", "sha256": "0" * 64}
        ],
        "format": {"kind": "csv", "header": "none", "columns": ["id", "a", "label"]},
        "target": "label",
        "drop": ["id"],
        "categorical": [],
    }


def test_every_params_source_is_registered() -> None:
    registry = load_registry()
    missing = sorted(_params_sources() - set(registry))
    assert not missing, f"params.yaml names sources the registry lacks: {missing}"


def test_registry_has_no_unused_entries() -> None:
    assert set(load_registry()) == _params_sources()


def test_load_registry_returns_a_copy() -> None:
    first = load_registry()
    first.pop("boston")
    assert "boston" in load_registry()


@pytest.mark.parametrize("name", sorted(load_registry()))
def test_entry_is_consistent(name: str) -> None:
    source = load_registry()[name]
    assert isinstance(source, DatasetSource) and source.name == name
    for remote in source.files:
        assert safe_relative_path(remote.mirror_path)
        assert remote.url is None or remote.url.startswith("https://")
        if remote.url is None:
            assert source.note and "mirror" in source.note, "a file without URL must say how to get it"
    if source.kind == "url" and all(f.rows for f in source.table_files) and source.expected.rows:
        assert sum(f.rows or 0 for f in source.table_files) == source.expected.rows


def test_declared_columns_match_expected_feature_count() -> None:
    checked = 0
    for source in load_registry().values():
        if source.format.columns is None or source.expected.features is None:
            continue  # names come from the file's header or the ARFF
        features = [c for c in source.format.columns if c != source.target and c not in source.drop]
        assert len(features) == source.expected.features, source.name
        checked += 1
    assert checked >= 10


def test_uci_files_use_the_canonical_archive() -> None:
    for source in load_registry().values():
        for remote in source.files:
            if remote.url and "uci.edu" in remote.url:
                assert remote.url.startswith("https://archive.ics.uci.edu/ml/machine-learning-databases/")


def test_openml_entries_match_their_names() -> None:
    for name, source in load_registry().items():
        match = re.match(r"^openml_(\d+)_", name)
        if match:
            assert source.kind == "openml_task" and source.openml is not None
            assert source.openml.task_id == int(match.group(1))
            assert source.target is None and source.format.kind == "arff"


def test_fixed_test_sets_are_recorded() -> None:
    registry = load_registry()
    assert registry["higgs"].fixed_test_tail_rows == 500_000
    for name in ("poker_hand", "census_income_kdd", "adult"):
        assert registry[name].has_official_test, name
    assert not registry["adult_train"].has_official_test
    assert registry["breast_cancer"].embedded == "sklearn_breast_cancer"
    bank = registry["bank_marketing"].files[0]
    assert bank.name == "bank.zip" and bank.member == "bank-full.csv"


def test_unknown_dataset_error_names_the_input_and_close_matches() -> None:
    with pytest.raises(UnknownDatasetError) as info:
        get_source("brest_cancer")
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "\n" not in message
    assert "'brest_cancer'" in message and "did you mean breast_cancer" in message
    assert "known datasets:" in message and "higgs" in message


def test_unknown_dataset_without_close_match_lists_known_names() -> None:
    with pytest.raises(UnknownDatasetError, match=r"unknown dataset 'zzz': known datasets: adult"):
        get_source("zzz")


def test_good_entry_validates() -> None:
    source = source_from_dict("toy", _good_entry())
    assert source.files[0].parsed_name == "toy.csv"
    assert source.format.na_values == ("",)


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    entry = copy.deepcopy(_good_entry())
    node: Any = entry
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return entry


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["tsk"], "binary", "unknown field"),
        (["task"], "ranking", "task is 'ranking'"),
        (["source"], "ftp", "source is 'ftp'"),
        (["files", 0, "sha256"], "XYZ", "not a lowercase hex digest"),
        (["files", 0, "mirror_path"], "../toy.csv", "mirror_path"),
        (["files", 0, "mirror_path"], "/abs/toy.csv", "mirror_path"),
        (["files", 0, "member"], "x.csv", "only allowed for .zip"),
        (["files", 0, "url"], "ftp://example.org/x", "must be http"),
        (["target"], _DELETE, "target is required"),
        (["drop"], ["nope"], "not in format.columns"),
        (["categorical"], "some", "must be a list"),
        (["format", "kind"], "parquet", "format.kind"),
        (["format", "columns"], _DELETE, "needs format.columns"),
        (["files"], [], "needs at least one data file"),
    ],
)
def test_malformed_entries_are_refused(path: list[Any], value: Any, message: str) -> None:
    with pytest.raises(RegistryError, match=re.escape(message)) as info:
        source_from_dict("toy", _broken(path, value))
    assert "'toy'" in str(info.value)


def test_zip_member_traversal_is_refused() -> None:
    entry = _good_entry()
    entry["files"][0].update(name="toy.zip", member="../../etc/passwd")
    with pytest.raises(RegistryError, match="member"):
        source_from_dict("toy", entry)


def test_categorical_and_continuous_are_exclusive() -> None:
    entry = {**_good_entry(), "continuous": ["a"]}
    with pytest.raises(RegistryError, match="either categorical or continuous"):
        source_from_dict("toy", entry)


def test_openml_entries_need_ids() -> None:
    with pytest.raises(RegistryError, match="openml.task_id"):
        source_from_dict("t", {"task": "binary", "source": "openml_task", "openml": {}})
    with pytest.raises(RegistryError, match="needs an openml"):
        source_from_dict("t", {"task": "binary", "source": "openml_dataset", "target": "y"})


@pytest.mark.parametrize("path", ["a/b.csv", "b.csv"])
def test_safe_paths(path: str) -> None:
    assert safe_relative_path(path)


@pytest.mark.parametrize("path", ["", "/x", "../x", "a/../b", "a\\b", "C:/x", "./x"])
def test_unsafe_paths(path: str) -> None:
    assert not safe_relative_path(path)
