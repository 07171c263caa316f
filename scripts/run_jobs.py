"""Run every job of a profile through the `tabrepro` CLI, without Snakemake.

    python scripts/run_jobs.py --profile gpu_calibration --mirror DIR [--job-limit S] [--log DIR]
    python scripts/run_jobs.py --profile npt_breast_cancer --mirror DIR --restore npt_breast_cancer --parallel 10

For a machine that has the package's own dependencies but not the workflow's (a lent GPU machine
without package registries: scripts/gpu_checks.sh, stage `jobs`). It issues the commands the
workflow's rules issue (fetch, prepare, split; train, or train-config per configuration then
select), so each job writes the metrics.json the workflow would, with its wall time, peak memory
and provenance; a download that fails is recorded as the workflow records it (`fetch --record`),
and prepare then builds an embedded table or stops that dataset's jobs. The data steps run first,
one at a time; then `--restore NAME` puts a committed record's results back (`tabrepro record NAME
--restore`: the same jobs on the same splits only), and the training jobs run, `--parallel` of them
at once (several small GPU jobs share one device: each alone leaves it mostly idle). A job whose
metrics.json exists is skipped; a job that fails or whose command runs past --job-limit is
reported and the others go on. Exit status: the number of jobs that failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tabrepro.config import Job, Params
from tabrepro.data.registry import get_source
from tabrepro.job_spec import resolve_job
from tabrepro.models.registry import get_model_class
from tabrepro.reporting.records import RecordError, checked_record_name
from tabrepro.tuning import job_configs


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _record_name(text: str) -> str:
    """The record check `tabrepro record` makes, before the name reaches a log file's path."""
    try:
        return checked_record_name(text)
    except RecordError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--paper", action="append", help="only this paper's jobs (repeatable; default: all)")
    parser.add_argument("--mirror", help="the datasets' mirror (a directory or URL) for `tabrepro fetch`")
    parser.add_argument("--job-limit", type=float, default=300.0, help="seconds one command may run")
    parser.add_argument("--log", type=Path, default=Path("logs/run_jobs"), help="one log file per command here")
    parser.add_argument("--parallel", type=_at_least_one, default=1, help="training jobs run at once (default: 1)")
    parser.add_argument(
        "--restore", metavar="NAME", type=_record_name, help="put record NAME's results back before training"
    )
    args = parser.parse_args(argv)

    params = Params.from_file(args.params, profile=args.profile)
    cli = [sys.executable, "-m", "tabrepro", "--params", args.params, "--profile", args.profile, "--quiet"]
    args.log.mkdir(parents=True, exist_ok=True)

    def run(name: str, *command: str) -> bool:
        started = time.perf_counter()
        with open(args.log / f"{name}.log", "w") as log:
            try:
                status = subprocess.run([*cli, *command], stdout=log, stderr=subprocess.STDOUT, timeout=args.job_limit)
                outcome = "ok" if status.returncode == 0 else f"failed (exit {status.returncode})"
            except subprocess.TimeoutExpired:
                outcome = f"stopped at its {args.job_limit:g} s limit"
        print(f"{name}: {outcome} after {time.perf_counter() - started:.1f} s", flush=True)
        return outcome == "ok"

    def done(job: Job) -> bool:
        return params.layout.job_metrics.path(job).exists()

    def tag(job: Job) -> str:
        return f"{job.paper}-{job.dataset}-{job.model}-fold{job.fold}"

    def train(job: Job) -> bool:
        where = [job.paper, job.dataset, job.model, str(job.fold)]
        if not get_model_class(job.model).per_config_jobs:
            return run(tag(job), "train", *where)
        spec = resolve_job(params, job)
        n_configs = len(job_configs(spec, get_source(spec.source).task))
        trained = all([run(f"{tag(job)}-config{c}", "train-config", *where, str(c)) for c in range(n_configs)])
        return trained and run(f"{tag(job)}-select", "select", *where)

    failed = 0
    pending: list[Job] = []
    ready: dict[str, bool] = {}  # fetched and prepared (per source), split (per paper/dataset)
    for job in params.jobs(args.paper):
        if done(job):
            print(f"{tag(job)}: done before", flush=True)
            continue
        source = params.source_of(job.paper, job.dataset)
        if source not in ready:
            mirror = ["--mirror", args.mirror] if args.mirror else []
            ready[source] = run(f"fetch-{source}", "fetch", source, "--record", *mirror) and run(
                f"prepare-{source}", "prepare", source
            )
        split = f"split-{job.paper}-{job.dataset}"
        if ready[source] and split not in ready:
            ready[split] = run(split, "split", job.paper, job.dataset)
        if not (ready[source] and ready[split]):  # the data step's log says why; once is enough
            print(f"{tag(job)}: not run (no data)", flush=True)
            failed += 1
            continue
        pending.append(job)

    if args.restore and pending:
        failed += not run(f"restore-{args.restore}", "record", args.restore, "--restore")
        for job in [job for job in pending if done(job)]:
            print(f"{tag(job)}: restored from record {args.restore}", flush=True)
            pending.remove(job)

    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        failed += sum(not trained for trained in pool.map(train, pending))
    return failed


if __name__ == "__main__":
    sys.exit(main())
