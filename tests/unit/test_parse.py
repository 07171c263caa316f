"""Parsing raw files into canonical tables: formats, UCI quirks, clear errors, embedded WDBC."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from conftest import SHARED_DATASETS
from tabrepro.data import parse
from tabrepro.data.fetch import fetch_dataset
from tabrepro.data.parse import (
    MissingRawDataError,
    ParseError,
    embedded_table,
    load_or_build_table,
    parse_dataset,
    parse_source,
)
from tabrepro.data.registry import DatasetSource, source_from_dict
from tabrepro.data.table import load_table, save_table


def make_source(name: str, files: list[dict[str, Any]], **entry: Any) -> DatasetSource:
    """A registry entry for files written straight into raw/<name>/ (no URL needed to parse)."""
    for remote in files:
        remote.setdefault("url", None)
        remote.setdefault("mirror_path", f"{name}/{remote['name']}")
    return source_from_dict(name, {"task": "binary", "source": "url", "files": files, **entry})


def write(raw: Path, name: str, file_name: str, data: bytes) -> None:
    (raw / name).mkdir(parents=True, exist_ok=True)
    (raw / name / file_name).write_bytes(data)


def assert_canonical(table: Any) -> None:
    """The invariants every canonical table keeps (table.py)."""
    schema = table.schema
    assert list(table.frame.columns) == [c.name for c in schema.columns]
    assert schema.columns[-1].name == schema.target
    assert schema.n_rows == len(table.frame)
    for spec in schema.columns:
        column = table.frame[spec.name]
        if spec.kind == "continuous":
            assert column.dtype == np.float64, spec.name
        else:
            assert pd.api.types.is_string_dtype(column), spec.name
            assert spec.levels == sorted(spec.levels)
            assert set(column.dropna()) == set(spec.levels)


# ----------------------------------------------------------------------------------------------
# formats


def test_semicolon_quoted_crlf_csv(tmp_path: Path) -> None:
    data = b'"age";"job";"balance";"y"\r\n30;"unknown";1787;"no"\r\n33;"services";-4;"yes"\r\n35;"services";0;"no"\r\n'
    write(tmp_path, "bank", "bank.csv", data)
    source = make_source(
        "bank",
        [{"name": "bank.csv", "rows": 3}],
        format={"kind": "csv", "sep": ";", "header": "infer"},
        target="y",
        categorical=["job"],
    )
    table = parse_source(source, tmp_path)
    assert_canonical(table)
    assert list(table.frame.columns) == ["age", "job", "balance", "y"]
    assert table.schema.columns[1].levels == ["services", "unknown"]  # "unknown" is a category
    assert table.frame["balance"].tolist() == [1787.0, -4.0, 0.0]


def test_whitespace_with_leading_spaces_and_blank_lines(tmp_path: Path) -> None:
    data = b" 0.1  18.0  0  24.0\n 0.2   0.0  1  21.6\n 0.3   0.0  1  34.7\n\n\n"
    write(tmp_path, "house", "housing.data", data)
    source = make_source(
        "house",
        [{"name": "housing.data"}],
        task="regression",
        format={"kind": "whitespace", "columns": ["CRIM", "ZN", "CHAS", "MEDV"]},
        target="MEDV",
        categorical=["CHAS"],
    )
    table = parse_source(source, tmp_path)
    assert_canonical(table)
    assert table.frame.shape == (3, 4)
    assert table.schema.columns[2].levels == ["0", "1"]
    assert table.frame["MEDV"].tolist() == [24.0, 21.6, 34.7]


ADULT_ROW = "39, State-gov, 77516, Bachelors, {label}\n"


def test_adult_style_official_test_file(tmp_path: Path) -> None:
    train = ADULT_ROW.format(label="<=50K") + "50, ?, 83311, Bachelors, >50K\n\n"
    test = (
        "|1x3 Cross validator\n"
        + ADULT_ROW.format(label="<=50K.")
        + "38, Private, 1, HS-grad, >50K.\n"
        + "28, Private, 2, HS-grad, >50K.\n"
    )
    write(tmp_path, "adult", "adult.data", train.encode())
    write(tmp_path, "adult", "adult.test", test.encode())
    source = make_source(
        "adult",
        [{"name": "adult.data", "rows": 2}, {"name": "adult.test", "role": "test", "skip_rows": 1, "rows": 3}],
        format={
            "kind": "csv",
            "skipinitialspace": True,
            "na_values": ["", "?"],
            "columns": ["age", "workclass", "fnlwgt", "education", "income"],
        },
        target="income",
        label_strip=".",
        categorical=["workclass", "education"],
        expected={"rows": 5, "features": 4},
    )
    table = parse_source(source, tmp_path)
    assert_canonical(table)
    assert table.schema.n_fixed_test_rows == 3
    assert table.frame["income"].tolist() == ["<=50K", ">50K", "<=50K", ">50K", ">50K"]
    assert table.frame["workclass"].isna().tolist() == [False, True, False, False, False]
    assert table.schema.columns[1].levels == ["Private", "State-gov"]


TELCO_HEADER = "customerID,gender,Tenure,TotalCharges,Churn\r\n"
TELCO_ROWS = "7590-VHVEG,Female,1,29.85,No\r\n5575-GNVDE,Male,0, ,Yes\r\n3668-QPYBK,Male,2,108.15,Yes\r\n"


def telco_source(header: str = "check") -> DatasetSource:
    return make_source(
        "telco",
        [{"name": "telco.csv"}],
        format={
            "kind": "csv",
            "header": header,
            "na_values": ["", " "],
            "columns": ["customerID", "gender", "tenure", "TotalCharges", "Churn"],
        },
        target="Churn",
        drop=["customerID"],
        continuous=["tenure", "TotalCharges"],
    )


def test_telco_blanks_are_missing_and_header_is_checked_case_insensitively(tmp_path: Path) -> None:
    write(tmp_path, "telco", "telco.csv", (TELCO_HEADER + TELCO_ROWS).encode())
    table = parse_source(telco_source(), tmp_path)
    assert_canonical(table)
    assert list(table.frame.columns) == ["gender", "tenure", "TotalCharges", "Churn"]  # id dropped, names from registry
    assert table.frame["TotalCharges"].isna().tolist() == [False, True, False]


def test_header_that_differs_from_registry_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "telco", "telco.csv", (TELCO_HEADER.replace("Tenure", "months") + TELCO_ROWS).encode())
    with pytest.raises(ParseError, match=r"telco.csv: header column 3 is 'months', registry expects 'tenure'"):
        parse_source(telco_source(), tmp_path)


def test_gzip_and_integer_labels_and_tail_test_rows(tmp_path: Path) -> None:
    rows = "".join(f"{float(i % 2):.18e},{i * 0.5},{i}\n" for i in range(10))
    write(tmp_path, "higgs", "HIGGS.csv.gz", gzip.compress(rows.encode()))
    source = make_source(
        "higgs",
        [{"name": "HIGGS.csv.gz"}],
        format={"kind": "csv", "columns": ["label", "pt", "eta"]},
        target="label",
        label_format="integer",
        categorical=[],
        fixed_test_tail_rows=3,
    )
    table = parse_source(source, tmp_path)
    assert_canonical(table)
    assert list(table.frame.columns) == ["pt", "eta", "label"]
    assert table.schema.target_column.levels == ["0", "1"]
    assert table.schema.n_fixed_test_rows == 3


def test_arff_nominal_attributes_are_categorical(tmp_path: Path) -> None:
    data = (
        b"@relation s\n@attribute seismic {a,b}\n@attribute energy real\n@attribute class {1,0}\n@data\n"
        b"a,15180,0\nb,?,1\n?,8050,0\n"
    )
    write(tmp_path, "seis", "s.arff", data)
    source = make_source("seis", [{"name": "s.arff", "rows": 3}], format={"kind": "arff"}, target="class")
    table = parse_source(source, tmp_path)
    assert_canonical(table)
    assert [c.kind for c in table.schema.columns] == ["categorical", "continuous", "categorical"]
    assert table.frame["seismic"].isna().sum() == 1 and table.frame["energy"].isna().sum() == 1


def test_xls_header_is_replaced_by_registry_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_read_excel(path: Path, **kwargs: Any) -> pd.DataFrame:
        seen.update(kwargs)
        return pd.DataFrame(
            {
                "Cement (component 1)(kg in a m^3 mixture)": [540.0, 332.5],
                "Concrete compressive strength(MPa, megapascals) ": [79.99, 40.27],
            }
        )

    monkeypatch.setattr(parse.pd, "read_excel", fake_read_excel)
    write(tmp_path, "concrete", "c.xls", b"not parsed: read_excel is replaced")
    source = make_source(
        "concrete",
        [{"name": "c.xls"}],
        task="regression",
        format={"kind": "xls", "header": "replace", "columns": ["cement", "strength"]},
        target="strength",
        categorical=[],
    )
    table = parse_source(source, tmp_path)
    assert seen == {"sheet_name": 0, "header": 0, "engine": "xlrd"}
    assert list(table.frame.columns) == ["cement", "strength"]
    assert table.frame["strength"].tolist() == [79.99, 40.27]


def test_extracted_zip_member_is_what_gets_parsed(tmp_path: Path) -> None:
    write(tmp_path, "bank", "bank-full.csv", b"age;y\n1;no\n2;yes\n")
    source = make_source(
        "bank",
        [{"name": "bank.zip", "member": "bank-full.csv"}],
        format={"kind": "csv", "sep": ";", "header": "infer"},
        target="y",
        categorical=[],
    )
    assert parse_source(source, tmp_path).frame.shape == (2, 2)


def test_table_round_trips_through_parquet(tmp_path: Path) -> None:
    write(tmp_path, "telco", "telco.csv", (TELCO_HEADER + TELCO_ROWS).encode())
    table = parse_source(telco_source(), tmp_path)
    save_table(table, tmp_path / "out")
    again = load_table(tmp_path / "out")
    pd.testing.assert_frame_equal(again.frame, table.frame)
    assert again.schema == table.schema


# ----------------------------------------------------------------------------------------------
# clear errors


def simple_csv_source(**entry: Any) -> DatasetSource:
    base: dict[str, Any] = {"format": {"kind": "csv", "header": "infer"}, "target": "y", "categorical": []}
    return make_source("toy", [{"name": "toy.csv"}], **{**base, **entry})


@pytest.mark.parametrize(
    ("data", "entry", "message"),
    [
        (b"a,y\n1,p\nten,q\n", {}, r"column a: 1 value\(s\) are not numbers, e.g. 'ten'"),
        (b"a,y\n1,p\n2,q\n3,r\n", {}, r"binary task but the target has 3 levels"),
        (b"a,y\n1,p\n2,q\n", {"expected": {"rows": 5}}, r"parsed 2 rows, registry expects 5"),
        (b"a,y\n1,p\n2,\n", {}, r"target y: 1 row\(s\) have no target value"),
        (b"a,y\n1,p\n2,q\n", {"target": "z"}, r"target 'z' not among columns"),
        (b"a,y\n1,p\n2,q\n", {"categorical": ["b"]}, r"categorical column\(s\) \['b'\] are not features"),
        (b"a,y\n1,p\n2,q\n", {"drop": ["id"]}, r"columns to drop \['id'\]"),
    ],
)
def test_bad_content_is_reported_clearly(tmp_path: Path, data: bytes, entry: dict[str, Any], message: str) -> None:
    write(tmp_path, "toy", "toy.csv", data)
    with pytest.raises(ParseError, match=message) as info:
        parse_source(simple_csv_source(**entry), tmp_path)
    assert "'toy'" in str(info.value)


def test_wrong_field_count_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "toy", "toy.csv", b"1,2,p\n3,4,q\n")
    source = make_source(
        "toy", [{"name": "toy.csv"}], format={"kind": "csv", "columns": ["a", "y"]}, target="y", categorical=[]
    )
    with pytest.raises(ParseError, match="first row has 3 fields, registry lists 2 columns"):
        parse_source(source, tmp_path)


def test_per_file_row_count_is_checked(tmp_path: Path) -> None:
    write(tmp_path, "toy", "toy.csv", b"a,y\n1,p\n2,q\n")
    source = make_source(
        "toy", [{"name": "toy.csv", "rows": 7}], format={"kind": "csv", "header": "infer"}, target="y", categorical=[]
    )
    with pytest.raises(ParseError, match="toy.csv has 2 rows, registry expects 7"):
        parse_source(source, tmp_path)


def test_missing_raw_files_say_which_command_to_run(tmp_path: Path) -> None:
    with pytest.raises(MissingRawDataError, match=r"CASP.csv missing .*run `tabrepro fetch protein`"):
        parse_dataset("protein", tmp_path)
    with pytest.raises(MissingRawDataError, match="tabrepro fetch protein"):
        load_or_build_table("protein", tmp_path)


# ----------------------------------------------------------------------------------------------
# embedded breast cancer


def test_embedded_breast_cancer_table() -> None:
    table = embedded_table("breast_cancer")
    assert_canonical(table)
    assert table.frame.shape == (569, 31)
    assert table.schema.target == "diagnosis" and table.schema.task == "binary"
    assert table.schema.target_column.levels == ["B", "M"]
    assert table.frame["diagnosis"].value_counts().to_dict() == {"B": 357, "M": 212}
    assert list(table.frame.columns[:3]) == ["radius_mean", "texture_mean", "perimeter_mean"]
    assert table.frame.columns[-2] == "fractal_dimension_worst"


def test_load_or_build_table_falls_back_to_embedded(tmp_path: Path) -> None:
    table = load_or_build_table("breast_cancer", tmp_path)
    pd.testing.assert_frame_equal(table.frame, embedded_table("breast_cancer").frame)


def test_embedded_table_requires_an_embedded_copy() -> None:
    with pytest.raises(ParseError, match="'boston' has no embedded copy; run `tabrepro fetch boston`"):
        embedded_table("boston")


def test_embedded_breast_cancer_equals_parsed_real_wdbc(tmp_path: Path) -> None:
    shared = SHARED_DATASETS
    if shared is None:
        pytest.skip("real wdbc.data not available: set TABREPRO_SHARED_DATASETS or provide ../shared/datasets")
    fetch_dataset("breast_cancer", tmp_path, mirror=str(shared), retries=0, progress=False)
    parsed = parse_dataset("breast_cancer", tmp_path)
    embedded = embedded_table("breast_cancer")
    pd.testing.assert_frame_equal(parsed.frame, embedded.frame, check_exact=True)
    assert parsed.schema == embedded.schema
    assert load_or_build_table("breast_cancer", tmp_path).schema == parsed.schema
