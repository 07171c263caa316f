"""`tabrepro list datasets|models|profiles`: what the project has, as aligned plain-text tables.

Answers the questions a new user asks before running anything: which datasets exist, which paper
uses each and whether it can be had here (embedded, a public download, a mirror only, or already
fetched); which models run where and how their jobs are laid out; what each profile runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlparse

from tabrepro.config import Params
from tabrepro.data.availability import read_fetch_status
from tabrepro.data.registry import get_source, load_registry
from tabrepro.models.registry import MODEL_REGISTRY, get_model_class

__all__ = ["format_table", "list_datasets", "list_models", "list_profiles"]


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:-1], widths)) + "  " + row[-1] for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def _papers_using(params: Params) -> dict[str, list[str]]:
    """Registry source -> 'paper:dataset' entries of params.yaml that read it."""
    using: dict[str, list[str]] = {}
    for paper in params.papers:
        for dataset, entry in params.paper(paper)["datasets"].items():
            label = paper if dataset == entry["source"] else f"{paper}:{dataset}"
            using.setdefault(entry["source"], []).append(label)
    return using


def _availability(params: Params, name: str) -> str:
    """Where the data comes from, and whether this checkout has it already."""
    from tabrepro.data.parse import required_raw_files  # deferred: loads pandas

    source = get_source(name)
    status = read_fetch_status(params.raw_dir(), name)
    if source.embedded:
        return "embedded (no download needed)"
    if status is not None and not status.ok:
        return f"fetch failed here: {status.error}"
    if all(path.is_file() for path in required_raw_files(source, params.raw_dir() / name)):
        return "fetched here"
    if source.is_openml:
        ref = source.openml
        what = f"task {ref.task_id}" if ref and ref.task_id else f"dataset {ref.dataset_id if ref else '?'}"
        return f"downloadable (OpenML {what})"
    urls = [f.url for f in source.table_files]
    if any(url is None for url in urls):
        return "mirror only (no public URL; `tabrepro fetch --mirror`)"
    hosts = sorted({urlparse(url).netloc for url in urls if url})
    return f"downloadable ({', '.join(hosts)})"


def list_datasets(params: Params) -> str:

    using = _papers_using(params)
    rows = []
    for name, source in sorted(load_registry().items()):
        rows_known = source.expected.rows or (
            sum(f.rows or 0 for f in source.table_files)  # every file's rows are known here
            if source.table_files and all(f.rows for f in source.table_files)
            else None
        )
        rows.append(
            (
                name,
                ", ".join(using.get(name, [])) or "-",
                source.task,
                f"{rows_known:,}" if rows_known else "?",
                _availability(params, name),
            )
        )
    return format_table(("DATASET", "PAPERS", "TASK", "ROWS", "AVAILABILITY"), rows)


def list_models(params: Params) -> str:

    rows = []
    for name, model_class in MODEL_REGISTRY.items():
        papers = [paper for paper in params.papers if name in params.all_models(paper)]
        layout = "one job per configuration" if model_class.per_config_jobs else "configurations in one job"
        rows.append((name, model_class.accelerator, layout, ", ".join(papers) or "-"))
    return format_table(("MODEL", "ACCELERATOR", "JOBS", "PAPERS"), rows)


def list_profiles(params: Params) -> str:
    rows = []
    for name, profile in params.raw["profiles"].items():
        view = Params(params.raw, source=params.source, profile=name)
        jobs = view.jobs()
        per_config = sum(view.n_configs(j.paper, j.dataset, j.model) for j in jobs if _per_config(j.model))
        marker = "*" if name == params.profile_name else " "
        rows.append((f"{marker}{name}", f"{len(jobs):,}", f"{per_config:,}", profile["description"]))
    table = format_table(("PROFILE", "JOBS", "CONFIG JOBS", "DESCRIPTION"), rows)
    return (
        table + "\n(* active profile; JOBS = dataset x model x fold results, CONFIG JOBS = the "
        "per-configuration jobs of NPT/BiSHop behind them)"
    )


def _per_config(model: str) -> bool:

    return get_model_class(model).per_config_jobs
