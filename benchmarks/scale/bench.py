"""Scale benchmark: wall time and peak memory of every stage on the full-size stand-ins.

    python -m benchmarks.scale.bench --rows-scale 0.01                    # a quick pass at 1 %
    nice -n 10 python -m benchmarks.scale.bench --json scale.json         # full size (hours)
    python -m benchmarks.scale.bench --datasets higgs --models xgboost,npt --stage-timeout 3600

A script that prints figures, not a timed test. For each stand-in (benchmarks.scale.standins) it
runs, each in its own process through the project's own CLI (`python -m tabrepro ...`), so the
real code paths are measured: `prepare`, `split`, and one train job per model family at a tiny
budget (one configuration; a few trees, one epoch, a few NPT steps, 50 BiSHop batches), which still loads the whole
table, encodes it, and scores the full validation and test sets. NPT and BiSHop run as the
workflow runs them (`train-config`, then `select`). Per stage it reports the wall time and the
peak resident memory of the stage's process (ru_maxrss from wait4) and of its process tree
(sampled from /proc), plus what the job recorded in its result file.

The benchmark writes its own params file (WORK/params.yaml: the repository's params.yaml plus a
profile `scale_bench` holding the tiny budgets, and BiSHop added to the NPT paper's models so it
runs on these datasets) and keeps all data and results under WORK, never in the project's data/
or results/. A stage past --stage-timeout is stopped and reported as a timeout with the memory
it had reached. With --json, results are rewritten after every stage and once a minute while a
stage runs, so a long background run leaves what it has measured so far.

A stage longer than one sitting (NPT or BiSHop scoring HIGGS on a CPU: the better part of a day)
is measured in parts: `--resume` goes on with the run its --json file records. Finished stages
are kept, not rerun; a train stage that was stopped (its time limit, or the benchmark killed with
it) goes on from the job's own checkpoints (a training state, a prediction pass's saved batches)
instead of starting afresh, and its record sums the parts' wall times, keeps their largest peak
and lists each part's commit and CPU. The sum slightly overstates one uninterrupted run: each part
starts a process and reloads the table, and work done after the job's last save is redone.
Where the next part may run on another machine that shares only the repository, `--carry DIR`
keeps a copy of the jobs' saved progress in DIR to commit, and copies it back on --resume
(benchmarks.scale.carry; files above its size limit, such as NPT-Base's training state, stay behind).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.paths import REPO_ROOT, pythonpath
from benchmarks.scale import carry
from benchmarks.scale.measure import Progress, StageResult, run_measured
from benchmarks.scale.standins import MIN_ROWS, STANDIN_DATASETS
from tabrepro.config import Job, Params
from tabrepro.data.registry import get_source
from tabrepro.data.standin import ALLOW_ENV, read_marker
from tabrepro.errors import InputError
from tabrepro.io import atomic_write, write_json
from tabrepro.layout import RunLayout

__all__ = ["BENCH_PROFILE", "DATASETS", "TINY_BUDGETS", "bench_params", "main"]

BENCH_PROFILE = "scale_bench"
PAPER = "npt"
# NPT paper dataset name -> registry source (the four large tables that have stand-ins)
DATASETS: dict[str, str] = {
    "higgs": "higgs",
    "poker_hand": "poker_hand",
    "forest_cover": "forest_cover",
    "income": "census_income_kdd",
}
DEFAULT_MODELS = ("xgboost", "lightgbm", "catboost", "random_forest", "knn", "mlp", "tabnet", "npt", "bishop")
PER_CONFIG_MODELS = ("npt", "bishop")
# A stage in these states was stopped before its end; --resume lets its job go on from its checkpoints.
STOPPED = ("running", "timeout")
# What a resumed run must share with the run it goes on with (the JSON header's keys).
RUN_SETTINGS = ("rows_scale", "threads", "seed", "settings")
# One configuration each, forced small: enough to load, encode, fit briefly and score every
# validation and test row. The architecture of the dataset's search space is otherwise kept.
TINY_BUDGETS: dict[str, dict[str, Any]] = {
    "xgboost": {"n_estimators": 10, "max_depth": 6, "learning_rate": 0.3},
    "lightgbm": {"n_estimators": 10, "max_depth": 6, "learning_rate": 0.3},
    "catboost": {"n_estimators": 10, "max_depth": 6, "learning_rate": 0.3},
    "gradient_boosting": {"n_estimators": 5, "max_depth": 3, "learning_rate": 0.3},
    "random_forest": {"n_estimators": 4, "max_features": "sqrt", "criterion": "gini"},
    "knn": {"n_neighbors": 5, "leaf_size": 30},
    "mlp": {"max_epochs": 1, "patience": 1},
    "tabnet": {"max_epochs": 1, "patience": 1},
    "npt": {"max_steps": 2, "checkpoint_every_steps": 1000},
    "bishop": {"max_epochs": 1, "batches_per_epoch": 50, "checkpoint_every_epochs": 1},  # HIGGS: 287k
}
BISHOP_SPACE = {"n_configs": 1, "params": {"checkpoint_every_epochs": 1}}  # the thesis' §4.1 default


def job_stages(model: str) -> tuple[str, ...]:
    """A train job's stages in the order they run: NPT and BiSHop as the workflow runs them
    (`train-config`, then `select`), every other model in one `train`."""
    return ("train-config", "select") if model in PER_CONFIG_MODELS else ("train",)


def bench_params(
    base: dict[str, Any],
    datasets: list[str],
    models: list[str],
    settings: Sequence[tuple[str, str, Any]] = (),
) -> dict[str, Any]:
    """The repository's params with the `scale_bench` profile (and BiSHop on the NPT datasets).

    `settings` (model, parameter, value) replace or add to a model's tiny budget, e.g. a forced
    evaluation batch size; Params validates them like any profile's parameters.
    """
    raw = copy.deepcopy(base)
    if "bishop" in models and "bishop" not in raw["papers"][PAPER]["models"]:
        raw["papers"][PAPER]["models"]["bishop"] = "BiSHop"
        # every NPT dataset's space, not just the benchmarked ones': with BiSHop among the paper's
        # models, every profile of this params file runs it wherever it runs `all` models
        for space in {entry["search_space"] for entry in raw["papers"][PAPER]["datasets"].values()}:
            raw["search_spaces"][space]["bishop"] = copy.deepcopy(BISHOP_SPACE)
    raw["profiles"][BENCH_PROFILE] = {
        "description": "scale benchmark: one tiny configuration per model on the stand-ins (benchmarks.scale.bench)",
        "max_configs": 1,
        "folds": [0],
        "model_overrides": {
            m: {
                "max_configs": 1,
                "params": {**TINY_BUDGETS[m], **{name: value for model, name, value in settings if model == m}},
                "reason": "scale benchmark: tiny budget",
            }
            for m in models
            if m in TINY_BUDGETS
        },
        "papers": {
            PAPER: {"datasets": list(datasets), "models": list(models)},
            **{p: {"datasets": [], "models": []} for p in raw["papers"] if p != PAPER},
        },
    }
    raw["profile"] = BENCH_PROFILE
    return raw


@dataclass
class Record:
    """One measured stage."""

    dataset: str
    source: str
    rows: int
    stage: str  # generate / prepare / split / train / train-config / select
    model: str | None
    status: str  # ok / failed / timeout / reused
    wall_s: float
    peak_rss_mb: float
    tree_peak_rss_mb: float
    job: dict[str, Any] = field(default_factory=dict)  # from metrics.json / result.json
    error: str = ""
    table: dict[str, Any] = field(default_factory=dict)  # the prepared table's shape (see table_facts)
    parts: list[dict[str, Any]] = field(default_factory=list)  # a resumed stage's parts (see _merged)
    # commit, CPU and ISA of the invocation that measured it (its last part): a stage first run in
    # a resumed invocation is not the run's first machine's when a later part goes on with it
    measured_on: dict[str, Any] = field(default_factory=dict)


def _own_package_first(existing: str | None) -> str:
    """PYTHONPATH for the stages: the directory holding this checkout's tabrepro package first.

    The stages run in the work directory, where a relative PYTHONPATH entry (`src`) no longer
    points at the checkout, and the interpreter may have another copy of tabrepro installed; the
    stages must run the code whose commit the benchmark records (`_machine()`).
    """
    return pythonpath(existing)


class Bench:
    """Runs the stages of one benchmark invocation and collects their records."""

    def __init__(self, args: argparse.Namespace) -> None:
        # what ran, taken once: a long run outlives commits made meanwhile in the same checkout
        self.machine = _machine()
        self.args = args
        self.work = Path(args.work).resolve()
        self.data_dir = self.work / "data"
        self.results_dir = self.work / "results"
        self.layout = RunLayout(self.data_dir, self.results_dir, self.work / "logs")
        self.params_path = self.work / "params.yaml"
        self.records: list[Record] = []
        self.params: Params | None = None  # the benchmark's parameters, once setup() validated them
        self.resuming: bool = getattr(args, "resume", False)
        self.first_machine: dict[str, Any] = self.machine  # where the run began (the resumed file's)
        self.resumed: list[dict[str, Any]] = []  # the machine of each later part of the run
        self.carry_dir: Path | None = getattr(args, "carry", None)
        self.carried = carry.Carried()  # what the last save() put in (or left out of) carry_dir
        self.env = {
            **os.environ,
            "PYTHONPATH": _own_package_first(os.environ.get("PYTHONPATH")),
            "TABREPRO_DATA_DIR": str(self.data_dir),
            "TABREPRO_RESULTS_DIR": str(self.results_dir),
            ALLOW_ENV: "1",
        }

    # ----------------------------------------------------------------- commands
    def _tabrepro(self, *arguments: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "tabrepro",
            "--params",
            str(self.params_path),
            "--profile",
            BENCH_PROFILE,
            "-q",
            *arguments,
        ]

    def _run(
        self, name: str, command: list[str], model: str | None = None, on_progress: Progress | None = None
    ) -> StageResult:
        log = self.work / "logs" / f"{name}.log"
        timeout = dict(self.args.model_timeout).get(model or "", self.args.stage_timeout)
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(command[1:])}", flush=True)
        if self.resuming and log.is_file():  # the log of the stopped part stays beside this part's
            log.rename(log.with_name(f"{name}.part-{time.strftime('%Y%m%d-%H%M%S')}.log"))
        return run_measured(
            command, env=self.env, cwd=self.work, timeout_s=timeout, log_path=log, on_progress=on_progress
        )

    def _stage(
        self,
        dataset: str,
        rows: int,
        stage: str,
        model: str | None,
        command: list[str],
        job_file: Path | None = None,
        going_on: Record | None = None,
    ) -> Record:
        """Run and record one stage; `going_on` is the stopped part of it this run continues."""
        name = ".".join(part for part in (dataset, model, stage) if part)

        def progress(wall_s: float, tree_peak_mb: float) -> None:  # from the sampler, while we wait
            running = Record(dataset, DATASETS[dataset], rows, stage, model, "running", wall_s, 0.0, tree_peak_mb)
            running.measured_on = self._where()
            self._put(self._merged(running, going_on))
            self.save()

        result = self._run(name, command, model, progress if self.args.json else None)
        return self._record(dataset, rows, stage, model, result, _job_summary(job_file) if job_file else None, going_on)

    def _record(
        self,
        dataset: str,
        rows: int,
        stage: str,
        model: str | None,
        result: StageResult,
        job: dict[str, Any] | None = None,
        going_on: Record | None = None,
    ) -> Record:
        error = "" if result.status == "ok" else result.output_tail[-1500:]
        record = Record(
            dataset,
            DATASETS[dataset],
            rows,
            stage,
            model,
            result.status,
            result.wall_s,
            result.peak_rss_mb,
            result.tree_peak_rss_mb,
            job or {},
            error,
            table_facts(
                self.layout.processed_schema.path(source=DATASETS[dataset]),
                self.layout.split_manifest.path(paper=PAPER, dataset=dataset),
            ),
        )
        record.measured_on = self._where()
        if model is not None and not record.job.get("config"):  # stopped early: what it was running
            record.job.update(
                {
                    "config": self._config(dataset, model),
                    **{k: record.table[k] for k in ("n_train", "n_val", "n_test") if k in record.table},
                }
            )
        record = self._merged(record, going_on)
        self._put(record)
        print(
            f"    -> {record.status}, {record.wall_s:.1f} s, peak RSS {record.peak_rss_mb / 1024:.2f} GiB "
            f"(tree {record.tree_peak_rss_mb / 1024:.2f} GiB)"
            + (f", {len(record.parts)} parts" if record.parts else ""),
            flush=True,
        )
        self.save()
        return record

    def _reused(self, dataset: str, rows: int, stage: str) -> None:
        if not self._finished(dataset, stage, None):  # a resumed run keeps the measured record
            self._put(Record(dataset, DATASETS[dataset], rows, stage, None, "reused", 0.0, 0.0, 0.0))

    # ----------------------------------------------------------------- records of a run in parts
    def _index(self, dataset: str, stage: str, model: str | None) -> int | None:
        for index, record in enumerate(self.records):
            if (record.dataset, record.stage, record.model) == (dataset, stage, model):
                return index
        return None

    def _put(self, record: Record) -> None:
        """Add a stage's record in place of the one it supersedes (its provisional record while it
        ran, or the record of a part measured earlier)."""
        index = self._index(record.dataset, record.stage, record.model)
        if index is None:
            self.records.append(record)
        else:
            self.records[index] = record

    def _earlier(self, dataset: str, stage: str, model: str | None) -> Record | None:
        """The stage's record from the run being resumed (never without --resume)."""
        index = self._index(dataset, stage, model) if self.resuming else None
        return None if index is None else self.records[index]

    def _finished(self, dataset: str, stage: str, model: str | None) -> bool:
        earlier = self._earlier(dataset, stage, model)
        return earlier is not None and earlier.status in ("ok", "reused")

    def _where(self) -> dict[str, Any]:
        """What a part names of the machine that measured it."""
        return {key: self.machine.get(key) for key in ("commit", "cpu", "isa")}

    def _part(self, record: Record, machine: dict[str, Any]) -> dict[str, Any]:
        return {
            "status": record.status,
            "wall_s": record.wall_s,
            "peak_rss_mb": record.peak_rss_mb,
            "tree_peak_rss_mb": record.tree_peak_rss_mb,
            "commit": machine.get("commit"),
            "cpu": machine.get("cpu"),
            "isa": machine.get("isa"),
        }

    def _merged(self, record: Record, going_on: Record | None) -> Record:
        """`record` (this part) as the whole stage: the parts' wall times summed, their largest
        peaks, and the parts listed; unchanged when nothing is being continued."""
        if going_on is None:
            return record
        # a record of before `measured_on` was recorded: the run's first machine, as it was assumed
        parts = going_on.parts or [self._part(going_on, going_on.measured_on or self.first_machine)]
        parts = [*parts, self._part(record, self.machine)]
        return Record(
            **{
                **asdict(record),
                "wall_s": round(sum(p["wall_s"] for p in parts), 2),
                "peak_rss_mb": max(p["peak_rss_mb"] for p in parts),
                "tree_peak_rss_mb": max(p["tree_peak_rss_mb"] for p in parts),
                "parts": parts,
            }
        )

    # ----------------------------------------------------------------- stages
    def rows_for(self, dataset: str) -> int:
        full = get_source(DATASETS[dataset]).expected.rows or 0
        return full if self.args.rows_scale >= 1 else max(MIN_ROWS, round(full * self.args.rows_scale))

    def data_stages(self, dataset: str, rows: int) -> bool:
        """Generate (unless a matching stand-in is there), prepare and split; False when one failed."""
        source = DATASETS[dataset]
        raw_dir = self.data_dir / "raw"
        marker = read_marker(raw_dir / source) if (raw_dir / source).is_dir() else None
        if marker is not None and marker.rows == rows and marker.seed == self.args.seed:
            self._reused(dataset, rows, "generate")
        else:
            command = [
                sys.executable,
                "-m",
                "benchmarks.scale.standins",
                "--dataset",
                source,
                "--rows",
                str(rows),
                "--seed",
                str(self.args.seed),
                "--out",
                str(raw_dir),
                "--force",
            ]
            if self._stage(dataset, rows, "generate", None, command).status != "ok":
                return False
        prepared = self._prepared(dataset, rows)
        if prepared and (self.args.reuse_data or all(self._finished(dataset, s, None) for s in ("prepare", "split"))):
            self._reused(dataset, rows, "prepare")
            self._reused(dataset, rows, "split")
            return True
        for stage, arguments in (("prepare", ("prepare", source)), ("split", ("split", PAPER, dataset))):
            if self._stage(dataset, rows, stage, None, self._tabrepro(*arguments)).status != "ok":
                return False
        return True

    def _prepared(self, dataset: str, rows: int) -> bool:
        schema = self.layout.processed_schema.path(source=DATASETS[dataset])
        split = self.layout.split_fold.path(paper=PAPER, dataset=dataset, fold=0)
        return schema.is_file() and split.is_file() and json.loads(schema.read_text())["n_rows"] == rows

    def train_stages(self, dataset: str, rows: int, model: str) -> None:
        job = Job(PAPER, dataset, model, 0)
        threads = ("--threads", str(self.args.threads))
        stage, *then = job_stages(model)
        if then:  # one configuration's fit, then select
            result_file = self.layout.config_result.path(job, config=0)
            command = self._tabrepro(stage, PAPER, dataset, model, "0", "0", *threads)
        else:
            result_file = self.layout.job_metrics.path(job)
            command = self._tabrepro(stage, PAPER, dataset, model, "0", *threads)
        if not self._finished(dataset, stage, model):
            going_on = self._earlier(dataset, stage, model)
            if going_on is None or going_on.status not in STOPPED:
                # A fresh job: a state file left by an earlier, stopped benchmark in the same work
                # directory would make the job resume (an NPT run stopped after its steps resumed
                # with none left and measured one evaluation pass, not training).
                shutil.rmtree(self.layout.job_dir.path(job), ignore_errors=True)
                going_on = None
            record = self._stage(dataset, rows, stage, model, command, result_file, going_on)
            if record.status != "ok":
                return
        for stage in then:
            if not self._finished(dataset, stage, model):
                command = self._tabrepro(stage, PAPER, dataset, model, "0", *threads)
                self._stage(dataset, rows, stage, model, command, self.layout.job_metrics.path(job))

    def _config(self, dataset: str, model: str) -> dict[str, Any]:
        """The one configuration the job fits (tabrepro.tuning.job_configs, as the job itself)."""
        from tabrepro.config import Job
        from tabrepro.job_spec import resolve_job
        from tabrepro.tuning import job_configs

        assert self.params is not None
        task = get_source(DATASETS[dataset]).task
        return job_configs(resolve_job(self.params, Job(PAPER, dataset, model, 0)), task)[0]

    # ----------------------------------------------------------------- driver
    def setup(self) -> None:
        """Validate the benchmark's parameters (and the run --resume goes on with) before anything
        is written; an InputError names what is wrong."""
        base = yaml.safe_load(Path(self.args.params).read_text())
        raw = bench_params(base, self.args.datasets, self.args.models, self.args.set)
        self.params = Params(raw, source=str(self.params_path))
        if self.resuming:
            self._load_earlier_run()
        self.work.mkdir(parents=True, exist_ok=True)
        atomic_write(self.params_path, yaml.safe_dump(raw, sort_keys=False))
        if self.resuming and self.carry_dir is not None:
            restored = carry.restore(self.carry_dir, self.work)
            print(f"--carry: {len(restored)} saved file(s) of the stopped stages copied in from {self.carry_dir}")

    def _load_earlier_run(self) -> None:
        path = self.args.json
        if path is None or not Path(path).is_file():
            raise InputError(f"--resume goes on with the run a --json file records; no such file: {path}")
        earlier = json.loads(Path(path).read_text(encoding="utf-8"))
        now = self._header()
        for key in RUN_SETTINGS:
            if earlier.get(key) != now[key]:
                raise InputError(f"--resume: {path} records a run with {key} {earlier.get(key)!r}, not {now[key]!r}")
        try:
            records = [Record(**record) for record in earlier["records"]]
            self.first_machine = earlier["machine"]
        except (KeyError, TypeError) as error:
            raise InputError(f"--resume: {path} is not a record of this benchmark ({error})") from None
        self.resumed = [*earlier.get("resumed", []), self.machine]
        self.records = records

    def _header(self) -> dict[str, Any]:
        return {
            "rows_scale": self.args.rows_scale,
            "threads": self.args.threads,
            "seed": self.args.seed,
            "stage_timeout_s": self.args.stage_timeout,
            # --set overrides of the tiny budgets (memory options such as recompute_blocks change
            # what a stage measures, so the record names them)
            "settings": [f"{model}.{name}={json.dumps(value)}" for model, name, value in self.args.set],
        }

    def run(self) -> None:
        if self.params is None:
            self.setup()
        for dataset in self.args.datasets:
            rows = self.rows_for(dataset)
            if not self.data_stages(dataset, rows):
                continue
            for model in self.args.models:
                self.train_stages(dataset, rows, model)

    def _unfinished_job_dirs(self) -> list[Path]:
        """The job directories whose progress is worth carrying: not those whose last stage has
        finished (a finished BiSHop job on HIGGS left 212 MB of weights and predictions)."""
        return [
            self.layout.job_dir.path(Job(PAPER, dataset, model, 0))
            for dataset in self.args.datasets
            for model in self.args.models
            if not self._finished(dataset, job_stages(model)[-1], model)
        ]

    def save(self) -> None:
        if self.args.json is None:
            return
        if self.carry_dir is not None:  # before the record that names the progress it holds
            self.carried = carry.mirror(self.work, self._unfinished_job_dirs(), self.carry_dir)
        payload = {
            **self._header(),
            "machine": self.first_machine,
            **({"resumed": self.resumed} if self.resumed else {}),  # later parts' machines, in order
            "records": [asdict(r) for r in self.records],
        }
        write_json(Path(self.args.json), payload, indent=1, sort_keys=False)


def table_facts(schema_path: Path, splits_path: Path | None = None) -> dict[str, Any]:
    """Rows, raw features, encoded width (one-hot levels), classes and fold 0's split sizes of a
    prepared table."""
    if not schema_path.is_file():
        return {}
    schema = json.loads(schema_path.read_text())
    split: dict[str, int] = {}
    if splits_path is not None and splits_path.is_file():
        fold = json.loads(splits_path.read_text())["folds"][0]
        split = {f"n_{role}": int(fold[role]) for role in ("train", "val", "test")}
    target = schema["target"]
    features = [c for c in schema["columns"] if c["name"] != target]
    target_column = next(c for c in schema["columns"] if c["name"] == target)
    return {
        "n_rows": schema["n_rows"],
        "n_features": len(features),
        "width": sum(len(c["levels"]) if c["kind"] == "categorical" else 1 for c in features),
        "n_classes": 0 if schema["task"] == "regression" else len(target_column["levels"]),
        "n_categorical": sum(c["kind"] == "categorical" for c in features),
        "n_fixed_test_rows": int(schema.get("n_fixed_test_rows", 0)),
        **split,
    }


def _job_summary(path: Path) -> dict[str, Any]:
    """What a finished job recorded about itself (empty when it wrote nothing)."""
    if not path.is_file():
        return {}
    result = json.loads(path.read_text())
    split = result.get("split", {})
    return {
        "wall_time_s": result.get("wall_time_s"),
        "peak_memory_mb": result.get("peak_memory_mb"),
        "n_train": split.get("n_train"),
        "n_val": split.get("n_val"),
        "n_test": split.get("n_test"),
        "metrics": result.get("metrics", {}),
        "config": result.get("selected_config", result.get("config")),
        "fit_info": result.get("fit_info") or (result.get("selection") or {}).get("fit_info"),
    }


def _machine() -> dict[str, Any]:
    from tabrepro.provenance import provenance

    info = provenance(threads=1)
    memory = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) // 1024
    except OSError:
        pass
    return {
        "cpu": info.get("cpu", {}).get("model"),
        "isa": info.get("cpu", {}).get("isa_level"),
        "cores": os.cpu_count(),
        "memory_mb": memory,
        "platform": platform.platform(),
        "commit": info.get("git_commit"),
    }


# ---------------------------------------------------------------------------------- printing
def _gib(mb: float) -> str:
    return f"{mb / 1024:.2f}" if mb else "-"


def format_table(records: list[Record]) -> str:
    """Markdown: one row per stage, with the job's own recorded time and peak where it wrote one."""
    lines = [
        "| dataset | rows | stage | model | status | wall (s) | peak RSS (GiB) | tree peak (GiB) | job-recorded s / GiB |",  # noqa: E501
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        recorded = ""
        if r.job.get("wall_time_s") is not None:
            recorded = f"{r.job['wall_time_s']:.1f} / {_gib(r.job.get('peak_memory_mb') or 0)}"
        lines.append(
            f"| {r.dataset} | {r.rows:,} | {r.stage} | {r.model or ''} | {r.status} | {r.wall_s:.1f} | "
            f"{_gib(r.peak_rss_mb)} | {_gib(r.tree_peak_rss_mb)} | {recorded} |"
        )
    return "\n".join(lines)


def _names(text: str, known: tuple[str, ...], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown) or '(none)'}; known: {', '.join(known)}")
    return names


def _model_timeout(text: str) -> tuple[str, float]:
    model, _, seconds = text.partition("=")
    if model not in TINY_BUDGETS:
        raise argparse.ArgumentTypeError(f"unknown model {model!r}; known: {', '.join(TINY_BUDGETS)}")
    try:
        return model, float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MODEL=SECONDS") from None


def _setting(text: str) -> tuple[str, str, Any]:
    target, equals, value = text.partition("=")
    model, dot, name = target.partition(".")
    if not (equals and dot and name):
        raise argparse.ArgumentTypeError(f"{text!r}: expected MODEL.PARAM=VALUE")
    if model not in TINY_BUDGETS:
        raise argparse.ArgumentTypeError(f"unknown model {model!r}; known: {', '.join(TINY_BUDGETS)}")
    return model, name, yaml.safe_load(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--datasets",
        type=lambda t: _names(t, tuple(DATASETS), "dataset"),
        default=list(DATASETS),
        help=f"comma-separated NPT dataset names (default: {','.join(DATASETS)})",
    )
    parser.add_argument(
        "--models",
        type=lambda t: _names(t, tuple(TINY_BUDGETS), "model"),
        default=list(DEFAULT_MODELS),
        help=f"comma-separated models (default: {','.join(DEFAULT_MODELS)})",
    )
    parser.add_argument(
        "--rows-scale", type=float, default=1.0, help="fraction of each dataset's full size (default 1)"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads per train job (default 1, as the rules)")
    parser.add_argument("--seed", type=int, default=0, help="stand-in seed (default 0)")
    parser.add_argument("--stage-timeout", type=float, default=None, help="seconds after which a stage is stopped")
    parser.add_argument(
        "--model-timeout",
        type=_model_timeout,
        action="append",
        default=[],
        metavar="MODEL=SECONDS",
        help="a time limit for one model's stages (repeatable), e.g. npt=3600",
    )
    parser.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=[],
        metavar="MODEL.PARAM=VALUE",
        help="change one parameter of a model's tiny budget (repeatable; YAML value), e.g. bishop.eval_batch_size=7",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("scale-bench"),
        help="working directory for stand-ins, tables, splits, results, logs (default ./scale-bench)",
    )
    parser.add_argument("--params", type=Path, default=REPO_ROOT / "params.yaml", help="params file to extend")
    parser.add_argument(
        "--reuse-data",
        action="store_true",
        help="skip prepare and split when the work directory already has them for this size",
    )
    parser.add_argument("--json", type=Path, help="write every record here (rewritten after each stage)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run the --json file records: keep its finished stages, continue a stopped "
        "train stage from its job's checkpoints (its parts' times are summed)",
    )
    parser.add_argument(
        "--carry",
        type=Path,
        metavar="DIR",
        help="keep a copy of the jobs' saved progress (files up to "
        f"{carry.MAX_FILE_MB:.0f} MB) in DIR, to commit when the next part may run on another machine; "
        "--resume copies it back first (needs --json)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.rows_scale <= 1:
        print(f"benchmarks.scale.bench: error: --rows-scale must be in (0, 1], got {args.rows_scale}", file=sys.stderr)
        return 2
    if args.carry is not None and args.json is None:
        print("benchmarks.scale.bench: error: --carry needs --json (the run it belongs to)", file=sys.stderr)
        return 2
    unused = sorted({f"{model}.{name}" for model, name, _ in args.set if model not in args.models})
    if unused:
        print(f"benchmarks.scale.bench: error: --set {', '.join(unused)}: model not in --models", file=sys.stderr)
        return 2
    assert set(DATASETS.values()) <= set(STANDIN_DATASETS)
    bench = Bench(args)
    try:
        bench.setup()
    except InputError as error:
        print(f"benchmarks.scale.bench: error: {error}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # stops the running stage too
    try:
        bench.run()
    finally:
        bench.save()
        print()
        print(format_table(bench.records))
        if bench.carry_dir is not None and bench.carried.too_large:
            print(f"--carry: not copied (over {carry.MAX_FILE_MB:.0f} MB): {', '.join(bench.carried.too_large)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
