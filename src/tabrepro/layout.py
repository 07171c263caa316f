"""Where every file of a run lives: the one owner of the on-disk layout.

A run has three roots: the data directory (downloads, prepared tables, splits), the results
directory (job results, tables, scorecard, report, analysis and feature-sparsity outputs) and the
logs directory (one log per workflow job). `RunLayout` names every file under them once, as a
*pattern* with Snakemake-style wildcards (`{paper}`, `{dataset}`, `{model}`, `{fold}`, ...):

* the workflow's rules take a pattern as it is (`output: LAYOUT.job_metrics`), and Snakemake
  fills the wildcards;
* the CLI and the library fill it themselves (`LAYOUT.job_metrics.path(job)`).

So a rule's output and the path the command behind it writes can never disagree. Params builds the
layout from params.yaml's `paths` (and $TABREPRO_DATA_DIR / $TABREPRO_RESULTS_DIR); see
`tabrepro.config.Params.layout`.
"""

from __future__ import annotations

import dataclasses
import functools
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PathPattern", "RunLayout"]

# File names inside the directories below. Modules that write these files by name (training.py's
# RESULT_FILE / PREDICTIONS_FILE / WEIGHTS_FILE, data/table.py's TABLE_FILE, ...) must agree; a
# test checks that they do.
METRICS_FILE = "metrics.json"
STATE_DIR = "state"  # a configuration's resumable state, under its directory
REPEAT_FILE = "repeat.json"  # under a repeat's state directory: its test metrics once it finished
TUNING_DIR = "tuning"  # under a job's STATE_DIR: an in-job search's scores, config<i>.json each
FINISHED_FILE = "finished.json"  # under a fold's STATE_DIR: its result until its train_folds job ends
WEIGHTS_FILE = "weights.pt"
RESULT_FILE = "result.json"
PREDICTIONS_FILE = "predictions.npz"
# A job's test rows as scored: row ids, labels and each run's outputs (tabrepro.evaluation.job_predictions)
TEST_PREDICTIONS_FILE = "test_predictions.npz"
REPEAT_OUTPUTS_FILE = "test_outputs.npy"  # under a repeat's state directory, beside REPEAT_FILE
FINISHED_PREDICTIONS_FILE = "finished_predictions.npz"  # beside FINISHED_FILE, until the job ends
FETCH_STATUS_FILE = "fetch_status.json"
TABLE_FILE = "table.parquet"
SCHEMA_FILE = "schema.json"
SPLIT_MANIFEST_FILE = "splits.json"
SCORECARD_MARKDOWN_FILE, SCORECARD_CSV_FILE, SCORECARD_SUMMARY_FILE = "scorecard.md", "scorecard.csv", "summary.json"
SCORECARD_FILES = (SCORECARD_MARKDOWN_FILE, SCORECARD_CSV_FILE, SCORECARD_SUMMARY_FILE)
REPORT_INDEX_FILE = "index.html"


class PathPattern(str):
    """A path with `{wildcard}` fields. Snakemake takes it as the string it is; `path` fills it."""

    @property
    def wildcards(self) -> tuple[str, ...]:
        """The wildcard names, in order of appearance."""
        return _wildcard_names(str(self))

    def path(self, job: Any = None, **wildcards: Any) -> Path:
        """The pattern with every wildcard filled, from `job` (a tabrepro.config.Job: paper,
        dataset, model, fold) and/or keyword values; a missing or unknown wildcard is an error."""
        # a Job's fields are plain strings and ints: a shallow copy is what dataclasses.asdict
        # gives, at a fraction of its cost (the workflow fills thousands of paths per DAG)
        values = {
            **({f.name: getattr(job, f.name) for f in dataclasses.fields(job)} if job is not None else {}),
            **wildcards,
        }
        names = self.wildcards
        missing = [name for name in names if name not in values]
        if missing:
            raise ValueError(f"path pattern {str(self)!r} needs {', '.join(missing)}")
        unused = sorted(set(wildcards) - set(names))
        if unused:
            raise ValueError(f"path pattern {str(self)!r} has no wildcard {', '.join(unused)}")
        return Path(self.format(**values))


@functools.lru_cache(maxsize=1024)
def _wildcard_names(pattern: str) -> tuple[str, ...]:
    names = (field for _, field, _, _ in string.Formatter().parse(pattern) if field is not None)
    return tuple(dict.fromkeys(names))


class _Entry:
    """One file or directory of the layout: a template under one of the layout's roots."""

    def __init__(self, root: str, template: str) -> None:
        self.root = root
        self.template = template

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, layout: RunLayout | None, owner: type) -> Any:
        if layout is None:
            return self
        root = str(getattr(layout, self.root)).replace("{", "{{").replace("}", "}}")
        return PathPattern(f"{root}/{self.template}")


@dataclass(frozen=True)
class RunLayout:
    """Every path of a run, as patterns (`layout.job_metrics`) or filled (`.path(job)`)."""

    data: Path
    results: Path
    logs: Path

    def __post_init__(self) -> None:
        for root in ("data", "results", "logs"):  # one spelling of each root (no "./", no "/" at the end)
            object.__setattr__(self, root, Path(getattr(self, root)))

    # -- data: downloads, prepared tables, splits --------------------------------------------
    raw_dir = _Entry("data", "raw")
    fetch_status = _Entry("data", f"raw/{{source}}/{FETCH_STATUS_FILE}")
    # Written once every download was tried; the digest names the profile's source list.
    availability = _Entry("data", "raw/availability-{digest}.txt")
    processed_dir = _Entry("data", "processed/{source}")
    processed_table = _Entry("data", f"processed/{{source}}/{TABLE_FILE}")
    processed_schema = _Entry("data", f"processed/{{source}}/{SCHEMA_FILE}")
    split_dir = _Entry("data", "splits/{paper}/{dataset}")
    split_manifest = _Entry("data", f"splits/{{paper}}/{{dataset}}/{SPLIT_MANIFEST_FILE}")
    split_fold = _Entry("data", "splits/{paper}/{dataset}/fold{fold}.npy")

    # -- results: one directory per job, then what is built from them ------------------------
    job_dir = _Entry("results", "{paper}/{dataset}/{model}/fold{fold}")
    job_metrics = _Entry("results", f"{{paper}}/{{dataset}}/{{model}}/fold{{fold}}/{METRICS_FILE}")
    job_weights = _Entry("results", f"{{paper}}/{{dataset}}/{{model}}/fold{{fold}}/{WEIGHTS_FILE}")
    # Written by the job that writes metrics.json, just before it.
    job_test_predictions = _Entry("results", f"{{paper}}/{{dataset}}/{{model}}/fold{{fold}}/{TEST_PREDICTIONS_FILE}")
    # Per-configuration models (NPT's variants, BiSHop's trials) train their configurations in
    # train_batch jobs; each configuration writes its own directory (not declared to Snakemake, so
    # that a rerun batch keeps its finished configurations), then the batch its manifest.
    config_batch = _Entry("results", "{paper}/{dataset}/{model}/fold{fold}/batch{batch}.json")
    config_dir = _Entry("results", "{paper}/{dataset}/{model}/fold{fold}/config{config}")
    config_result = _Entry("results", f"{{paper}}/{{dataset}}/{{model}}/fold{{fold}}/config{{config}}/{RESULT_FILE}")
    config_predictions = _Entry(
        "results", f"{{paper}}/{{dataset}}/{{model}}/fold{{fold}}/config{{config}}/{PREDICTIONS_FILE}"
    )
    config_weights = _Entry("results", f"{{paper}}/{{dataset}}/{{model}}/fold{{fold}}/config{{config}}/{WEIGHTS_FILE}")
    tables_dir = _Entry("results", "tables/{paper}")
    table = _Entry("results", "tables/{paper}/{table}.{ext}")
    scorecard_dir = _Entry("results", "scorecard")
    scorecard_paper_dir = _Entry("results", "scorecard/{paper}")  # `tabrepro scorecard PAPER`
    scorecard_markdown = _Entry("results", f"scorecard/{SCORECARD_MARKDOWN_FILE}")
    scorecard_csv = _Entry("results", f"scorecard/{SCORECARD_CSV_FILE}")
    scorecard_summary = _Entry("results", f"scorecard/{SCORECARD_SUMMARY_FILE}")
    report_dir = _Entry("results", "report")
    report_index = _Entry("results", f"report/{REPORT_INDEX_FILE}")
    analysis_dir = _Entry("results", "analysis")
    analysis_fold_result = _Entry("results", f"analysis/{{experiment}}/{{dataset}}/fold{{fold}}/{RESULT_FILE}")
    analysis_lookup_result = _Entry("results", f"analysis/lookup/{{dataset}}/{RESULT_FILE}")
    sparsity_result = _Entry("results", "feature_sparsity/{paper}/{dataset}/{model}/fold{fold}.json")
    sparsity_curves_png = _Entry("results", "feature_sparsity/{paper}/curves.png")
    sparsity_curves_csv = _Entry("results", "feature_sparsity/{paper}/curves.csv")
    sparsity_summary = _Entry("results", "feature_sparsity/{paper}/summary.json")

    # -- logs: one per workflow job -------------------------------------------------------------
    fetch_log = _Entry("logs", "fetch/{source}.log")
    availability_log = _Entry("logs", "availability.log")
    prepare_log = _Entry("logs", "prepare/{source}.log")
    split_log = _Entry("logs", "split/{paper}/{dataset}.log")
    train_log = _Entry("logs", "train/{paper}/{dataset}/{model}/fold{fold}.log")
    train_folds_log = _Entry("logs", "train/{paper}/{dataset}/{model}/folds.log")
    config_batch_log = _Entry("logs", "train/{paper}/{dataset}/{model}/fold{fold}/batch{batch}.log")
    select_log = _Entry("logs", "train/{paper}/{dataset}/{model}/fold{fold}/select.log")
    tables_log = _Entry("logs", "tables/{paper}.log")
    scorecard_log = _Entry("logs", "scorecard.log")
    report_log = _Entry("logs", "report/html.log")
    analysis_fold_log = _Entry("logs", "analysis/{experiment}/{dataset}/fold{fold}.log")
    analysis_lookup_log = _Entry("logs", "analysis/lookup/{dataset}.log")
    sparsity_log = _Entry("logs", "feature_sparsity/{paper}/{dataset}/{model}/fold{fold}.log")
    sparsity_folds_log = _Entry("logs", "feature_sparsity/{paper}/{dataset}/{model}/folds.log")
    sparsity_plot_log = _Entry("logs", "feature_sparsity/{paper}/plot.log")

    @classmethod
    def entries(cls) -> dict[str, str]:
        """Every entry's name and template (relative to its root), in the order defined above."""
        return {
            name: f"{{{entry.root}}}/{entry.template}" for name, entry in vars(cls).items() if isinstance(entry, _Entry)
        }
