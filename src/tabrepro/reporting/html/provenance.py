"""Provenance: commits, package versions, the profile, and the hardware each result ran on."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tabrepro.provenance import UNRECORDED, hardware_key, provenance
from tabrepro.reporting.html.page import Page, table_html
from tabrepro.reporting.tables import DASH


def provenance_section(page: Page, params: Any, records: list[dict[str, Any]]) -> None:

    page.section("provenance", "Provenance")
    current = provenance()
    commits: dict[str, int] = {}
    versions: dict[str, set[str]] = {}
    for record in records:
        info = record.get("provenance") or {}
        commit = info.get("git_commit", "unknown")
        commits[commit] = commits.get(commit, 0) + 1
        for name, version in (info.get("packages") or {}).items():
            versions.setdefault(name, set()).add(str(version))
    params_path = Path(getattr(params, "source", "params.yaml"))
    digest = hashlib.sha256(params_path.read_bytes()).hexdigest()[:16] if params_path.is_file() else DASH
    page.add(
        table_html(
            ["Item", "Value"],
            [
                ["Profile", f"{params.profile_name}: {params.profile.get('description', '')}"],
                ["Root seed", params.seed],
                ["params.yaml sha256 (first 16)", digest],
                ["Report built at commit", current["git_commit"]],
                ["Platform", current["platform"]],
                ["Report built on", hardware_key(current)],
                ["Result files", len(records)],
            ],
            1,
        )
    )
    hardware_block(page, records)
    page.add("<p>Commits the results were produced at (result files per commit):</p>")
    page.add(table_html(["Commit", "Results"], sorted(commits.items()) or [[DASH, 0]], 1))
    rows = []
    for name, version in sorted(current["packages"].items()):
        seen = sorted(versions.get(name, set()))
        rows.append([name, version, ", ".join(seen) or DASH])
    page.add(table_html(["Package", "Version (report)", "Versions in results"], rows, 1))


def hardware_block(page: Page, records: list[dict[str, Any]]) -> None:
    """Which results ran on which CPU type / ISA level / GPU, with a warning when they differ:
    the same config gives bit-identical results only on the same hardware."""

    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        info = record.get("provenance") or {}
        group = groups.setdefault(hardware_key(info), {"count": 0, "threads": set(), "results": {}})
        group["count"] += 1
        if info.get("threads") is not None:
            group["threads"].add(f"{info['threads']}" + ("" if info.get("threads_source") == "job" else "?"))
        label, fold = _result_label(record)
        group["results"].setdefault(label, set()).update([] if fold is None else [fold])
    page.add('<h3 id="provenance-hardware">Hardware the results ran on</h3>')
    if not groups:
        page.empty("No result files.")
        return
    if len(groups) > 1:
        page.add(
            f'<p class="warning"><strong>Results from {len(groups)} different hardware '
            f"configurations{' (or unrecorded)' if UNRECORDED in groups else ''}.</strong> "
            "The same config gives bit-identical results only on the same CPU type (and GPU), "
            "so results below that ran on different hardware may differ in their last digits, "
            "and reruns elsewhere need not reproduce them exactly.</p>"
        )
    elif UNRECORDED in groups:
        page.add(
            '<p class="warning">These results do not record their CPU (written before '
            "provenance did): whether they all ran on the same hardware cannot be told.</p>"
        )
    page.note(
        "CPU model and highest instruction-set level (AVX2, AVX-512, AVX-512 BF16, AMX) the "
        "libraries could dispatch to, and the GPU when the job computed on one. Threads: the "
        "job's thread limit ('?' where only the process default was recorded)."
    )
    rows = []
    for key, group in sorted(groups.items(), key=lambda item: -item[1]["count"]):
        which = "; ".join(
            label + (f" (fold{'s' * (len(folds) > 1)} {_fold_ranges(folds)})" if folds else "")
            for label, folds in sorted(group["results"].items())
        )
        rows.append([key, group["count"], ", ".join(sorted(group["threads"])) or DASH, which])
    page.add(table_html(["CPU · ISA level · GPU", "Result files", "Threads", "Which results"], rows, 1))


def _result_label(record: Mapping[str, Any]) -> tuple[str, int | None]:
    """A result's name without its fold (e.g. 'npt/breast_cancer/knn'), and its fold."""
    fold = record.get("fold")
    fold = int(fold) if isinstance(fold, (int, np.integer)) else None
    if "experiment" in record:
        parts = ["analysis", record.get("experiment"), record.get("dataset"), record.get("model")]
    else:
        parts = [record.get("paper"), record.get("dataset"), record.get("model")]
    return "/".join(str(p) for p in parts if p is not None), fold


def _fold_ranges(folds: Iterable[int]) -> str:
    """0, 1, 2, 3, 5 -> '0–3, 5'."""
    spans: list[list[int]] = []
    for fold in sorted(folds):
        if spans and fold == spans[-1][1] + 1:
            spans[-1][1] = fold
        else:
            spans.append([fold, fold])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)
