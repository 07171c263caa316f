"""OpenML sources: the task and dataset descriptions from the API (checked: integer ids, an md5,
an https download url) and the ARFF they describe. The ARFF's md5 comes from the registry or the
API, never from the mirror that serves the bytes; a fetch that had only the mirror to go by is
reported as unverified."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabrepro.data.download import (
    OPENML_DEFAULT_URL,
    FetchOptions,
    Location,
    combined_failure,
    download_any,
    ensure_file,
    file_label,
    locations_for,
)
from tabrepro.data.fetch_errors import ChecksumMismatchError, FetchError, UnsafeLocationError
from tabrepro.data.registry import DatasetSource
from tabrepro.data.verify import Expectation, hash_file, read_manifest, record_hash

log = logging.getLogger(__name__)

OPENML_URL_ENV = "TABREPRO_OPENML_URL"
OPENML_HOSTS = ("api.openml.org", "www.openml.org", "openml.org")  # where a description's url may point
_OPENML_TASK_TYPES = {
    "Supervised Classification": ("binary", "multiclass"),
    "Supervised Regression": ("regression",),
}


@dataclass(frozen=True)
class OpenMLMetadata:
    """What parse.py needs from the stored OpenML descriptions."""

    dataset_id: int
    target: str | None
    ignore: tuple[str, ...]
    row_id: str | None
    task_type: str | None


def _json_doc(path: Path, label: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FetchError(f"{label}: {path.name} is not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise FetchError(f"{label}: {path.name} is not a JSON object")
    return doc


def _integer_id(value: Any, what: str, label: str) -> int:
    """An OpenML id as the API writes it (a JSON number or a string of ASCII digits), else refused."""
    text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
    if not re.fullmatch(r"[0-9]{1,12}", text) or int(text) < 1:
        raise FetchError(f"{label}: {what} {value!r} is not a positive integer id")
    return int(text)


def openml_task_info(doc: dict[str, Any], task_id: int, label: str) -> tuple[int, str | None, str | None]:
    """(dataset id, target, task type) from an api/v1/json/task/{id} document."""
    task = doc.get("task")
    if not isinstance(task, dict) or str(task.get("task_id")) != str(task_id):
        raise FetchError(f"{label}: task.json does not describe OpenML task {task_id}")
    inputs = task.get("input") or []
    for entry in inputs if isinstance(inputs, list) else [inputs]:
        if isinstance(entry, dict) and entry.get("name") == "source_data":
            data_set = entry.get("data_set")
            if not isinstance(data_set, dict) or "data_set_id" not in data_set:
                raise FetchError(f"{label}: task {task_id} names no data_set_id")
            dataset_id = _integer_id(data_set["data_set_id"], f"task {task_id}'s data_set_id", label)
            return dataset_id, data_set.get("target_feature") or None, task.get("task_type")
    raise FetchError(f"{label}: task {task_id} has no source_data input")


def _as_names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)


def openml_dataset_info(doc: dict[str, Any], dataset_id: int, label: str) -> dict[str, Any]:
    """The data_set_description of an api/v1/json/data/{id} document, checked for what we use:
    integer ids, an md5 digest, and a download url that is https (never a path or another scheme)."""
    desc = doc.get("data_set_description")
    if not isinstance(desc, dict) or str(desc.get("id")) != str(dataset_id):
        raise FetchError(f"{label}: dataset.json does not describe OpenML dataset {dataset_id}")
    missing = [k for k in ("file_id", "md5_checksum") if not desc.get(k)]
    if missing:
        raise FetchError(f"{label}: OpenML dataset {dataset_id} description lacks {', '.join(missing)}")
    _integer_id(desc["file_id"], f"OpenML dataset {dataset_id}'s file_id", label)
    if not isinstance(desc["md5_checksum"], str) or not re.fullmatch(r"[0-9a-f]{32}", desc["md5_checksum"]):
        raise FetchError(f"{label}: OpenML dataset {dataset_id}'s md5_checksum {desc['md5_checksum']!r} is not an md5")
    url = desc.get("url")
    if url is not None and (not isinstance(url, str) or not _is_https_url(url)):
        raise UnsafeLocationError(
            f"{label}: OpenML dataset {dataset_id}'s description names download url {url!r}; only an "
            "https address is accepted"
        )
    if str(desc.get("format", "arff")).lower() != "arff":
        raise FetchError(f"{label}: OpenML dataset {dataset_id} is {desc.get('format')}, not dense ARFF")
    return desc


def _is_https_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme == "https" and bool(parts.hostname) and not parts.username


def read_openml_metadata(source: DatasetSource, dataset_dir: Path) -> OpenMLMetadata:
    """Target, ignored columns and row-id column from the stored task/dataset descriptions."""
    label = f"dataset {source.name!r}"
    assert source.openml is not None
    task_target = task_type = None
    dataset_id = source.openml.dataset_id
    if source.kind == "openml_task":
        task_doc = _json_doc(dataset_dir / "task.json", label)
        dataset_id, task_target, task_type = openml_task_info(task_doc, source.openml.task_id or 0, label)
    desc = openml_dataset_info(_json_doc(dataset_dir / "dataset.json", label), dataset_id or 0, label)
    return OpenMLMetadata(
        dataset_id=int(desc["id"]),
        target=source.target or task_target or desc.get("default_target_attribute"),
        ignore=_as_names(desc.get("ignore_attribute")),
        row_id=desc.get("row_id_attribute") or None,
        task_type=task_type,
    )


def _fetch_openml_json(
    source: DatasetSource,
    name: str,
    url: str,
    target_dir: Path,
    options: FetchOptions,
    check: Callable[[dict[str, Any]], Any],
) -> tuple[Path, bool]:
    """Fetch one API description, keeping it only if `check` accepts it; True when it came from
    the API. The API is asked first and the mirror second, and only the API's copy is recorded in
    SHA256SUMS: a copy from the mirror is asked for again next time, so that it gets verified once
    the API can be reached."""
    dest = target_dir / name
    label = file_label(source, name)
    recorded = read_manifest(target_dir).get(name)
    if dest.is_file() and recorded is not None and hash_file(dest).sha256 == recorded:
        try:
            check(_json_doc(dest, label))
            return dest, True
        except FetchError as exc:
            log.warning("%s; fetching it again", exc)
    mirror = locations_for(f"{source.name}/{name}", [], options.mirror)
    # With a mirror to fall back on, an unreachable API costs one attempt, not a round of backoff.
    stages = [([Location(url)], dataclasses.replace(options, retries=0) if mirror else options)]
    stages += [(mirror, options)] if mirror else []

    def accept(path: Path) -> None:
        check(_json_doc(path, label))

    failures: list[FetchError] = []
    for locations, stage_options in stages:
        try:
            digest, location = download_any(
                locations, dest, Expectation(checked_after=True), label, stage_options, accept
            )
            break
        except FetchError as failure:
            failures.append(failure)
    else:
        return _fallback_to_present(dest, check, label, combined_failure(failures))
    record_hash(target_dir, name, None if location.mirror else digest.sha256)
    return dest, not location.mirror


def _fallback_to_present(
    dest: Path, check: Callable[[dict[str, Any]], Any], label: str, failure: FetchError
) -> tuple[Path, bool]:
    """Neither the API nor the mirror answered: keep a copy already here (unverified) if it passes."""
    if not dest.is_file():
        raise failure
    try:
        check(_json_doc(dest, label))
    except FetchError:
        raise failure from None
    log.warning("%s; using the copy already here, unverified", failure)
    return dest, False


def _check_task_type(source: DatasetSource, task_type: str | None) -> None:
    allowed = _OPENML_TASK_TYPES.get(task_type or "")
    if allowed is None:
        raise FetchError(f"dataset {source.name!r}: OpenML task type {task_type!r} is not supported")
    if source.task not in allowed:
        raise FetchError(f"dataset {source.name!r}: registry says {source.task} but the OpenML task is {task_type}")


def _arff_urls(api: str, desc: dict[str, Any]) -> list[str]:
    """The API's download address for the description's file id, then the description's own
    link when it points at OpenML itself (not when the API is overridden)."""
    urls = [f"{api}/data/v1/download/{int(desc['file_id'])}"]
    link = desc.get("url")
    if api == OPENML_DEFAULT_URL and link and urllib.parse.urlsplit(link).hostname in OPENML_HOSTS:
        urls += [link] if link not in urls else []
    return urls


def fetch_openml(source: DatasetSource, target_dir: Path, options: FetchOptions) -> tuple[list[Path], bool]:
    """Fetch task.json, dataset.json and the ARFF; True when the ARFF's dataset id and md5 came
    from the registry or the API, False when only the mirror vouched for them."""
    ref = source.openml
    assert ref is not None
    api = options.openml_url.rstrip("/")
    label = f"dataset {source.name!r}"
    paths: list[Path] = []
    dataset_id = ref.dataset_id
    id_trusted = True
    if source.kind == "openml_task":
        task_id = ref.task_id or 0
        resolved: dict[str, Any] = {}

        def check_task(doc: dict[str, Any]) -> None:
            did, _, task_type = openml_task_info(doc, task_id, label)
            if ref.dataset_id is not None and did != ref.dataset_id:
                raise FetchError(f"{label}: OpenML task {task_id} uses dataset {did}, registry pins {ref.dataset_id}")
            _check_task_type(source, task_type)
            resolved["dataset_id"] = did

        task_path, from_api = _fetch_openml_json(
            source, "task.json", f"{api}/api/v1/json/task/{task_id}", target_dir, options, check_task
        )
        paths.append(task_path)
        dataset_id = resolved["dataset_id"]
        id_trusted = ref.dataset_id is not None or from_api
    assert dataset_id is not None
    info: dict[str, Any] = {}

    def check_data(doc: dict[str, Any]) -> None:
        info.update(openml_dataset_info(doc, dataset_id, label))
        if ref.md5 and info["md5_checksum"] != ref.md5:
            raise ChecksumMismatchError(
                f"{label}: OpenML dataset {dataset_id} now has md5 {info['md5_checksum']}, registry pins {ref.md5}"
            )

    data_path, from_api = _fetch_openml_json(
        source, "dataset.json", f"{api}/api/v1/json/data/{dataset_id}", target_dir, options, check_data
    )
    paths.append(data_path)
    arff = target_dir / "dataset.arff"
    md5 = ref.md5 or info["md5_checksum"]
    ensure_file(source, arff, f"{source.name}/dataset.arff", _arff_urls(api, info), Expectation(md5=md5), options)
    verified = id_trusted and (ref.md5 is not None or from_api)
    if not verified:
        log.warning("%s: unverified: the OpenML API could not be reached and only the mirror vouches for it", label)
    return paths + [arff], verified
