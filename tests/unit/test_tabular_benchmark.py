"""BiSHop's Datasets II from Grinsztajn et al.'s own CSVs: every entry complete, each shared copy
fetched and prepared through the command line to the shape the shared README gives, a damaged copy
refused, and the categorical columns of the mixed-type files declared with their source.

The README of ../shared/datasets has a table of the 15 files at hand (task id, OpenML dataset id,
file, rows, columns with the target, target); the tests read it rather than repeat its numbers.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from conftest import SHARED_DATASETS as SHARED
from data_server import DataServer
from tabrepro.cli import main
from tabrepro.config import read_params_file
from tabrepro.data.fetch import ChecksumMismatchError, FetchOptions, fetch_source
from tabrepro.data.parse import parse_source
from tabrepro.data.registry import (
    RegistryError,
    check_alternatives,
    get_source,
    load_registry,
    source_from_dict,
    sources_from_mapping,
)
from tabrepro.data.table import load_table

PREFIX = "tabular_benchmark_"
HF = "https://huggingface.co/datasets/inria-soda/tabular-benchmark/resolve/main/"


def benchmark_entries() -> dict:
    return {n: s for n, s in load_registry().items() if n.startswith(PREFIX)}


def readme_rows() -> dict[str, dict]:
    """The README's table of benchmark files, by mirror path."""
    if SHARED is None:
        return {}
    rows = {}
    pattern = re.compile(r"^\| (\d{6}) \| (\d+) \| (\S+\.csv) \| ([\d,]+) \| (\d+) \| (\S+) \|$")
    for line in (SHARED / "README.md").read_text(encoding="utf-8").splitlines():
        match = pattern.match(line.strip())
        if match:
            task, did, path, n_rows, n_cols, target = match.groups()
            rows[f"tabular_benchmark/{path}"] = {
                "task": int(task),
                "dataset": int(did),
                "rows": int(n_rows.replace(",", "")),
                "columns": int(n_cols),
                "target": target,
            }
    return rows


README = readme_rows()
needs_shared = pytest.mark.skipif(SHARED is None, reason="offline dataset copies (../shared/datasets) not found")


def entry_for(mirror_path: str) -> str:
    return next(n for n, s in benchmark_entries().items() if s.files[0].mirror_path == mirror_path)


def test_every_datasets_ii_task_has_a_complete_benchmark_entry() -> None:
    params = read_params_file(REPO / "params.yaml")
    group_ii = {k: d for k, d in params["papers"]["bishop"]["datasets"].items() if d.get("group") == "ii"}
    assert len(group_ii) == 19
    registry = load_registry()
    for dataset in group_ii.values():
        source = registry[dataset["source"]]
        assert source.name.startswith(PREFIX), "the benchmark CSV is the paper's default source"
        (remote,) = source.files
        assert remote.url == HF + remote.mirror_path.removeprefix("tabular_benchmark/")
        assert remote.mirror_path.startswith("tabular_benchmark/") and remote.rows == source.expected.rows
        assert source.expected.features and source.target
        alternative = registry[source.alternative]
        assert alternative.kind == "openml_task" and alternative.alternative == source.name
        assert str(alternative.openml.task_id) in source.name


@needs_shared
def test_checksums_are_pinned_exactly_where_a_copy_is_at_hand() -> None:
    sums = {}
    for line in (SHARED / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split(maxsplit=1)
        sums[path.removeprefix("./")] = digest
    assert len(README) == 15
    for source in benchmark_entries().values():
        (remote,) = source.files
        assert remote.sha256 == sums.get(remote.mirror_path), source.name


@needs_shared
def test_entries_agree_with_the_readme() -> None:
    for path, row in README.items():
        source = get_source(entry_for(path))
        assert (source.expected.rows, source.expected.features + 1) == (row["rows"], row["columns"]), path
        assert source.target == row["target"] and f"task {row['task']}, dataset {row['dataset']}" in source.title
        assert source.task == ("binary" if path.split("/")[1].startswith("clf") else "regression")


@needs_shared
@pytest.mark.parametrize("path", sorted(README))
def test_fetch_and_prepare_give_the_readme_shape(
    path: str, shared_data_server: DataServer, tmp_path: Path, monkeypatch, capsys
) -> None:
    """`tabrepro fetch` through a local mirror verifies the pinned sha256, names the source it
    used, and `tabrepro prepare` gives the README's rows and columns."""
    name = entry_for(path)
    monkeypatch.setenv("TABREPRO_DATA_DIR", str(tmp_path))
    params = ["--params", str(REPO / "params.yaml")]
    assert main(["fetch", name, "--mirror", shared_data_server.url, "--quiet", *params]) == 0
    err = capsys.readouterr().err
    assert f"{name}: files from huggingface.co (alternative source: openml_" in err and "unverified" not in err
    assert main(["prepare", name, *params]) == 0
    schema = load_table(tmp_path / "processed" / name).schema
    assert (schema.n_rows, len(schema.features) + 1) == (README[path]["rows"], README[path]["columns"])
    assert schema.target == README[path]["target"]


@needs_shared
def test_a_damaged_benchmark_copy_is_refused(tmp_path: Path) -> None:
    """Wrong bytes under the right name fail verification and leave nothing behind."""
    source = get_source(entry_for("tabular_benchmark/clf_cat/compas-two-years.csv"))
    (remote,) = source.files
    real = (SHARED / remote.mirror_path).read_bytes()
    mirror = tmp_path / "mirror"
    (mirror / remote.mirror_path).parent.mkdir(parents=True)
    (mirror / remote.mirror_path).write_bytes(real.replace(b"\n1,", b"\n0,", 1))
    offline = dataclasses.replace(source, files=(dataclasses.replace(remote, url=None),))
    raw = tmp_path / "raw"
    with pytest.raises(ChecksumMismatchError):
        fetch_source(offline, raw, FetchOptions(mirror=str(mirror), retries=0, progress=False))
    assert not (raw / source.name).exists() or not any((raw / source.name).iterdir())


def test_mixed_type_entries_declare_categorical_columns_with_their_source() -> None:
    cat_entries = [s for s in benchmark_entries().values() if "_cat/" in s.files[0].mirror_path]
    assert len(cat_entries) == 8
    for source in cat_entries:
        declared = isinstance(source.categorical, tuple) and source.categorical
        assert declared or source.categorical_max_levels, source.name
        assert source.note and "preprocessing.py" in source.note and "Table A.2" in source.note, source.name
    for source in benchmark_entries().values():
        if "_num/" in source.files[0].mirror_path:
            assert source.categorical == (), f"{source.name}: numerical suites have no categorical feature"


@needs_shared
@pytest.mark.parametrize(
    "path", sorted(p for p in README if "_cat/" in p and isinstance(get_source(entry_for(p)).categorical, tuple))
)
def test_the_level_rule_gives_the_declared_categorical_columns(path: str, tmp_path: Path) -> None:
    """The rule the entries without a copy use (at most 9 levels) names exactly the columns that the
    entries with one list."""
    source = get_source(entry_for(path))
    (remote,) = source.files
    (tmp_path / source.name).mkdir()
    (tmp_path / source.name / remote.name).write_bytes((SHARED / path).read_bytes())
    by_rule = dataclasses.replace(source, categorical="auto", categorical_max_levels=9)
    table = parse_source(by_rule, tmp_path)
    assert {c.name for c in table.schema.columns if c.kind == "categorical" and c.name != source.target} == set(
        source.categorical
    )


def _entry(**extra) -> dict:
    return {
        "task": "regression",
        "source": "url",
        "files": [{"name": "a.csv", "url": "https://example.org/a.csv", "mirror_path": "x/a.csv"}],
        "format": {"kind": "csv", "header": "infer"},
        "target": "y",
        **extra,
    }


def test_alternative_must_name_another_entry_of_the_same_task() -> None:
    with pytest.raises(RegistryError, match="not another registry entry"):
        check_alternatives(sources_from_mapping({"a": _entry(alternative="missing")}))
    with pytest.raises(RegistryError, match="not another registry entry"):
        check_alternatives(sources_from_mapping({"a": _entry(alternative="a")}))
    with pytest.raises(RegistryError, match="binary task"):
        check_alternatives(sources_from_mapping({"a": _entry(alternative="b"), "b": _entry(task="binary")}))
    check_alternatives(sources_from_mapping({"a": _entry(alternative="b"), "b": _entry()}))


def test_level_rule_is_refused_where_it_would_be_ignored() -> None:
    with pytest.raises(RegistryError, match="categorical 'auto' only"):
        source_from_dict("a", _entry(categorical=["c"], categorical_max_levels=9))
    with pytest.raises(RegistryError, match="delimited files"):
        source_from_dict("a", _entry(format={"kind": "arff"}, categorical_max_levels=9))
    assert source_from_dict("a", _entry(categorical_max_levels=9)).categorical_max_levels == 9


def test_datasets_ii_protocol_states_its_sources_and_what_it_does_not_follow() -> None:
    import jsonschema

    params = read_params_file(REPO / "params.yaml")
    schema = yaml.safe_load((REPO / "src" / "tabrepro" / "data" / "params.schema.yaml").read_text())
    protocol = params["protocols"]["openml_benchmark"]
    assert "random_search_utils.R" in protocol["source"] and "data_to_train_test" in protocol["not_followed"][0]
    jsonschema.validate(params, schema)
    params["protocols"]["openml_benchmark"]["not_followed"] = "one string, not a list"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(params, schema)
