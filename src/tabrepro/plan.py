"""Compute plan: what a profile will cost, per paper x dataset x model, and what each job should ask for.

    python -m tabrepro.plan --profile paper          # the table and totals
    python -m tabrepro.plan --compare                # predicted vs measured, for every measured job
    python -m tabrepro.plan --measured ../run/results --bench bench-full.json   # more evidence
    python -m tabrepro.plan --readme docs/results/plan.md   # the generated plan page (--check: current?)
    python -m tabrepro.plan --write-calibration records     # rewrite the shipped calibration

For every job of the profile (tabrepro.config.Params.jobs; per-configuration models get one job
per configuration plus a selection job, as in the workflow) it takes the candidate
configurations the job will fit (tabrepro.tuning.job_configs, the same deterministic lists the
jobs use), the table's shape (tabrepro.plan_inputs.DatasetFacts) and the cost model
(tabrepro.costmodel) calibrated on the measured jobs shipped with the package
(data/cost_calibration.json, tabrepro.plan_inputs) and any further ones given, and adds up configurations,
fits, CPU-hours, GPU-hours and peak memory. The workflow's requests come from the same estimates
(tabrepro.resources, under params.yaml's `resources` policy), so Slurm requests and the plan
cannot disagree.

What the numbers are: CPU-hours at one thread on the machines the measurements come from; GPU
jobs (NPT, BiSHop, TabNet, FT-Transformer, ResNet) are estimated from their floating-point work
and steps at GPU rates calibrated on the jobs measured on a GPU (the calibration's GPU jobs), pulled
toward an assumed rate (costmodel.GpuAssumptions; --gpu-tflops), which stands alone for a family
no GPU job measured. Early-stopped training is estimated at 3 x patience epochs; resource requests use the
maximum epochs. `--compare` prints how far the model is from each measured job, in sample and
with each dataset x model group left out of the calibration.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tabrepro.config import DEFAULT_PARAMS_FILE, Job, Params
from tabrepro.costmodel import (
    GPU_FAMILIES,
    Calibration,
    CostModel,
    GpuAssumptions,
    JobWork,
    MeasuredJob,
    TableShape,
    calibrate,
    family_of,
    job_terms,
)
from tabrepro.data.registry import get_source, load_registry
from tabrepro.errors import InputError
from tabrepro.io import atomic_write, write_json
from tabrepro.job_spec import resolve_job
from tabrepro.models.registry import get_model_class
from tabrepro.plan_inputs import (
    CALIBRATION_FILE,
    DatasetFacts,
    build_calibration,
    facts_snapshot,
    load_measured,
    read_calibration,
)
from tabrepro.readme_blocks import replace_block
from tabrepro.resource_policy import config_batches, fold_groups, policy

DEFAULT_GPU = GpuAssumptions()  # frozen: safe to share as a default

__all__ = [
    "JobEstimate",
    "PlanRow",
    "Planner",
    "default_planner",
    "run_plan",
    "readme_block",
    "update_readme",
    "write_calibration",
    "main",
]


@dataclass(frozen=True)
class JobEstimate:
    """One workflow job's predicted cost (seconds on one thread / one GPU, peak MiB)."""

    kind: str  # train, train_config or select
    family: str
    gpu: bool
    cpu_seconds: float
    gpu_seconds: float
    peak_mb: float
    n_fits: int


@dataclass
class PlanRow:
    """Totals of one paper x dataset x model."""

    paper: str
    dataset: str
    model: str
    configs: int
    folds: int
    fits: int
    jobs: int
    cpu_hours: float
    gpu_hours: float
    peak_mb: float
    shape: TableShape


class Planner:
    """Estimates for the jobs of one Params (profile), with one calibrated cost model."""

    def __init__(self, params: Params, model: CostModel, facts: DatasetFacts) -> None:
        self.params, self.model, self.facts = params, model, facts
        self._configs: dict[tuple[str, str, str], list[dict]] = {}

    def configs(self, paper: str, dataset: str, model: str) -> list[dict]:
        """The candidate configurations (shared by all folds of a dataset x model)."""
        key = (paper, dataset, model)
        if key not in self._configs:
            from tabrepro.tuning import job_configs  # deferred: loads scipy

            task = get_source(self.params.source_of(paper, dataset)).task
            self._configs[key] = job_configs(resolve_job(self.params, Job(paper, dataset, model, 0)), task)
        return self._configs[key]

    def work(self, job: Job, kind: str, config: int | None = None, *, bound: bool = False) -> JobWork:
        configs = self.configs(job.paper, job.dataset, job.model)
        shape = self.facts.shape(self.params, job.paper, job.dataset)
        repeats = self.params.repeats(job.paper, job.dataset, job.model)
        chosen = configs if kind == "train" else [configs[config or 0]] if kind == "train_config" else configs
        return job_terms(job.model, kind, chosen, shape, repeats=repeats, bound=bound)

    def estimate(self, job: Job, kind: str, config: int | None = None, *, bound: bool = False) -> JobEstimate:
        family = family_of(job.model)
        work = self.work(job, kind, config, bound=bound)
        gpu = family in GPU_FAMILIES
        return JobEstimate(
            kind,
            family,
            gpu,
            self.model.cpu_seconds(family, work.terms),
            self.model.gpu_seconds(family, work.terms) if gpu else 0.0,
            self.model.peak_mb(family, work.memory),
            work.n_fits,
        )

    def job_kinds(self, job: Job) -> list[tuple[str, int | None]]:
        """The workflow jobs behind one fold-level job: (kind, config) pairs."""

        if not get_model_class(job.model).per_config_jobs:
            return [("train", None)]
        n = self.params.n_configs(job.paper, job.dataset, job.model)
        return [("train_config", c) for c in range(n)] + [("select", None)]

    def workflow_jobs(self, job: Job) -> int:
        """How many workflow jobs one fold-level job takes: 1 (train), or its train_batch jobs
        (`configs_per_job` configurations each) plus the selection. (The folds of a train_folds
        job share one: see `rows`.)"""

        if not get_model_class(job.model).per_config_jobs:
            return 1
        return len(config_batches(self.params, policy(self.params), job.paper, job.dataset, job.model)) + 1

    def rows(self) -> list[PlanRow]:
        """One row per paper x dataset x model of the profile (folds of one row cost the same)."""

        groups: dict[tuple[str, str, str], list[Job]] = {}
        for job in self.params.jobs():
            groups.setdefault((job.paper, job.dataset, job.model), []).append(job)
        together = {(g.paper, g.dataset, m) for g in fold_groups(self.params, policy(self.params)) for m in g.models}
        rows = []
        for (paper, dataset, model), jobs in groups.items():
            folds = len(jobs)
            estimates = [self.estimate(jobs[0], kind, config) for kind, config in self.job_kinds(jobs[0])]
            rows.append(
                PlanRow(
                    paper,
                    dataset,
                    model,
                    configs=self.params.n_configs(paper, dataset, model),
                    folds=folds,
                    fits=folds * sum(e.n_fits for e in estimates),
                    jobs=1 if (paper, dataset, model) in together else folds * self.workflow_jobs(jobs[0]),
                    cpu_hours=folds * sum(0.0 if e.gpu else e.cpu_seconds for e in estimates) / 3600,
                    gpu_hours=folds * sum(e.gpu_seconds for e in estimates) / 3600,
                    peak_mb=max(e.peak_mb for e in estimates),
                    shape=self.facts.shape(self.params, paper, dataset),
                )
            )
        return rows


def shipped_facts(data_dirs: Sequence[Path] = (), calibration_file: Path = CALIBRATION_FILE) -> DatasetFacts:
    """Dataset shapes from these data directories' prepared tables, else the calibration's."""
    return DatasetFacts(data_dirs, None, read_calibration(calibration_file).datasets)


def measured_jobs(
    facts: DatasetFacts,
    params_file: Path,
    measured_dirs: Sequence[Path] = (),
    bench_files: Sequence[Path] = (),
    calibration_file: Path = CALIBRATION_FILE,
) -> list[MeasuredJob]:
    """The calibration's measured jobs, then those of further runs and benchmarks (each once)."""
    jobs = {(j.label, j.wall_s, j.peak_mb): j for j in read_calibration(calibration_file).measured}
    for job in (
        load_measured(measured_dirs, bench_files, Path(params_file), facts) if (measured_dirs or bench_files) else []
    ):
        jobs.setdefault((job.label, job.wall_s, job.peak_mb), job)
    return list(jobs.values())


def default_planner(
    params: Params,
    *,
    data_dirs: Sequence[Path] = (),
    gpu: GpuAssumptions = DEFAULT_GPU,
    calibration_file: Path = CALIBRATION_FILE,
) -> Planner:
    """A planner calibrated on the shipped calibration (no run record is read)."""
    facts = shipped_facts([params.data_dir, *data_dirs], calibration_file)
    measured = read_calibration(calibration_file).measured
    return Planner(params, CostModel(calibrate(measured, gpu), gpu), facts)


# ----------------------------------------------------------------------------------------------
# printing


def _hours(value: float) -> str:
    if value == 0:
        return "-"
    return f"{value:,.1f}" if value >= 0.1 else f"{value * 60:.1f} min"


def format_plan(rows: list[PlanRow], params: Params, model: CostModel) -> str:
    lines = [
        f"Compute plan for profile {params.profile_name!r} ({params.profile['description']})",
        f"{gpu_basis(model)}; {cpu_basis(model)}.",
        "",
        "| paper | dataset | model | configs | folds | fits | jobs | CPU-h | GPU-h | peak GiB | rows (train/val/test) | shape from |",  # noqa: E501
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r.shape
        lines.append(
            f"| {r.paper} | {r.dataset} | {r.model} | {r.configs:,} | {r.folds} | {r.fits:,} | {r.jobs:,} | "
            f"{_hours(r.cpu_hours)} | {_hours(r.gpu_hours)} | {r.peak_mb / 1024:.1f} | "
            f"{s.n_train:,}/{s.n_val:,}/{s.n_test:,} | {s.source.split(' (')[0]} |"
        )
    over = memory_over_cap(rows, params)
    return "\n".join([*lines, "", format_totals(rows), *(["", over] if over else [])])


def gpu_basis(model: CostModel) -> str:
    """What the GPU-hours rest on: the families calibrated on measured GPU jobs, and the assumption
    the others keep."""
    measured = {f: n for f, n in model.calibration.n_gpu_jobs.items() if n}
    assumed = [f for f in GPU_FAMILIES if f not in measured]
    parts = []
    if measured:
        rates = ", ".join(
            f"{f} {n} ({1 / (model.calibration.gpu_runtime[f]['flops'] * 1e3):.2g} TFLOP/s, "
            f"{model.calibration.gpu_runtime[f]['steps']:.2g} ms/step)"
            for f, n in sorted(measured.items())
        )
        parts.append(f"GPU-hours calibrated on jobs measured on a GPU: {rates}")
    if assumed:
        parts.append(
            f"{', '.join(assumed)} assume{'s' if len(assumed) == 1 else ''} {model.gpu.tflops:g} TFLOP/s sustained "
            f"and {model.gpu.step_overhead_ms:g} ms per step (no GPU job measured)"
        )
    return "; ".join(parts)


def cpu_basis(model: CostModel) -> str:
    """Which CPU types the CPU-hours were measured on: a network's step can take several times
    as long on another type (docs/results/speed.md), so a reader on other hardware knows to scale."""
    types = model.calibration.cpu_types
    if not types:
        return "CPU-hours at one thread from the cost model's priors (no CPU job measured)"
    named = ", ".join(f"{name} ({n})" for name, n in types.items())
    return f"CPU-hours at one thread on the CPU types the timed jobs ran on: {named}; times on another CPU type differ"


def memory_over_cap(rows: list[PlanRow], params: Params) -> str:
    """A line naming the rows whose estimated peak exceeds the most memory a job may ask for
    (`resources.training.max_mem_mb`): the workflow asks for the cap, so their largest
    configurations would not fit the node; empty when there are none."""

    cap = policy(params)["training"]["max_mem_mb"]
    over = [r for r in rows if r.peak_mb > cap]
    if not over:
        return ""
    named = "; ".join(f"{r.model} on {r.dataset} ({r.paper}), {r.peak_mb / 1024:,.1f} GiB" for r in over)
    return (
        f"Estimated above the largest memory request (`resources.training.max_mem_mb`, {cap / 1024:,.0f} GiB), "
        f"so their largest configurations would not fit the node a job asks for: {named}."
    )


def format_totals(rows: list[PlanRow]) -> str:
    """Per paper and overall: fits, jobs, CPU-hours, GPU-hours and the largest job's peak."""
    lines = ["| paper | fits | jobs | CPU-h | GPU-h | largest peak GiB |", "|---|---|---|---|---|---|"]
    for paper in [*dict.fromkeys(r.paper for r in rows), None]:
        part = [r for r in rows if paper is None or r.paper == paper]
        if not part:
            continue
        lines.append(
            f"| {paper or '**total**'} | {sum(r.fits for r in part):,} | {sum(r.jobs for r in part):,} | "
            f"{sum(r.cpu_hours for r in part):,.1f} | {sum(r.gpu_hours for r in part):,.1f} | "
            f"{max(r.peak_mb for r in part) / 1024:.1f} |"
        )
    return "\n".join(lines)


def compare(measured: list[MeasuredJob], gpu: GpuAssumptions, *, summary_only: bool = False) -> str:
    """Predicted vs measured runtime and memory of every measured job; fractions within 3x (time)
    and 2x (memory), in sample and with each paper/dataset/model group left out (`summary_only`:
    the fractions and the per-family table, without the per-job rows)."""
    full = CostModel(calibrate(measured, gpu), gpu)
    groups: dict[str, list[MeasuredJob]] = {}
    for job in measured:
        groups.setdefault(_group(job.label), []).append(job)
    held_out: dict[int, float] = {}
    for name, members in groups.items():
        rest = [j for j in measured if _group(j.label) != name]
        model = CostModel(calibrate(rest, gpu), gpu)
        for job in members:
            held_out[id(job)] = _seconds(model, job)
    lines = [
        "| job | origin | measured s | predicted s | ratio | held-out ratio | measured MiB | predicted MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    per_family: dict[str, list[tuple[float, float]]] = {}
    mem_ratios: dict[bool, list[float]] = {False: [], True: []}  # CPU jobs, GPU jobs (host memory)
    for job in sorted(measured, key=lambda j: (j.gpu, j.family, j.label)):
        predicted = _seconds(full, job)
        mem = full.peak_mb(job.family, job.memory)
        mem_ratios[job.gpu].append(mem / job.peak_mb)
        if job.wall_s is None:  # stopped at a time limit: memory only
            lines.append(
                f"| {job.label} | {_origin(job)} | (time limit) | {predicted:,.1f} | | | "
                f"{job.peak_mb:,.0f} | {mem:,.0f} |"
            )
            continue
        ratio, cv = predicted / job.wall_s, held_out[id(job)] / job.wall_s
        per_family.setdefault(f"{job.family} (GPU)" if job.gpu else job.family, []).append((ratio, cv))
        lines.append(
            f"| {job.label}{' (GPU)' if job.gpu else ''} | {_origin(job)} | {job.wall_s:,.1f} | {predicted:,.1f} | "
            f"{ratio:.2f} | {cv:.2f} | {job.peak_mb:,.0f} | {mem:,.0f} |"
        )
    pairs = [p for values in per_family.values() for p in values]
    if summary_only:
        lines = []
    lines += [
        "",
        f"{len(pairs)} measured jobs with a runtime: within 3x for {within(r for r, _ in pairs):.0%} in sample, "
        f"{within(cv for _, cv in pairs):.0%} with their dataset x model left out of the calibration; "
        f"peak memory within 2x for {within(mem_ratios[False], 2):.0%} of {len(mem_ratios[False])} CPU jobs.",
    ]
    if mem_ratios[True]:  # host memory beside a GPU: CUDA's own share, the model's tensors elsewhere
        lines[-1] += (
            f" The host peak of the {len(mem_ratios[True])} GPU jobs (not calibrated: CUDA's context is part of it) "
            f"is within 2x of the CPU estimate for {within(mem_ratios[True], 2):.0%}."
        )
    lines += [
        "",
        "| family | jobs | within 3x (in sample) | within 3x (held out) | median ratio |",
        "|---|---|---|---|---|",
    ]
    for family, values in sorted(per_family.items()):
        ratios = sorted(r for r, _ in values)
        lines.append(
            f"| {family} | {len(values)} | {within(ratios):.0%} | {within(cv for _, cv in values):.0%} | "
            f"{ratios[len(ratios) // 2]:.2f} |"
        )
    return "\n".join(lines).strip("\n")


def _seconds(model: CostModel, job: MeasuredJob) -> float:
    """A measured job's predicted time on the kind of device it ran on."""
    return model.gpu_seconds(job.family, job.terms) if job.gpu else model.cpu_seconds(job.family, job.terms)


def within(values: Iterable[float], factor: float = 3.0) -> float:
    """Share of ratios between 1/factor and factor."""
    values = list(values)
    return sum(1 / factor <= v <= factor for v in values) / max(len(values), 1)


def _origin(job: MeasuredJob) -> str:
    return Path(job.origin).parent.name or job.origin


def _group(label: str) -> str:
    """paper/dataset/model of a label (bench labels: bench/dataset@rows/model -> bench/dataset/model)."""
    parts = label.split("/")
    return "/".join([parts[0], parts[1].split("@")[0], parts[2]])


def calibration_summary(calibration: Calibration) -> str:
    lines = ["| family | measured jobs | seconds per unit | MiB per unit |", "|---|---|---|---|"]
    for family, weights in calibration.runtime.items():
        runtime = ", ".join(f"{k} {v:.3g}" for k, v in weights.items())
        memory = ", ".join(f"{k} {v:.3g}" for k, v in calibration.memory[family].items())
        lines.append(f"| {family} | {calibration.n_jobs.get(family, 0)} | {runtime} | {memory} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tabrepro.plan", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--params", type=Path, default=DEFAULT_PARAMS_FILE, help="parameters file (default: params.yaml)"
    )
    parser.add_argument("--profile", default="paper", help="profile to plan (default: paper)")
    parser.add_argument(
        "--measured",
        type=Path,
        action="append",
        default=[],
        help="a results directory of a run (metrics.json files) to calibrate on, besides the "
        "shipped calibration's jobs; repeatable",
    )
    parser.add_argument(
        "--bench",
        type=Path,
        action="append",
        default=[],
        help="a scale benchmark JSON to calibrate on, besides the shipped calibration's jobs; repeatable",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        action="append",
        default=[],
        help="a data directory whose processed/*/schema.json give dataset shapes; repeatable",
    )
    parser.add_argument(
        "--gpu-tflops",
        type=float,
        default=GpuAssumptions.tflops,
        help="assumed sustained GPU TFLOP/s (the prior of the GPU calibration)",
    )
    parser.add_argument("--compare", action="store_true", help="print predicted vs measured for every measured job")
    parser.add_argument("--calibration", action="store_true", help="print the calibrated weights")
    parser.add_argument("--write-facts", type=Path, help="write the dataset shapes known here to this facts file")
    parser.add_argument(
        "--write-calibration",
        type=Path,
        metavar="RECORDS_DIR",
        help="rewrite the shipped cost calibration from a records directory (as `tabrepro calibrate`)",
    )
    parser.add_argument(
        "--readme",
        type=Path,
        help="rewrite this page's plan block (the paper profile's totals and the comparison with "
        "the measured jobs, from the shipped calibration only)",
    )
    parser.add_argument(
        "--check", action="store_true", help="with --readme or --write-calibration: exit 1 when it is stale"
    )
    return parser


def run_plan(
    params: Params,
    params_file: Path,
    *,
    measured_dirs: Sequence[Path] = (),
    bench_files: Sequence[Path] | None = None,
    data_dirs: Sequence[Path] = (),
    gpu_tflops: float | None = None,
    compare_only: bool = False,
    show_calibration: bool = False,
    write_facts: Path | None = None,
    to_decide: Path | None = None,
) -> str:
    """What `tabrepro plan` and `python -m tabrepro.plan` print: the plan table and totals (or
    the predicted-vs-measured comparison, or the facts file written)."""
    gpu = GpuAssumptions() if gpu_tflops is None else GpuAssumptions(tflops=gpu_tflops)
    data_dirs = [*data_dirs, *(m.parent / "data" for m in measured_dirs)]
    facts = shipped_facts([params.data_dir, *data_dirs])
    bench = list(bench_files or [])
    if write_facts:
        snapshot = facts_snapshot(facts, load_registry(), bench)
        write_json(write_facts, snapshot, indent=1)
        return f"{write_facts}: {len(snapshot['datasets'])} dataset shapes"
    measured = measured_jobs(facts, params_file, measured_dirs, bench)
    if compare_only:
        return compare(measured, gpu)
    model = CostModel(calibrate(measured, gpu), gpu)
    if to_decide is not None:
        # deferred: loads pandas
        from tabrepro.plan_decide import decision_costs, format_decision_costs, one_run_hours, read_scorecard

        rows = Planner(params, model, facts).rows()
        found = decision_costs(read_scorecard(to_decide), one_run_hours(rows))
        return format_decision_costs(*found, to_decide, params.profile_name)
    parts = [calibration_summary(model.calibration), ""] if show_calibration else []
    parts.append(format_plan(Planner(params, model, facts).rows(), params, model))
    families = ", ".join(sorted({j.family for j in measured}))
    parts.append(f"\nCalibrated on {len(measured)} measured jobs ({families}).")
    return "\n".join(parts)


PLAN_PAGE = Path("docs/results/plan.md")  # the generated plan page, relative to the repository
README_BEGIN = (
    "<!-- plan:begin (generated by `python -m tabrepro.plan --readme docs/results/plan.md`; do not edit by hand) -->"
)
README_END = "<!-- plan:end -->"


def readme_block(params_file: Path = DEFAULT_PARAMS_FILE, profile: str = "paper") -> str:
    """The plan page's figures, from the shipped calibration only (no local run or data
    directory), so that any clone renders the same block."""
    params = Params.from_file(params_file, profile=profile)
    facts = shipped_facts()
    measured = read_calibration().measured
    model = CostModel(calibrate(measured, DEFAULT_GPU), DEFAULT_GPU)
    rows = Planner(params, model, facts).rows()
    largest = max(rows, key=lambda r: r.peak_mb)
    over = memory_over_cap(rows, params)
    families = ", ".join(sorted({j.family for j in measured}))
    return "\n".join(
        [
            README_BEGIN,
            "",
            f"Profile {profile!r}, calibrated on {len(measured)} measured jobs ({families}) of the committed "
            f"records and scale benchmarks; the largest peak is {largest.model} on {largest.dataset} "
            f"({largest.paper}). {gpu_basis(model)}.",
            "",
            format_totals(rows),
            *(["", over] if over else []),
            "",
            "Predicted against measured (`tabrepro plan --compare` lists every job):",
            "",
            compare(measured, DEFAULT_GPU, summary_only=True),
            README_END,
        ]
    )


def write_calibration(
    records_dir: Path, params_file: Path = DEFAULT_PARAMS_FILE, output: Path = CALIBRATION_FILE, *, check: bool = False
) -> bool:
    """Rewrite (or with `check`, only compare) the calibration file from a records directory;
    False when the file on disk differs from what the records give."""

    payload = (json.dumps(build_calibration(records_dir, params_file), indent=1) + "\n").encode()
    if check:
        return Path(output).is_file() and Path(output).read_bytes() == payload
    atomic_write(Path(output), payload)
    return True


def update_readme(readme: Path, *, check: bool = False, params_file: Path = DEFAULT_PARAMS_FILE) -> bool:
    """Rewrite (or with `check`, only compare) a page's plan block; False when it is stale."""

    return replace_block(readme, readme_block(params_file), README_BEGIN, README_END, check=check)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.write_calibration:
            current = write_calibration(args.write_calibration, args.params, check=args.check)
            if not current:
                print(f"{CALIBRATION_FILE}: stale; rerun without --check", file=sys.stderr)
                return 1
            return 0
        if args.readme:
            current = update_readme(args.readme, check=args.check, params_file=args.params)
            if not current:
                print(f"{args.readme}: the plan block is stale; rerun without --check", file=sys.stderr)
                return 1
            return 0
        params = Params.from_file(args.params, profile=args.profile)
        print(
            run_plan(
                params,
                args.params,
                measured_dirs=args.measured,
                bench_files=args.bench,
                data_dirs=args.data_dir,
                gpu_tflops=args.gpu_tflops,
                compare_only=args.compare,
                show_calibration=args.calibration,
                write_facts=args.write_facts,
            )
        )
    except InputError as error:
        print(f"tabrepro.plan: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
