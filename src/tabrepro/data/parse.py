"""Turn fetched raw files into one canonical Table (see table.py), driven by the registry entry.

Every format quirk lives in datasets.yaml (separators, header handling, missing-value markers,
label clean-up), so this module is one generic reader per file kind plus one table builder. The
builder is shared by the embedded scikit-learn copy of WDBC, which is why that table comes out
identical to the parsed wdbc.data.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import arff
import numpy as np
import pandas as pd
import xlrd

from tabrepro.data.openml import read_openml_metadata
from tabrepro.data.registry import DatasetSource, RemoteFile, TableFormat, get_source
from tabrepro.data.standin import source_for_directory
from tabrepro.data.table import ColumnSpec, Table, TableSchema
from tabrepro.errors import InputError, one_line

STR = "str"  # pandas' string dtype: categorical values, missing as NaN (null in parquet)


class ParseError(InputError, ValueError):
    """A raw file does not look like its registry entry says."""


class MissingRawDataError(InputError, FileNotFoundError):
    """Raw files are not there yet; the message says which command fetches them."""


# ----------------------------------------------------------------------------------------------
# public entry points


def parse_dataset(name: str, raw_dir: Path) -> Table:
    """Parse raw_dir/<name>/ (as written by fetch_dataset) into the canonical table."""
    return parse_source(get_source(name), Path(raw_dir))


def parse_source(source: DatasetSource, raw_dir: Path) -> Table:
    """Parse an already-resolved registry entry (tests use fabricated ones)."""
    dataset_dir = Path(raw_dir) / source.name
    missing = [p for p in required_raw_files(source, dataset_dir) if not p.is_file()]
    if missing:
        raise MissingRawDataError(_missing_message(source, dataset_dir, missing))
    # Synthetic stand-ins (benchmarks.scale) are refused unless explicitly allowed; see data/standin.py.
    source = source_for_directory(source, dataset_dir)
    if source.is_openml:
        return _parse_openml(source, dataset_dir)
    return _parse_files(source, dataset_dir)


def embedded_table(name: str) -> Table:
    """The table of a dataset that ships inside a package (no download needed)."""
    source = get_source(name)
    if source.embedded is None:
        raise ParseError(f"dataset {name!r} has no embedded copy; run `tabrepro fetch {name}`")
    frame = _EMBEDDED_LOADERS[source.embedded](source)
    return build_table(source, frame, target=_require_target(source), nominal=set())


def load_or_build_table(name: str, raw_dir: Path) -> Table:
    """Parse the raw files if they are all there, else use the embedded copy, else say what to run."""
    source = get_source(name)
    dataset_dir = Path(raw_dir) / source.name
    needed = required_raw_files(source, dataset_dir)
    present = [p for p in needed if p.is_file()]
    if len(present) == len(needed):
        return parse_source(source, Path(raw_dir))
    if not present and source.embedded is not None:
        return embedded_table(name)
    raise MissingRawDataError(_missing_message(source, dataset_dir, [p for p in needed if not p.is_file()]))


def required_raw_files(source: DatasetSource, dataset_dir: Path) -> list[Path]:
    """The files parse_source reads."""
    if source.is_openml:
        names = (["task.json"] if source.kind == "openml_task" else []) + ["dataset.json", "dataset.arff"]
        return [dataset_dir / n for n in names]
    return [dataset_dir / f.parsed_name for f in source.table_files]


def _missing_message(source: DatasetSource, dataset_dir: Path, missing: list[Path]) -> str:
    names = ", ".join(p.name for p in missing)
    return f"dataset {source.name!r}: raw file(s) {names} missing in {dataset_dir}; run `tabrepro fetch {source.name}`"


def _require_target(source: DatasetSource) -> str:
    if source.target is None:
        raise ParseError(f"dataset {source.name!r}: registry entry names no target")
    return source.target


# ----------------------------------------------------------------------------------------------
# url sources: csv / whitespace / xls / arff files


def _parse_files(source: DatasetSource, dataset_dir: Path) -> Table:
    target = _require_target(source)
    frames: list[pd.DataFrame] = []
    nominal: set[str] = set()
    n_test = 0
    for remote in source.table_files:
        frame, file_nominal = _read_file(source, remote, dataset_dir / remote.parsed_name)
        _refuse_non_finite(source, frame, target, file_nominal, f"dataset {source.name!r}, file {remote.parsed_name}")
        if remote.rows is not None and len(frame) != remote.rows:
            raise ParseError(
                f"dataset {source.name!r}: {remote.parsed_name} has {len(frame)} rows, registry expects {remote.rows}"
            )
        if frames and list(frame.columns) != list(frames[0].columns):
            raise ParseError(f"dataset {source.name!r}: {remote.parsed_name} has different columns than the first file")
        frames.append(frame)
        nominal |= file_nominal
        n_test += len(frame) if remote.role == "test" else 0
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    absent = [c for c in source.drop if c not in frame.columns]
    if absent:
        raise ParseError(f"dataset {source.name!r}: columns to drop {absent} not in {list(frame.columns)}")
    frame = frame.drop(columns=list(source.drop))
    n_test = n_test or source.fixed_test_tail_rows
    return build_table(source, frame, target=target, nominal=nominal, n_fixed_test_rows=n_test)


def _read_file(source: DatasetSource, remote: RemoteFile, path: Path) -> tuple[pd.DataFrame, set[str]]:
    """Read one file into a frame with its final column names, plus its nominal columns."""
    label = f"dataset {source.name!r}, file {path.name}"
    kind = source.format.kind
    try:
        if kind == "arff":
            return _read_arff(path, source.format.encoding, label)
        if kind == "xls":
            frame = _read_xls(path, source.format, label)
        else:
            frame = _read_delimited(source, remote, path, label)
    except ParseError:
        raise
    except (ValueError, OSError, xlrd.XLRDError) as exc:  # pandas/xlrd errors; UnicodeDecodeError is a ValueError
        raise ParseError(f"{label}: {one_line(exc)}") from exc
    if source.categorical == "auto" and source.continuous is None:
        nominal = {c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])}
        if source.categorical_max_levels is not None:
            nominal |= {c for c in frame.columns if frame[c].nunique() <= source.categorical_max_levels}
        return frame, nominal
    return frame, set()


def _csv_options(fmt: TableFormat, remote: RemoteFile) -> dict[str, Any]:
    return {
        "sep": r"\s+" if fmt.kind == "whitespace" else fmt.sep,
        "quotechar": fmt.quotechar,
        "encoding": fmt.encoding,
        "skipinitialspace": fmt.skipinitialspace,
        "skiprows": remote.skip_rows,
        "na_values": list(fmt.na_values),
        "keep_default_na": False,
        "index_col": False,
        "compression": "infer",
        "engine": "c",
    }


def _file_columns(path: Path, fmt: TableFormat, options: dict[str, Any], label: str) -> list[str]:
    """Final column names, after checking the first row against the registry."""
    first = pd.read_csv(path, header=None, nrows=1, dtype=str, **{**options, "na_values": []})
    found = [str(v).strip() for v in first.iloc[0].tolist()] if len(first) else []
    if fmt.header == "infer":
        return found
    expected = list(fmt.columns or ())
    if len(found) != len(expected):
        raise ParseError(f"{label}: first row has {len(found)} fields, registry lists {len(expected)} columns")
    if fmt.header == "check" and [f.lower() for f in found] != [e.lower() for e in expected]:
        diff = next(i for i, (f, e) in enumerate(zip(found, expected)) if f.lower() != e.lower())
        raise ParseError(f"{label}: header column {diff + 1} is {found[diff]!r}, registry expects {expected[diff]!r}")
    return expected


def _column_dtypes(source: DatasetSource, columns: list[str]) -> dict[str, str] | None:
    """Read categorical/label/dropped columns as strings and continuous ones as float64."""
    if source.categorical == "auto" and source.continuous is None:
        return None
    categorical = _categorical_names(source, [c for c in columns if c != source.target], set())
    dtypes = {c: (STR if c in categorical or c in source.drop else "float64") for c in columns}
    if source.target in dtypes:
        dtypes[source.target] = "float64" if source.task == "regression" else STR
    return dtypes


def _read_delimited(source: DatasetSource, remote: RemoteFile, path: Path, label: str) -> pd.DataFrame:
    fmt = source.format
    options = _csv_options(fmt, remote)
    columns = _file_columns(path, fmt, options, label)
    if source.target not in columns:
        raise ParseError(f"{label}: target {source.target!r} not among columns {columns}")
    header = None if fmt.header == "none" else 0
    dtypes = _column_dtypes(source, columns)
    try:
        frame = pd.read_csv(path, header=header, names=columns, dtype=dtypes, **options)
    except ValueError:
        # Re-read as text so the error names the column and the offending values.
        frame = pd.read_csv(path, header=header, names=columns, dtype=str, **options)
        for name, dtype in (dtypes or {}).items():
            if dtype == "float64":
                _as_float(frame[name], f"{label}, column {name}")
        raise
    if len(frame.columns) != len(columns):
        raise ParseError(f"{label}: rows have {len(frame.columns)} fields, expected {len(columns)}")
    return frame


def _read_xls(path: Path, fmt: TableFormat, label: str) -> pd.DataFrame:
    header = None if fmt.header == "none" else 0
    frame = pd.read_excel(path, sheet_name=fmt.sheet, header=header, engine="xlrd")
    if fmt.header == "infer":
        frame.columns = [str(c).strip() for c in frame.columns]
        return frame
    expected = list(fmt.columns or ())
    if len(frame.columns) != len(expected):
        raise ParseError(f"{label}: sheet has {len(frame.columns)} columns, registry lists {len(expected)}")
    found = [str(c).strip() for c in frame.columns]
    if fmt.header == "check" and [f.lower() for f in found] != [e.lower() for e in expected]:
        raise ParseError(f"{label}: header {found} does not match registry columns {expected}")
    frame.columns = expected
    return frame.dropna(how="all").reset_index(drop=True)


def _read_arff(path: Path, encoding: str, label: str) -> tuple[pd.DataFrame, set[str]]:
    """Dense ARFF via liac-arff: nominal and string attributes are the nominal columns."""
    try:
        with path.open(encoding=encoding) as handle:
            doc = arff.load(handle)
    except (arff.ArffException, ValueError) as exc:
        raise ParseError(f"{label}: not a readable dense ARFF file ({one_line(exc)})") from exc
    attributes = doc["attributes"]
    frame = pd.DataFrame(doc["data"], columns=[str(name) for name, _ in attributes])
    nominal: set[str] = set()
    for name, kind in attributes:
        if isinstance(kind, list) or str(kind).upper().startswith(("STRING", "DATE")):
            nominal.add(str(name))
            frame[name] = frame[name].astype(object)
        else:
            frame[name] = _as_float(frame[name], f"{label}, attribute {name}")
    return frame, nominal


# ----------------------------------------------------------------------------------------------
# OpenML sources


def _parse_openml(source: DatasetSource, dataset_dir: Path) -> Table:
    meta = read_openml_metadata(source, dataset_dir)
    if not meta.target:
        raise ParseError(f"dataset {source.name!r}: neither the registry nor OpenML names a target")
    frame, nominal = _read_arff(
        dataset_dir / "dataset.arff", source.format.encoding, f"dataset {source.name!r}, file dataset.arff"
    )
    _refuse_non_finite(source, frame, meta.target, nominal, f"dataset {source.name!r}, file dataset.arff")
    extra = [c for c in (*meta.ignore, meta.row_id) if c and c in frame.columns and c != meta.target]
    absent = [c for c in source.drop if c not in frame.columns]
    if absent:
        raise ParseError(f"dataset {source.name!r}: columns to drop {absent} not in the ARFF")
    frame = frame.drop(columns=list(dict.fromkeys([*extra, *source.drop])))
    return build_table(source, frame, target=meta.target, nominal=nominal)


# ----------------------------------------------------------------------------------------------
# the canonical table


def build_table(
    source: DatasetSource,
    frame: pd.DataFrame,
    *,
    target: str,
    nominal: set[str],
    n_fixed_test_rows: int = 0,
) -> Table:
    """Features in file order then the target; categorical as strings, continuous as float64."""
    label = f"dataset {source.name!r}"
    if target not in frame.columns:
        raise ParseError(f"{label}: target {target!r} not among columns {list(frame.columns)}")
    features = [c for c in frame.columns if c != target]
    categorical = _categorical_names(source, features, nominal)
    out: dict[str, pd.Series] = {}
    specs: list[ColumnSpec] = []
    for name in features:
        if name in categorical:
            out[name] = _as_category(frame[name])
            specs.append(ColumnSpec(name, "categorical", _levels(out[name])))
        else:
            out[name] = _finite_or_missing(
                source, _as_float(frame[name], f"{label}, column {name}"), f"{label}, column {name}"
            )
            specs.append(ColumnSpec(name, "continuous"))
    out[target], target_spec = _target_column(source, frame[target], target)
    specs.append(target_spec)
    table_frame = pd.DataFrame(out).reset_index(drop=True)
    schema = TableSchema(
        dataset=source.name,
        task=source.task,
        target=target,
        columns=specs,
        n_rows=len(table_frame),
        n_fixed_test_rows=n_fixed_test_rows,
    )
    _check_shape(source, schema)
    return Table(frame=table_frame, schema=schema)


def _categorical_names(source: DatasetSource, features: list[str], nominal: set[str]) -> set[str]:
    if source.continuous is not None:
        _check_known(source, source.continuous, features, "continuous")
        return set(features) - set(source.continuous)
    if source.categorical == "all":
        return set(features)
    if source.categorical == "auto":
        return nominal & set(features)
    _check_known(source, source.categorical, features, "categorical")
    return set(source.categorical)


def _check_known(source: DatasetSource, names: tuple[str, ...], features: list[str], field: str) -> None:
    unknown = [n for n in names if n not in features]
    if unknown:
        raise ParseError(f"dataset {source.name!r}: {field} column(s) {unknown} are not features {features}")


def _category_text(value: Any) -> str:
    """Canonical text of one categorical value: 3.0 -> '3', 0.5 -> '0.5', ' a ' -> 'a'."""
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(value).strip()


def _as_category(values: pd.Series) -> pd.Series:
    if pd.api.types.is_string_dtype(values) and values.dtype != object:
        text = values.str.strip()
    else:
        text = values.map(_category_text, na_action="ignore").astype(STR)
    return text.mask(text == "").astype(STR)


def _levels(values: pd.Series) -> list[str]:
    return sorted(str(v) for v in values.dropna().unique())


def _as_float(values: pd.Series, label: str) -> pd.Series:
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return values.astype("float64")
    if values.dtype == object:
        with contextlib.suppress(ValueError, TypeError):
            return pd.to_numeric(values, errors="raise").astype("float64")
    text = values.astype(STR).str.strip()
    numbers = pd.to_numeric(text.mask(text == ""), errors="coerce")
    bad = text[numbers.isna() & text.notna() & (text != "")]
    if len(bad):
        examples = ", ".join(repr(v) for v in bad.unique()[:3])
        raise ParseError(f"{label}: {len(bad)} value(s) are not numbers, e.g. {examples}")
    return numbers.astype("float64")


def _numeric_view(values: pd.Series) -> pd.Series:
    """The column's numbers (anything that is not one as NaN), for finding infinities."""
    if pd.api.types.is_bool_dtype(values):
        return pd.Series(np.zeros(len(values)), index=values.index)
    if pd.api.types.is_numeric_dtype(values):
        return values.astype("float64")
    text = values.astype(STR).str.strip()
    return pd.to_numeric(text, errors="coerce").astype("float64")


def _refuse_non_finite(
    source: DatasetSource, frame: pd.DataFrame, target: str | None, nominal: set[str], label: str
) -> None:
    """Stop on an inf in a column read as numbers, naming the file, column and first data row:
    the mean of such a column is NaN, and the preprocessed feature silently becomes constant.
    A registry entry with `non_finite: missing` reads it as a missing value instead."""
    if source.non_finite != "refuse":
        return
    features = [c for c in frame.columns if c != target and c not in source.drop]
    try:
        categorical = _categorical_names(source, features, nominal)
    except ParseError:
        return  # build_table names the unknown columns
    numeric = [c for c in features if c not in categorical]
    if source.task == "regression" and target in frame.columns:
        numeric.append(target)
    for name in numeric:
        infinite = np.isinf(_numeric_view(frame[name]).to_numpy())
        if infinite.any():
            first = int(np.flatnonzero(infinite)[0]) + 1
            raise ParseError(
                f"{label}, column {name}: {int(infinite.sum())} non-finite value(s) (inf), the first in data "
                f"row {first}; fix the file, or set `non_finite: missing` in the registry entry to read them as missing"
            )


def _finite_or_missing(source: DatasetSource, values: pd.Series, label: str) -> pd.Series:
    """Continuous values with no infinity left: +-inf read as missing where the registry says so,
    refused otherwise (the files' own check names the row; this one guards every other path)."""
    infinite = np.isinf(values.to_numpy(dtype="float64"))
    if not infinite.any():
        return values
    if source.non_finite == "missing":
        return values.mask(pd.Series(infinite, index=values.index))
    first = int(np.flatnonzero(infinite)[0]) + 1
    raise ParseError(f"{label}: {int(infinite.sum())} non-finite value(s) (inf), the first in row {first}")


def _target_column(source: DatasetSource, values: pd.Series, target: str) -> tuple[pd.Series, ColumnSpec]:
    label = f"dataset {source.name!r}, target {target}"
    if source.task == "regression":
        column = _finite_or_missing(source, _as_float(values, label), label)
        spec = ColumnSpec(target, "continuous")
    else:
        column = _class_labels(source, _as_category(values), label)
        spec = ColumnSpec(target, "categorical", _levels(column))
    if column.isna().any():
        raise ParseError(f"{label}: {int(column.isna().sum())} row(s) have no target value")
    return column, spec


def _class_labels(source: DatasetSource, labels: pd.Series, label: str) -> pd.Series:
    if source.label_strip:
        labels = labels.str.rstrip(source.label_strip).str.strip()
    if source.label_format == "integer":
        numbers = pd.to_numeric(labels, errors="coerce")
        if numbers.isna().any() or not np.all(np.mod(numbers.to_numpy(dtype="float64"), 1) == 0):
            raise ParseError(f"{label}: label_format integer but some labels are not integers")
        labels = pd.Series(numbers.astype("int64").astype(str), dtype=STR)
    return labels.astype(STR)


def _check_shape(source: DatasetSource, schema: TableSchema) -> None:
    label = f"dataset {source.name!r}"
    n_levels = len(schema.target_column.levels)
    if source.task == "binary" and n_levels != 2:
        raise ParseError(
            f"{label}: binary task but the target has {n_levels} levels {schema.target_column.levels[:10]}"
        )
    if source.task == "multiclass" and n_levels < 3:
        raise ParseError(f"{label}: multiclass task but the target has {n_levels} levels")
    expected = source.expected
    if expected.rows is not None and schema.n_rows != expected.rows:
        raise ParseError(f"{label}: parsed {schema.n_rows} rows, registry expects {expected.rows}")
    if expected.features is not None and len(schema.features) != expected.features:
        raise ParseError(f"{label}: parsed {len(schema.features)} features, registry expects {expected.features}")
    if schema.n_fixed_test_rows >= max(schema.n_rows, 1):
        raise ParseError(f"{label}: {schema.n_fixed_test_rows} fixed test rows leave no training rows")


# ----------------------------------------------------------------------------------------------
# embedded copies

_SKLEARN_WDBC_LABELS = {"malignant": "M", "benign": "B"}  # wdbc.data's diagnosis codes


def _sklearn_wdbc_name(name: str) -> str:
    """scikit-learn's 'mean concave points' is wdbc's concave_points_mean (likewise error/worst)."""
    words = name.split(" ")
    if words[0] in ("mean", "worst"):
        return "_".join(words[1:] + words[:1])
    if words[-1] == "error":
        return "_".join(words[:-1] + ["se"])
    return name


def _sklearn_breast_cancer(source: DatasetSource) -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer  # deferred: loads sklearn

    bunch = load_breast_cancer()
    target = _require_target(source)
    features = [c for c in (source.format.columns or ()) if c not in source.drop and c != target]
    from_sklearn = [_sklearn_wdbc_name(str(n)) for n in bunch.feature_names]
    if from_sklearn != features:
        raise ParseError(f"dataset {source.name!r}: scikit-learn's features {from_sklearn} differ from the registry's")
    frame = pd.DataFrame(np.asarray(bunch.data, dtype="float64"), columns=features)
    names = [str(bunch.target_names[t]) for t in bunch.target]
    frame[target] = pd.Series([_SKLEARN_WDBC_LABELS[n] for n in names], dtype=STR)
    return frame


_EMBEDDED_LOADERS: dict[str, Callable[[DatasetSource], pd.DataFrame]] = {
    "sklearn_breast_cancer": _sklearn_breast_cancer,
}

__all__ = [
    "MissingRawDataError",
    "ParseError",
    "build_table",
    "embedded_table",
    "load_or_build_table",
    "parse_dataset",
    "parse_source",
    "required_raw_files",
]
