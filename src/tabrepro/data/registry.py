"""The dataset registry: where every dataset comes from and how to read it, loaded from datasets.yaml.

The registry is data, not code: adding a dataset means adding a YAML entry, and every entry is
checked here when the registry is loaded, so a typo fails loudly at start-up instead of half-way
through a download. `fetch.py` and `parse.py` only ever see the validated dataclasses below.
"""

from __future__ import annotations

import difflib
import functools
import re
import urllib.parse
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, get_args

import yaml

from tabrepro.errors import InputError
from tabrepro.tasks import TASKS, Task

SourceKind = Literal["url", "openml_task", "openml_dataset"]
FormatKind = Literal["csv", "whitespace", "arff", "xls"]
HeaderMode = Literal["none", "infer", "check", "replace"]
FileRole = Literal["data", "test", "doc"]
LabelFormat = Literal["as_is", "integer"]
NonFinite = Literal["refuse", "missing"]  # what an inf in a numeric column means

REGISTRY_RESOURCE = "datasets.yaml"
EMBEDDED_LOADERS = ("sklearn_breast_cancer",)
OPENML_FILES = ("task.json", "dataset.json", "dataset.arff")  # local names of an OpenML fetch

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class RegistryError(InputError, ValueError):
    """datasets.yaml (or an entry built from a mapping) is malformed."""


class UnknownDatasetError(InputError, ValueError):
    """A dataset name that the registry does not have."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of a `url` dataset: where to get it, how to check it, and what it holds."""

    name: str  # local file name under raw_dir/<dataset>/
    url: str | None  # canonical public URL; None when there is no anonymous download
    mirror_path: str  # relative path under a mirror root
    sha256: str | None = None
    accept_sha256: tuple[str, ...] = ()  # other known-good copies (see the entry's note)
    size: int | None = None  # bytes, when published
    member: str | None = None  # zip member to extract (the parsed file then is the member)
    role: FileRole = "data"
    rows: int | None = None  # data rows this file contributes (data/test files)
    skip_rows: int = 0  # leading non-data lines (e.g. adult.test's comment line)

    @property
    def parsed_name(self) -> str:
        """Relative path (under raw_dir/<dataset>/) of the file the parser reads."""
        return self.member or self.name

    @property
    def accepted_sha256(self) -> tuple[str, ...]:
        return ((self.sha256,) if self.sha256 else ()) + self.accept_sha256


@dataclass(frozen=True)
class TableFormat:
    """How to turn a raw file into rows and named columns."""

    kind: FormatKind
    sep: str = ","
    header: HeaderMode = "none"
    columns: tuple[str, ...] | None = None
    na_values: tuple[str, ...] = ("",)
    skipinitialspace: bool = False
    quotechar: str = '"'
    encoding: str = "utf-8"
    sheet: int = 0


@dataclass(frozen=True)
class OpenMLRef:
    """An OpenML task or dataset; ids and md5 pin what the API must return."""

    task_id: int | None = None
    dataset_id: int | None = None
    md5: str | None = None


@dataclass(frozen=True)
class Expected:
    rows: int | None = None
    features: int | None = None


@dataclass(frozen=True)
class DatasetSource:
    """A validated registry entry."""

    name: str
    title: str
    task: Task
    kind: SourceKind
    format: TableFormat
    files: tuple[RemoteFile, ...] = ()
    target: str | None = None  # None: the OpenML task's (or dataset's default) target
    drop: tuple[str, ...] = ()
    categorical: tuple[str, ...] | Literal["auto", "all"] = "auto"
    continuous: tuple[str, ...] | None = None  # alternative to `categorical`: the complement
    categorical_max_levels: int | None = None  # with "auto": features with at most this many values
    label_strip: str = ""
    label_format: LabelFormat = "as_is"
    non_finite: NonFinite = "refuse"  # "missing": read +-inf as a missing value
    fixed_test_tail_rows: int = 0
    expected: Expected = Expected()
    openml: OpenMLRef | None = None
    embedded: str | None = None
    homepage: str | None = None
    note: str | None = None
    alternative: str | None = None  # another entry with the same data from another source

    @property
    def is_openml(self) -> bool:
        return self.kind in ("openml_task", "openml_dataset")

    @property
    def table_files(self) -> tuple[RemoteFile, ...]:
        """Files whose rows form the table: data files first, then official test files."""
        data = [f for f in self.files if f.role == "data"]
        test = [f for f in self.files if f.role == "test"]
        return tuple(data + test)

    @property
    def has_official_test(self) -> bool:
        return any(f.role == "test" for f in self.files) or self.fixed_test_tail_rows > 0


def source_line(source: DatasetSource) -> str:
    """Which source a fetch of this entry uses, and the alternative it does not: one line."""
    if source.kind == "openml_task" and source.openml is not None:
        origin = f"OpenML task {source.openml.task_id}"
    elif source.kind == "openml_dataset" and source.openml is not None:
        origin = f"OpenML dataset {source.openml.dataset_id}"
    else:
        hosts = sorted({urllib.parse.urlsplit(f.url).hostname or "" for f in source.table_files if f.url})
        origin = f"files from {', '.join(hosts)}" if hosts else "files from a mirror only"
    line = f"{source.name}: {origin}"
    if source.alternative:
        line += f" (alternative source: {source.alternative})"
    return line


# ----------------------------------------------------------------------------------------------
# loading


@functools.lru_cache(maxsize=1)
def _load_cached() -> dict[str, DatasetSource]:
    text = resources.files("tabrepro.data").joinpath(REGISTRY_RESOURCE).read_text(encoding="utf-8")
    raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: ~10x faster, same data
    if not isinstance(raw, dict) or not isinstance(raw.get("datasets"), dict):
        raise RegistryError(f"{REGISTRY_RESOURCE}: expected a top-level 'datasets' mapping")
    sources = sources_from_mapping(raw["datasets"])
    check_alternatives(sources)
    return sources


def load_registry() -> dict[str, DatasetSource]:
    """All registry entries by name (validated once, then cached)."""
    return dict(_load_cached())


def get_source(name: str) -> DatasetSource:
    """The entry called `name`, or an UnknownDatasetError that suggests close names."""
    registry = _load_cached()
    if name in registry:
        return registry[name]
    raise UnknownDatasetError(unknown_name_message(name, sorted(registry)))


def unknown_name_message(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return f"unknown dataset {name!r}: {hint}known datasets: {', '.join(known)}"


def check_alternatives(sources: dict[str, DatasetSource]) -> None:
    """Every `alternative` names another entry of the same task: a typo must not leave a user
    without the fallback the registry promises."""
    for source in sources.values():
        if source.alternative is None:
            continue
        other = sources.get(source.alternative)
        if other is None or other.name == source.name:
            raise _fail(repr(source.name), f"alternative {source.alternative!r} is not another registry entry")
        if other.task != source.task:
            raise _fail(repr(source.name), f"alternative {other.name!r} is a {other.task} task, not {source.task}")


def sources_from_mapping(raw: dict[str, Any]) -> dict[str, DatasetSource]:
    """Validate a `datasets:` mapping (name -> entry) into DatasetSource objects."""
    return {str(name): source_from_dict(str(name), entry) for name, entry in raw.items()}


# ----------------------------------------------------------------------------------------------
# validation helpers: each raises RegistryError naming the dataset and the field


_ENTRY_KEYS = {
    "title",
    "task",
    "source",
    "files",
    "format",
    "target",
    "drop",
    "categorical",
    "continuous",
    "categorical_max_levels",
    "alternative",
    "label_strip",
    "label_format",
    "non_finite",
    "fixed_test_tail_rows",
    "expected",
    "openml",
    "embedded",
    "homepage",
    "note",
}
_FILE_KEYS = {
    "name",
    "url",
    "mirror_path",
    "sha256",
    "accept_sha256",
    "size",
    "member",
    "role",
    "rows",
    "skip_rows",
}
_FORMAT_KEYS = {
    "kind",
    "sep",
    "header",
    "columns",
    "na_values",
    "skipinitialspace",
    "quotechar",
    "encoding",
    "sheet",
}


def _fail(where: str, message: str) -> RegistryError:
    return RegistryError(f"registry entry {where}: {message}")


def _check_keys(raw: Any, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(where, f"expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise _fail(where, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return raw


def _choice(value: Any, options: tuple[str, ...], where: str, field: str) -> Any:
    if value not in options:
        raise _fail(where, f"{field} is {value!r}; expected one of {', '.join(options)}")
    return value


def _opt_str(raw: dict, key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail(where, f"{key} must be a string, got {value!r}")
    return value


def _opt_int(raw: dict, key: str, where: str, minimum: int = 0) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(where, f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _str_tuple(raw: dict, key: str, where: str) -> tuple[str, ...] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, f"{key} must be a list of strings, got {value!r}")
    return tuple(value)


def safe_relative_path(path: str) -> bool:
    """True for a plain relative path that stays inside its root (no absolute path, no '..')."""
    if not path or "\\" in path or path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return False
    return all(part not in ("..", ".", "") for part in path.split("/"))


def _web_address(url: str) -> bool:
    """An http(s) URL naming a host: what a download may start from (the files' own URLs are
    https; fabricated entries in tests use a local http server)."""
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("https", "http") and bool(parts.hostname) and parts.username is None


def _digest(value: Any, pattern: re.Pattern[str], where: str, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not pattern.match(value):
        raise _fail(where, f"{field} {value!r} is not a lowercase hex digest")
    return value


# ----------------------------------------------------------------------------------------------
# entry parsing


def _remote_file(raw: Any, where: str) -> RemoteFile:
    raw = _check_keys(raw, _FILE_KEYS, where)
    name = _opt_str(raw, "name", where)
    if not name or not _NAME.match(name):
        raise _fail(where, f"file name {name!r} must be a plain file name")
    where = f"{where} ({name})"
    mirror_path = _opt_str(raw, "mirror_path", where)
    if not mirror_path or not safe_relative_path(mirror_path):
        raise _fail(where, f"mirror_path {mirror_path!r} must be a relative path without '..'")
    url = _opt_str(raw, "url", where)
    if url is not None and not _web_address(url):
        raise _fail(where, f"url {url!r} must be http(s) with a host (and no user name)")
    member = _opt_str(raw, "member", where)
    if member is not None:
        if not name.endswith(".zip"):
            raise _fail(where, "member is only allowed for .zip archives")
        if not safe_relative_path(member):
            raise _fail(where, f"member {member!r} must be a relative path without '..'")
    accept = raw.get("accept_sha256") or []
    if not isinstance(accept, list):
        raise _fail(where, "accept_sha256 must be a list")
    return RemoteFile(
        name=name,
        url=url,
        mirror_path=mirror_path,
        sha256=_digest(raw.get("sha256"), _SHA256, where, "sha256"),
        accept_sha256=tuple(_digest(v, _SHA256, where, "accept_sha256") for v in accept),  # type: ignore[misc]
        size=_opt_int(raw, "size", where),
        member=member,
        role=_choice(raw.get("role", "data"), get_args(FileRole), where, "role"),
        rows=_opt_int(raw, "rows", where, minimum=1),
        skip_rows=_opt_int(raw, "skip_rows", where) or 0,
    )


def _table_format(raw: Any, where: str, kind_default: str | None) -> TableFormat:
    raw = _check_keys(raw if raw is not None else {"kind": kind_default}, _FORMAT_KEYS, f"{where} format")
    kind = _choice(raw.get("kind", kind_default), get_args(FormatKind), where, "format.kind")
    header = _choice(raw.get("header", "none"), get_args(HeaderMode), where, "format.header")
    columns = _str_tuple(raw, "columns", where)
    if header in ("none", "check", "replace") and kind in ("csv", "whitespace", "xls") and not columns:
        raise _fail(where, f"format.header {header!r} needs format.columns")
    if header == "infer" and columns:
        raise _fail(where, "format.header 'infer' takes the names from the file; drop format.columns")
    if columns and len(set(columns)) != len(columns):
        raise _fail(where, "format.columns has duplicate names")
    na_values = _str_tuple(raw, "na_values", where)
    return TableFormat(
        kind=kind,
        sep=_opt_str(raw, "sep", where) or ",",
        header=header,
        columns=columns,
        na_values=na_values if na_values is not None else ("",),
        skipinitialspace=bool(raw.get("skipinitialspace", False)),
        quotechar=_opt_str(raw, "quotechar", where) or '"',
        encoding=_opt_str(raw, "encoding", where) or "utf-8",
        sheet=_opt_int(raw, "sheet", where) or 0,
    )


def _openml_ref(raw: Any, kind: str, where: str) -> OpenMLRef:
    raw = _check_keys(raw, {"task_id", "dataset_id", "md5"}, f"{where} openml")
    ref = OpenMLRef(
        task_id=_opt_int(raw, "task_id", where, minimum=1),
        dataset_id=_opt_int(raw, "dataset_id", where, minimum=1),
        md5=_digest(raw.get("md5"), _MD5, where, "openml.md5"),
    )
    if kind == "openml_task" and ref.task_id is None:
        raise _fail(where, "source openml_task needs openml.task_id")
    if kind == "openml_dataset" and ref.dataset_id is None:
        raise _fail(where, "source openml_dataset needs openml.dataset_id")
    return ref


def _categorical(raw: dict, where: str) -> tuple[tuple[str, ...] | Literal["auto", "all"], tuple[str, ...] | None]:
    value = raw.get("categorical", "auto")
    continuous = _str_tuple(raw, "continuous", where)
    if continuous is not None and "categorical" in raw:
        raise _fail(where, "give either categorical or continuous, not both")
    if continuous is not None:
        return "auto", continuous
    if value in ("auto", "all"):
        return value, None
    names = _str_tuple(raw, "categorical", where)
    if names is None:
        raise _fail(where, "categorical must be a list of column names, 'auto' or 'all'")
    return names, None


def _check_files(files: tuple[RemoteFile, ...], kind: str, where: str) -> None:
    if kind == "url" and not any(f.role in ("data", "test") for f in files):
        raise _fail(where, "a url source needs at least one data file")
    if kind != "url" and files:
        raise _fail(where, "OpenML sources list no files (they are resolved from the API)")
    names = [f.name for f in files]
    if len(set(names)) != len(names):
        raise _fail(where, "duplicate file names")


def _check_columns(source: DatasetSource, where: str) -> None:
    """Cross-check target/drop/categorical against the declared columns, when they are declared."""
    if source.format.columns is None:
        return
    known = set(source.format.columns)
    referenced = list(source.drop) + list(source.continuous or ())
    if isinstance(source.categorical, tuple):
        referenced += list(source.categorical)
    if source.target:
        referenced.append(source.target)
    missing = [c for c in referenced if c not in known]
    if missing:
        raise _fail(where, f"column(s) {', '.join(missing)} are not in format.columns")
    if source.target in source.drop:
        raise _fail(where, f"target {source.target!r} is also dropped")


def source_from_dict(name: str, raw: Any) -> DatasetSource:
    """Validate one registry entry."""
    where = repr(name)
    if not _NAME.match(name):
        raise _fail(where, "dataset names use letters, digits, '_', '-' and '.' only")
    raw = _check_keys(raw, _ENTRY_KEYS, where)
    kind = _choice(raw.get("source"), get_args(SourceKind), where, "source")
    files = tuple(_remote_file(f, f"{where} file") for f in raw.get("files") or [])
    _check_files(files, kind, where)
    fmt = _table_format(raw.get("format"), where, "arff" if kind != "url" else None)
    categorical, continuous = _categorical(raw, where)
    expected_raw = _check_keys(raw.get("expected") or {}, {"rows", "features"}, f"{where} expected")
    embedded = _opt_str(raw, "embedded", where)
    if embedded is not None:
        _choice(embedded, EMBEDDED_LOADERS, where, "embedded")
    if kind != "url" and "openml" not in raw:
        raise _fail(where, f"source {kind} needs an openml: mapping")
    target = _opt_str(raw, "target", where)
    if target is None and kind != "openml_task":
        raise _fail(where, "target is required (only OpenML tasks may take it from the task)")
    source = DatasetSource(
        name=name,
        title=_opt_str(raw, "title", where) or name,
        task=_choice(raw.get("task"), TASKS, where, "task"),
        kind=kind,
        format=fmt,
        files=files,
        target=target,
        drop=_str_tuple(raw, "drop", where) or (),
        categorical=categorical,
        continuous=continuous,
        categorical_max_levels=_opt_int(raw, "categorical_max_levels", where, minimum=1),
        label_strip=_opt_str(raw, "label_strip", where) or "",
        label_format=_choice(raw.get("label_format", "as_is"), get_args(LabelFormat), where, "label_format"),
        non_finite=_choice(raw.get("non_finite", "refuse"), get_args(NonFinite), where, "non_finite"),
        fixed_test_tail_rows=_opt_int(raw, "fixed_test_tail_rows", where) or 0,
        expected=Expected(
            rows=_opt_int(expected_raw, "rows", where, minimum=1),
            features=_opt_int(expected_raw, "features", where, minimum=1),
        ),
        openml=_openml_ref(raw["openml"], kind, where) if kind != "url" else None,
        embedded=embedded,
        homepage=_opt_str(raw, "homepage", where),
        note=_opt_str(raw, "note", where),
        alternative=_opt_str(raw, "alternative", where),
    )
    _check_columns(source, where)
    if source.categorical_max_levels is not None and (source.categorical != "auto" or source.continuous is not None):
        raise _fail(where, "categorical_max_levels applies to categorical 'auto' only; drop the column list")
    if source.categorical_max_levels is not None and source.format.kind == "arff":
        raise _fail(where, "categorical_max_levels is for delimited files; an ARFF declares its nominal attributes")
    alternative = source.alternative
    if alternative is not None and not _NAME.match(alternative):
        raise _fail(where, f"alternative {alternative!r} is not a registry name")
    return source
