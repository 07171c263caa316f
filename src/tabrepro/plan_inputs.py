"""What the compute plan is built from: dataset shapes, and the jobs measured so far.

Dataset shapes come, first match wins, from a prepared table's schema.json (in the data
directories given), from the shipped calibration's recorded shapes (taken from prepared tables and
from the scale benchmark's stand-ins, so an install needs no data), or from the registry's
expected rows and features; datasets the registry gives no size for (the
OpenML suites) use approximate published sizes, marked as such. Split sizes follow the protocol's
fractions, of the subsample where the protocol draws one (`subsample_rows`); the table a job
loads is the whole one either way.

The jobs measured so far ship with the package as data (data/cost_calibration.json, written by
`tabrepro calibrate RECORDS_DIR` from a records directory and read back at run time): the package
never reads run records to plan. Measured jobs come from metrics.json files (every run's jobs
record their wall time and peak memory; the candidate configurations of a job are regenerated
with tabrepro.tuning.job_configs, which is deterministic, after checking the job's parameter digest) and from the scale
benchmark's JSON (one tiny configuration per model on the stand-ins). Each becomes a
costmodel.MeasuredJob: its work terms and what it took.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabrepro.config import DEFAULT_PARAMS_FILE, Job, Params, ParamsError
from tabrepro.costmodel import MeasuredJob, TableShape, family_of, job_terms
from tabrepro.data.registry import get_source
from tabrepro.job_spec import resolve_job
from tabrepro.layout import RunLayout
from tabrepro.models.registry import get_model_class
from tabrepro.provenance import hardware_key

__all__ = [
    "CALIBRATION_FILE",
    "CalibrationData",
    "DatasetFacts",
    "build_calibration",
    "calibration_inputs",
    "read_calibration",
    "facts_snapshot",
    "load_measured",
    "schema_facts",
    "split_sizes",
]

# The cost model's evidence as package data: recorded dataset shapes and every measured job.
CALIBRATION_FILE = Path(__file__).resolve().parent / "data" / "cost_calibration.json"
CALIBRATION_VERSION = 1


# Registry entries without a published size (OpenML tasks resolved at fetch time): approximate
# rows, features and classes of the datasets as the tabular benchmark publishes them. Used only
# when no prepared table or facts entry is at hand; the plan marks such rows "approx".
APPROXIMATE_SIZES: dict[str, tuple[int, int, int]] = {
    "jannis": (83733, 54, 4),
    "openml_361055_credit": (16714, 10, 2),
    "openml_361062_pol": (10082, 26, 2),
    "openml_361065_MagicTelescope": (13376, 10, 2),
    "openml_361073_pol": (15000, 26, 0),
    "openml_361074_elevators": (16599, 16, 0),
    "openml_361077_Ailerons": (13750, 33, 0),
    "openml_361079_house_16H": (22784, 16, 0),
    "openml_361081_Brazilian_houses": (10692, 11, 0),
    "openml_361093_analcatdata_supreme": (4052, 7, 0),
    "openml_361094_visualizing_soil": (8641, 4, 0),
    "openml_361099_Bike_Sharing_Demand": (17379, 11, 0),
    "openml_361104_SGEMM_GPU_kernel_performance": (241600, 9, 0),
    "openml_361273_Diabetes130US": (71090, 7, 2),
    "openml_361278_heloc": (10000, 22, 2),
    "openml_361280_abalone": (4177, 8, 0),
    "openml_361282_albert": (58252, 31, 2),
    "openml_361283_default-of-credit-card-clients": (13272, 21, 2),
    "openml_361286_compas-two-years": (4966, 11, 2),
    "openml_361288_abalone": (4177, 8, 0),
}


def schema_facts(schema: dict[str, Any]) -> dict[str, Any]:
    """Rows, raw features, encoded width, classes and fixed test rows of a schema.json."""
    target = schema["target"]
    features = [c for c in schema["columns"] if c["name"] != target]
    target_column = next(c for c in schema["columns"] if c["name"] == target)
    return {
        "n_rows": int(schema["n_rows"]),
        "n_features": len(features),
        "width": sum(len(c["levels"]) if c["kind"] == "categorical" else 1 for c in features),
        "n_classes": 0 if schema["task"] == "regression" else len(target_column["levels"]),
        "n_fixed_test_rows": int(schema.get("n_fixed_test_rows", 0)),
    }


class DatasetFacts:
    """Shapes of registry sources, from the best information at hand (see the module docstring)."""

    def __init__(
        self,
        data_dirs: Iterable[Path] = (),
        facts_file: Path | None = None,
        extra: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """`facts_file`: a facts file ({"datasets": {source: shape}}) to take recorded shapes from;
        `extra`: further recorded shapes (the shipped calibration's), which win."""
        self.data_dirs = [Path(d) for d in data_dirs]
        self.recorded: dict[str, dict[str, Any]] = {}
        if facts_file is not None and Path(facts_file).is_file():
            self.recorded.update(json.loads(Path(facts_file).read_text())["datasets"])
        self.recorded.update(extra or {})
        self._cache: dict[str, dict[str, Any]] = {}

    def facts(self, source: str) -> dict[str, Any]:
        if source not in self._cache:
            self._cache[source] = self._find(source)
        return self._cache[source]

    def _find(self, source: str) -> dict[str, Any]:
        for data_dir in self.data_dirs:
            path = RunLayout(data_dir, Path(), Path()).processed_schema.path(source=source)
            if path.is_file():
                return {**schema_facts(json.loads(path.read_text())), "origin": f"prepared ({path.parent})"}
        if source in self.recorded:
            return {**self.recorded[source], "origin": self.recorded[source].get("origin", "facts file")}
        registry = get_source(source)
        fixed = registry.fixed_test_tail_rows or sum(f.rows or 0 for f in registry.files if f.role == "test")
        n_classes = {"binary": 2, "regression": 0}.get(registry.task, 0)
        if registry.expected.rows and registry.expected.features:
            return {
                "n_rows": registry.expected.rows,
                "n_features": registry.expected.features,
                "width": registry.expected.features,
                "n_classes": n_classes or 3,
                "n_fixed_test_rows": fixed,
                "origin": "registry (width approx: no one-hot levels known)",
            }
        rows, features, classes = APPROXIMATE_SIZES.get(source, (10000, 20, n_classes))
        return {
            "n_rows": rows,
            "n_features": features,
            "width": features,
            "n_classes": classes,
            "n_fixed_test_rows": fixed,
            "origin": "approx (published size; not prepared here)",
        }

    def shape(self, params: Params, paper: str, dataset: str) -> TableShape:
        source = params.source_of(paper, dataset)
        facts = self.facts(source)
        train, val, test = split_sizes(params.protocol(paper, dataset), facts["n_rows"], facts["n_fixed_test_rows"])
        return TableShape(
            facts["n_rows"], train, val, test, facts["n_features"], facts["width"], facts["n_classes"], facts["origin"]
        )


def holdout_pool_rows(protocol: dict[str, Any], n_rows: int) -> int:
    """The rows a holdout split divides: all, or `subsample_rows` when the training fraction of
    all rows would exceed that many (the rule of tabrepro.splits._subsampled_rows)."""
    cap = protocol.get("subsample_rows")
    return n_rows if cap is None or protocol["train"] * n_rows <= cap else int(cap)


def split_sizes(protocol: dict[str, Any], n_rows: int, n_fixed_test: int) -> tuple[int, int, int]:
    """(train, validation, test) rows of fold 0 under a protocol (tabrepro.splits' arithmetic)."""
    kind = protocol["kind"]
    if kind == "kfold":
        test = n_rows // protocol["n_folds"]
        val = int(round(protocol["val_fraction"] * n_rows))
    elif kind == "holdout":
        n_rows = holdout_pool_rows(protocol, n_rows)
        test = int(round(protocol["test"] * n_rows))
        val = int(round(protocol["val"] * n_rows))
    else:
        test = n_fixed_test or int(0.2 * n_rows)
        val = int(round(protocol["val_fraction"] * (n_rows - test)))
    train = n_rows - test - val
    cap = protocol.get("max_train_rows")
    return (min(train, cap) if cap else train), val, test


# ----------------------------------------------------------------------------------------------
# measured jobs


@functools.cache
def _params(params_file: str, profile: str) -> Params | None:
    try:
        return Params.from_file(params_file, profile=profile)
    except ParamsError:
        return None


@functools.cache
def _candidates(params_file: str, profile: str, paper: str, dataset: str, model: str, task: str) -> list[dict]:
    """A measured job's configurations (every fold of a dataset x model has the same ones)."""
    from tabrepro.tuning import job_configs  # deferred: loads scipy

    job = Job(paper, dataset, model, 0)
    return job_configs(resolve_job(_params(params_file, profile), job), task)  # type: ignore[arg-type]  # called after _params gave Params


def _shape_of_run(result: dict[str, Any], facts: dict[str, Any]) -> TableShape:
    split = result["split"]
    rows = split["n_train"] + split["n_val"] + split["n_test"] + split.get("n_unused", 0)
    return TableShape(
        rows,
        split["n_train"],
        split["n_val"],
        split["n_test"],
        facts["n_features"],
        facts["width"],
        facts["n_classes"],
        facts["origin"],
    )


def _from_metrics(path: Path, params_file: Path, facts: DatasetFacts, origin: str) -> list[MeasuredJob]:
    result = json.loads(path.read_text())
    params = _params(str(params_file), result.get("profile", ""))
    if params is None:
        return []
    job = Job(result["paper"], result["dataset"], result["model"], int(result["fold"]))
    try:
        if params.job_digest(job) != result["params_digest"]:
            return []  # written under other parameters: its configurations cannot be regenerated
    except ParamsError:
        return []
    configs = _candidates(
        str(params_file), result.get("profile", ""), job.paper, job.dataset, job.model, result["task"]
    )
    shape = _shape_of_run(result, facts.facts(result["source"]))
    repeats = params.repeats(job.paper, job.dataset, job.model)
    label = f"{job.paper}/{job.dataset}/{job.model}/fold{job.fold}"
    family = family_of(job.model)

    gpu = _used_a_gpu(result)
    cpu = hardware_key(result.get("provenance"))
    if not get_model_class(job.model).per_config_jobs:
        work = job_terms(job.model, "train", configs, shape, repeats=repeats)
        return [
            MeasuredJob(
                label,
                family,
                work.terms,
                work.memory,
                float(result["wall_time_s"]),
                float(result["peak_memory_mb"]),
                origin,
                gpu,
                cpu,
            )
        ]
    # A per-configuration model's fold: its configurations' jobs plus the selection job, summed.
    terms: dict[str, float] = {}
    for config in configs:
        for key, value in job_terms(job.model, "train_config", [config], shape).terms.items():
            terms[key] = terms.get(key, 0.0) + value
    for key, value in job_terms(job.model, "select", configs[:1], shape, repeats=repeats).terms.items():
        terms[key] = terms.get(key, 0.0) + value
    memory = job_terms(job.model, "train_config", configs, shape).memory
    return [
        MeasuredJob(
            label,
            family,
            terms,
            memory,
            float(result["wall_time_s"]),
            float(result["peak_memory_mb"]),
            origin,
            gpu,
            cpu,
        )
    ]


def _used_a_gpu(result: dict[str, Any]) -> bool:
    """Whether a job computed on a GPU: its provenance names one it used, or (a per-configuration
    job whose select step ran before 2026-11-27, when select named only its own device) the
    selected configuration's fit says it trained on CUDA."""
    if ((result.get("provenance") or {}).get("gpu") or {}).get("used"):
        return True
    fit = (result.get("selection") or {}).get("fit_info") or {}
    return str(fit.get("device", "")).startswith("cuda")


def _from_bench(path: Path, facts: DatasetFacts) -> list[MeasuredJob]:
    """The scale benchmark's train stages. A stage stopped at its time limit gives no runtime (it
    would only be a lower bound) but its peak memory, which the first steps reach, still counts.
    A stage measured in parts (`bench --resume`) counts with its parts' summed time and largest
    peak: the job's own record covers its last part only."""
    payload = json.loads(path.read_text())
    machine = payload.get("machine") or {}
    cpu = f"{machine.get('cpu') or 'unknown CPU'} · {machine.get('isa') or 'unknown ISA'}"
    found = []
    for record in payload["records"]:
        job = record.get("job") or {}
        if (
            record["stage"] not in ("train", "train-config")
            or record["status"] not in ("ok", "timeout")
            or not job.get("config")
            or job.get("n_train") is None
        ):
            continue
        table = record.get("table") or facts.facts(record["source"])
        shape = TableShape(
            table["n_rows"],
            job["n_train"],
            job["n_val"],
            job["n_test"],
            table["n_features"],
            table["width"],
            table["n_classes"],
            "scale benchmark stand-in",
        )
        kind = "train" if record["stage"] == "train" else "train_config"
        work = job_terms(record["model"], kind, [job["config"]], shape)
        label = f"bench/{record['dataset']}@{record['rows']}/{record['model']}"
        in_parts = bool(record.get("parts"))
        if record["status"] == "timeout":
            wall = None
        else:
            wall = float(record["wall_s"] if in_parts else job.get("wall_time_s") or record["wall_s"])
        peak = float(job.get("peak_memory_mb") or record["peak_rss_mb"])
        if in_parts:
            peak = max(peak, record["peak_rss_mb"], record["tree_peak_rss_mb"])
        found.append(
            MeasuredJob(label, family_of(record["model"]), work.terms, work.memory, wall, peak, path.name, cpu=cpu)
        )
    return found


def load_measured(
    results_dirs: Iterable[Path], bench_files: Iterable[Path], params_file: Path, facts: DatasetFacts
) -> list[MeasuredJob]:
    """Every measured job, once (a record and the run it was copied from count once)."""
    jobs: dict[tuple, MeasuredJob] = {}
    for results_dir in results_dirs:
        for path in sorted(Path(results_dir).glob("*/*/*/fold*/metrics.json")):
            for job in _from_metrics(path, params_file, facts, str(results_dir)):
                jobs.setdefault((job.label, job.wall_s, job.peak_mb), job)
    for bench in bench_files:
        for job in _from_bench(Path(bench), facts):
            jobs.setdefault((job.label, job.wall_s, job.peak_mb), job)
    return list(jobs.values())


def facts_snapshot(facts: DatasetFacts, sources: Iterable[str], bench_files: Iterable[Path]) -> dict[str, Any]:
    """A facts file: every source whose shape is known from a prepared table or the benchmark."""
    datasets: dict[str, Any] = {}
    for bench in bench_files:
        for record in json.loads(Path(bench).read_text())["records"]:
            table = record.get("table")
            if table and record["rows"] == get_source(record["source"]).expected.rows:
                datasets[record["source"]] = {
                    **table,
                    "n_fixed_test_rows": table.get("n_fixed_test_rows", 0),
                    "origin": f"scale benchmark stand-in ({Path(bench).name})",
                }
    for source in sources:
        found = facts.facts(source)
        if found["origin"].startswith("prepared"):
            datasets[source] = {**found, "origin": "prepared table"}
    return {"note": "shapes of prepared tables (python -m tabrepro.plan --write-facts)", "datasets": datasets}


# ----------------------------------------------------------------------------------------------
# the shipped calibration: evidence as data


@dataclass(frozen=True)
class CalibrationData:
    """What the cost model is calibrated on: recorded dataset shapes and the measured jobs, in
    the order they were found (calibration is order-sensitive only in its float sums)."""

    datasets: dict[str, dict[str, Any]]
    measured: list[MeasuredJob]
    sources: dict[str, list[str]]


def calibration_inputs(records_dir: Path) -> dict[str, Any]:
    """The files a records directory calibrates on: every run's and every GPU measurement's
    results directory, the scale benchmarks and the facts file (absent ones left out)."""
    records_dir = Path(records_dir)
    facts = records_dir / "scale" / "dataset-facts.json"
    return {
        "results_dirs": sorted(records_dir.glob("runs/*/results")) + sorted(records_dir.glob("gpu/*/results")),
        "bench_files": sorted(records_dir.glob("scale/bench-*.json")),
        "facts_file": facts if facts.is_file() else None,
    }


def _relative(path: Path, root: Path) -> str:
    """A path as named in the calibration file: relative to the records directory's parent (the
    repository), so that the file names no place on the machine that wrote it."""
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(path).name


def build_calibration(records_dir: Path, params_file: Path = DEFAULT_PARAMS_FILE) -> dict[str, Any]:
    """The calibration file's content from a records directory (`tabrepro calibrate`): the facts
    file's shapes and every measured job of its runs, GPU measurements and scale benchmarks, the
    jobs' configurations regenerated from `params_file` under each record's profile."""
    records_dir = Path(records_dir)
    if not records_dir.is_dir():
        raise ParamsError(f"{records_dir}: no such records directory")
    inputs = calibration_inputs(records_dir)
    root = records_dir.resolve().parent
    facts = DatasetFacts([], inputs["facts_file"])
    jobs: dict[tuple, MeasuredJob] = {}
    for results_dir in inputs["results_dirs"]:
        origin = _relative(results_dir, root)
        for job in load_measured([results_dir], [], Path(params_file), facts):
            jobs.setdefault((job.label, job.wall_s, job.peak_mb), dataclasses.replace(job, origin=origin))
    for job in load_measured([], inputs["bench_files"], Path(params_file), facts):
        jobs.setdefault((job.label, job.wall_s, job.peak_mb), job)
    return {
        "version": CALIBRATION_VERSION,
        "note": "the compute plan's evidence, written by `tabrepro calibrate RECORDS_DIR`; do not edit by hand",
        "sources": {
            "results_dirs": [_relative(d, root) for d in inputs["results_dirs"]],
            "bench_files": [_relative(f, root) for f in inputs["bench_files"]],
            "facts_file": [_relative(inputs["facts_file"], root)] if inputs["facts_file"] else [],
        },
        "datasets": facts.recorded,
        "measured": [dataclasses.asdict(job) for job in jobs.values()],
    }


@functools.cache
def _read_calibration(path: str) -> CalibrationData:
    file = Path(path)
    try:
        payload = json.loads(file.read_text())
    except (OSError, ValueError) as error:
        message = f"{file}: cannot read the cost calibration ({error}); rewrite it with `tabrepro calibrate`"
        raise ParamsError(message) from None
    if payload.get("version") != CALIBRATION_VERSION:
        raise ParamsError(
            f"{file}: cost calibration version {payload.get('version')!r}, this tabrepro reads {CALIBRATION_VERSION}"
        )
    return CalibrationData(
        payload["datasets"], [MeasuredJob(**job) for job in payload["measured"]], payload.get("sources", {})
    )


def read_calibration(path: Path = CALIBRATION_FILE) -> CalibrationData:
    """The shipped (or another) calibration file, read once per process."""
    return _read_calibration(str(Path(path).resolve()))
