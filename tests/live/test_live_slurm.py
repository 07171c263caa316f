"""The Slurm profile against a real Slurm: `snakemake --profile slurm all` on a one-node cluster.

Runs only where it is enabled (CI=true or TABREPRO_LIVE_SLURM=1) on Debian as root: it apt-installs
munge and Slurm if needed and starts private daemons (tests/slurm_cluster.py), which it stops
again. A copy of the workflow, with the committed profile and the `slurm` symlink, runs a tiny
params profile (breast cancer, k-NN and a small NPT, two folds). Checked:

* every result and table appears; GPU jobs (NPT's train_batch) are submitted with `--gpus=1`,
  CPU jobs with no GPU request;
* an NPT job cancelled (scancel) after a checkpoint is resubmitted by Snakemake's retry with more
  memory and time, resumes from its state file and ends with the weights of an uninterrupted run;
* an NPT job requeued by Slurm (`scontrol requeue`, what preemption does) resumes as well;
* `--forcerun` of one dataset x model x fold target submits exactly one job.

Each Snakemake run is bounded: on timeout it gets SIGINT (it ignores SIGTERM while waiting on
Slurm), then SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, copy_workflow, tiny_profile
from slurm_cluster import SlurmCluster, ensure_installed, skip_reason

PYTHON = sys.executable
SKIP = skip_reason()

pytestmark = [pytest.mark.slow, pytest.mark.live, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]

PROFILE = "slurm_live"
FOLDS = (0, 1)
NPT_STEPS = 60  # one progress line per 3 steps (max_steps // 20), each right after a checkpoint
NPT_CHECKPOINT = 3
INTERRUPT_AT_STEP = 6  # interrupt once the log shows this step: two checkpoints are on disk
CANCELLED_FOLD = 0  # scancel -> Snakemake's retry resubmits it (attempt 2)
REQUEUED_FOLD = 1  # scontrol requeue -> Slurm reruns the same job id (preemption)
RUN_TIMEOUT = 600  # the run took 466 s on a 2-core machine shared with other CPU-heavy work
# Test-only speed-ups, given on the command line beside the committed profile.
FAST = [
    "--slurm-init-seconds-before-status-checks",
    "2",
    "--latency-wait",
    "5",
    # The recipe docs/cluster.md gives for a separate GPU partition, checked below.
    "--set-resources",
    "train_batch:slurm_partition=gpu",
]


def npt_job_dir(fold: int) -> str:
    return f"results/npt/breast_cancer/npt/fold{fold}"


def npt_log(fold: int) -> str:
    return f"logs/train/npt/breast_cancer/npt/fold{fold}/batch0.log"


def live_profile(raw: dict) -> None:
    raw["profiles"][PROFILE] = tiny_profile(
        ["knn", "npt"],
        description="live Slurm test",
        max_configs=2,
        folds=list(FOLDS),
        model_overrides={
            "npt": {
                "max_configs": 1,
                "params": {
                    "embed_dim": 8,
                    "n_layers": 2,
                    "n_heads": 2,
                    "max_steps": NPT_STEPS,
                    "eval_every_epochs": 10,
                    "checkpoint_every_steps": NPT_CHECKPOINT,
                },
            }
        },
        # a train job per fold: the tests below follow, cancel and rerun k-NN's fold jobs one by one
        resources={"training": {"folds_in_one_job": []}},
    )
    raw["profile"] = PROFILE


def copy_workflow_with_profile(dest: Path) -> Path:
    """Snakefile, workflow/ (profiles included), the repository's `slurm` symlink, params.yaml."""
    link = REPO / "slurm"
    assert link.is_symlink(), "the repository root needs the `slurm` symlink to workflow/profiles/slurm"
    assert link.resolve() == (REPO / "workflow/profiles/slurm").resolve()
    copy_workflow(dest, live_profile, with_profiles=True)
    os.symlink(os.readlink(link), dest / "slurm")
    return dest


def first_request(work: Path, rule: str, fold: int):
    """What the workflow in `work` asks Slurm for at a job's first attempt (tabrepro.resources)."""
    from tabrepro.config import Params
    from tabrepro.resources import JobSizer

    wildcards = {"paper": "npt", "dataset": "breast_cancer", "model": "npt", "fold": fold, "batch": 0}
    return JobSizer(Params.from_file(work / "params.yaml")).request(rule, wildcards)


def slurm_mb(value: str) -> int:
    """`scontrol show job`'s memory ('8000M', '1.50G', '3G') in MB."""
    number, unit = float(value[:-1]), value[-1]
    return round(number * {"M": 1, "G": 1024, "T": 1024 * 1024}[unit])


def slurm_minutes(value: str) -> int:
    """`scontrol show job`'s time limit ('12:00:00', '1-00:00:00', '45:00') in minutes."""
    days, _, clock = value.rpartition("-")
    parts = [int(x) for x in clock.split(":")]
    hours, minutes, seconds = ([0] * (3 - len(parts)) + parts)[-3:]
    return (int(days or 0) * 24 + hours) * 60 + minutes + (seconds > 0)


def last_step(log: Path) -> int:
    try:
        steps = re.findall(r"npt step (\d+)/\d+", log.read_text())
    except OSError:
        return 0
    return int(steps[-1]) if steps else 0


def npt_jobs(cluster: SlurmCluster, fold: int) -> list:
    """Every Slurm job of the NPT configuration 0 of this fold, oldest first."""
    return [j for j in cluster.jobs() if j.rule == "train_batch" and j.comment.endswith(f"_{fold}_0")]


def running_job(cluster: SlurmCluster, rule: str, wildcards: str):
    for job in cluster.jobs():
        if job.rule == rule and job.comment.endswith(wildcards) and job.state == "RUNNING":
            return job
    return None


@dataclass
class Interruption:
    fold: int
    how: str  # "scancel" or "requeue"
    job_id: str = ""
    step_seen: int = 0
    done: bool = False


@dataclass
class LiveRun:
    cluster: SlurmCluster
    work: Path
    returncode: int
    output: str
    seconds: float
    interruptions: dict[int, Interruption]
    reference_dirs: dict[int, Path] = field(default_factory=dict)
    reference_errors: list[str] = field(default_factory=list)

    def sbatch_calls(self) -> list[str]:
        return [line.split("sbatch call:", 1)[1].strip() for line in self.output.splitlines() if "sbatch call:" in line]


def run_snakemake(
    cluster: SlurmCluster, work: Path, args: list[str], name: str, timeout: float, on_poll=None
) -> tuple[int, str, float]:
    """`snakemake --profile slurm ARGS` with FAST flags; SIGINT, then SIGKILL, past the timeout."""
    out_path = work / f"{name}.out"
    started = time.monotonic()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [str(SNAKEMAKE), "--profile", "slurm", *FAST, "--verbose", *args],
            cwd=work,
            env=cluster.env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            while proc.poll() is None:
                if time.monotonic() - started > timeout:
                    proc.send_signal(signal.SIGINT)  # snakemake cancels its Slurm jobs and exits
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    break
                if on_poll:
                    on_poll()
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return proc.returncode, out_path.read_text(errors="replace"), time.monotonic() - started


@pytest.fixture(scope="module")
def cluster():
    installed = ensure_installed()
    with SlurmCluster() as slurm:
        print(f"\nSlurm: apt install {installed:.1f} s, daemons up in {slurm.start_seconds:.1f} s")
        yield slurm


@pytest.fixture(scope="module")
def live(cluster, tmp_path_factory):
    work = copy_workflow_with_profile(tmp_path_factory.mktemp("live_slurm"))
    interruptions = {
        CANCELLED_FOLD: Interruption(CANCELLED_FOLD, "scancel"),
        REQUEUED_FOLD: Interruption(REQUEUED_FOLD, "requeue"),
    }
    # Uninterrupted reference runs of the same NPT configurations, on this machine's CPU, with
    # their own data directory (same seed, so the same splits); they overlap with the Slurm run.
    reference_dirs = {fold: work / "reference" / f"fold{fold}" for fold in interruptions}
    cli = [PYTHON, "-m", "tabrepro", "--params", "params.yaml", "--profile", PROFILE, "--quiet"]
    steps = [cli + ["prepare", "breast_cancer"], cli + ["split", "npt", "breast_cancer"]]
    steps += [
        cli
        + [
            "train-config",
            "npt",
            "breast_cancer",
            "npt",
            str(fold),
            "0",
            "--threads",
            "1",
            "--output-dir",
            str(out_dir),
        ]
        for fold, out_dir in reference_dirs.items()
    ]
    reference = subprocess.Popen(
        ["sh", "-c", " && ".join(shlex.join(step) for step in steps)],
        cwd=work,
        env={**os.environ, "TABREPRO_DATA_DIR": str(work / "reference" / "data")},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def on_poll():
        for intr in interruptions.values():
            if intr.done or last_step(work / npt_log(intr.fold)) < INTERRUPT_AT_STEP:
                continue
            job = running_job(cluster, "train_batch", f"_{intr.fold}_0")
            if job is None:
                continue
            intr.step_seen = last_step(work / npt_log(intr.fold))
            if intr.how == "scancel":
                cluster.scancel(job.id)
            else:
                subprocess.run(["scontrol", "requeue", job.id], check=True, timeout=20, env=cluster.env())
            intr.job_id, intr.done = job.id, True

    try:
        returncode, output, seconds = run_snakemake(cluster, work, ["all"], "full", RUN_TIMEOUT, on_poll)
    except BaseException:
        reference.kill()
        reference.wait()
        raise
    run = LiveRun(cluster, work, returncode, output, seconds, interruptions, reference_dirs)
    try:
        _, err = reference.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        reference.kill()
        _, err = reference.communicate()
    if reference.returncode != 0:
        run.reference_errors.append(f"reference runs failed: {err.decode(errors='replace')[-3000:]}")
    print(f"\nfull run: {seconds:.0f} s, {len(cluster.jobs())} Slurm jobs")
    return run


def failure_context(run: LiveRun) -> str:
    return f"snakemake output (tail):\n{run.output[-6000:]}\n\n{run.cluster.diagnostics(20)}"


def test_full_run_produces_every_result_and_table(live):
    assert live.returncode == 0, failure_context(live)
    for fold in FOLDS:
        for model in ("knn", "npt"):
            path = live.work / f"results/npt/breast_cancer/{model}/fold{fold}/metrics.json"
            metrics = json.loads(path.read_text())
            assert metrics["metrics"]["test"]["auroc"] > 0.5
    raw = yaml.safe_load((live.work / "params.yaml").read_text())
    for table in raw["papers"]["npt"]["tables"]:
        for ext in ("md", "tex", "csv"):
            assert (live.work / f"results/tables/npt/{table}.{ext}").is_file()
    assert "NPT" in (live.work / "results/tables/npt/table10.md").read_text()


def test_gpu_jobs_request_a_gpu_and_cpu_jobs_do_not(live):
    assert live.returncode == 0, failure_context(live)
    jobs = live.cluster.jobs()
    by_rule: dict[str, list] = {}
    for job in jobs:
        by_rule.setdefault(job.rule, []).append(job)
    assert {"prepare", "split", "train", "train_batch", "select_config", "tables_npt"} <= set(by_rule)
    for job in by_rule["train_batch"]:  # what Slurm was asked for, not what Snakemake meant to ask
        assert "gpu:1" in job.get("TresPerJob"), job.fields
        assert job.get("Partition") == "gpu", job.fields
    # The CPU jobs: the k-NN baseline and the data, selection and table steps. (Rules added to the
    # workflow later are left out here: whether they need a GPU is theirs to say.)
    cpu_rules = ("prepare", "split", "train", "select_config", "tables_npt")
    for job in (job for rule in cpu_rules for job in by_rule[rule]):
        assert "gpu" not in job.get("TresPerJob") and "gpu" not in job.get("TRES"), job.fields
        assert job.get("Partition") == "cpu", job.fields
    calls = live.sbatch_calls()
    gpu_calls = [c for c in calls if "rule_train_batch_wildcards" in c]
    cpu_calls = [c for c in calls if "rule_train_wildcards" in c]
    assert gpu_calls and cpu_calls, calls
    assert all(" --gpus=1" in c for c in gpu_calls) and not any("--gpus" in c or "--gres" in c for c in cpu_calls)
    print("\nGPU job:", gpu_calls[0].split(" --wrap=")[0])
    print("CPU job:", cpu_calls[0].split(" --wrap=")[0])


def _weights(path: Path) -> dict:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def _assert_same_weights_as_reference(live: LiveRun, fold: int) -> None:
    assert not live.reference_errors, live.reference_errors
    ours = _weights(live.work / npt_job_dir(fold) / "config0/weights.pt")
    ref = _weights(live.reference_dirs[fold] / "weights.pt")
    assert ours.keys() == ref.keys()
    import torch

    differing = [k for k in ours if not torch.equal(ours[k], ref[k])]
    assert not differing, f"fold {fold}: weights differ from the uninterrupted run in {differing[:5]}"
    ours_result = json.loads((live.work / npt_job_dir(fold) / "config0/result.json").read_text())
    ref_result = json.loads((live.reference_dirs[fold] / "result.json").read_text())
    assert ours_result["metrics"] == ref_result["metrics"]


def _resumed_step(live: LiveRun, fold: int) -> int:
    log = (live.work / npt_log(fold)).read_text()
    resumed = re.findall(r"npt resumed from step (\d+) \(state file in ([^)]*)\)", log)
    assert len(resumed) == 1, log[-3000:]
    step, state_dir = int(resumed[0][0]), resumed[0][1]
    assert re.search(rf"{re.escape(npt_job_dir(fold))}/config0/state/[0-9a-f]{{12}}$", state_dir), state_dir
    intr = live.interruptions[fold]
    # The log showed INTERRUPT_AT_STEP, so that checkpoint was on disk; the job may have run on a
    # little before the signal landed.
    assert INTERRUPT_AT_STEP <= step < NPT_STEPS and step % NPT_CHECKPOINT == 0, (step, intr)
    line = next(text for text in log.splitlines() if "npt resumed from step" in text)
    print(f"\nfold {fold} ({intr.how} of Slurm job {intr.job_id} at logged step {intr.step_seen}): {line}")
    return step


def test_cancelled_npt_job_is_retried_resumes_and_matches_an_uninterrupted_run(live):
    assert live.returncode == 0, failure_context(live)
    intr = live.interruptions[CANCELLED_FOLD]
    assert intr.done, f"the NPT job of fold {CANCELLED_FOLD} finished before it could be cancelled: raise NPT_STEPS"
    attempts = npt_jobs(live.cluster, CANCELLED_FOLD)
    assert [j.state for j in attempts] == ["CANCELLED", "COMPLETED"], [j.fields for j in attempts]
    first, retry = attempts
    assert first.id == intr.job_id
    # Attempt 1 asked for what params.yaml's resources policy gives this job; the retry (attempt 2)
    # for twice the memory and time.
    request = first_request(live.work, "train_batch", fold=CANCELLED_FOLD)
    assert slurm_mb(first.get("MinMemoryNode")) == request.mem_mb, first.fields
    assert slurm_minutes(first.get("TimeLimit")) == request.runtime_min, first.fields
    assert slurm_mb(retry.get("MinMemoryNode")) == 2 * request.mem_mb, retry.fields
    assert slurm_minutes(retry.get("TimeLimit")) == 2 * request.runtime_min, retry.fields
    _resumed_step(live, CANCELLED_FOLD)
    _assert_same_weights_as_reference(live, CANCELLED_FOLD)


def test_requeued_npt_job_resumes_under_the_same_slurm_job(live):
    assert live.returncode == 0, failure_context(live)
    intr = live.interruptions[REQUEUED_FOLD]
    assert intr.done, f"the NPT job of fold {REQUEUED_FOLD} finished before it could be requeued: raise NPT_STEPS"
    attempts = npt_jobs(live.cluster, REQUEUED_FOLD)
    assert len(attempts) == 1 and attempts[0].id == intr.job_id, [j.fields for j in attempts]
    assert attempts[0].state == "COMPLETED" and attempts[0].get("Restarts") == "1", attempts[0].fields
    assert attempts[0].get("Requeue") == "1"  # the profile's slurm-requeue: sbatch --requeue
    _resumed_step(live, REQUEUED_FOLD)
    _assert_same_weights_as_reference(live, REQUEUED_FOLD)


def test_forcerun_of_one_target_submits_exactly_one_job(live):
    assert live.returncode == 0, failure_context(live)
    target = "results/npt/breast_cancer/knn/fold0/metrics.json"
    before = json.loads((live.work / target).read_text())
    jobs_before = {j.id for j in live.cluster.jobs()}
    returncode, output, seconds = run_snakemake(
        live.cluster, live.work, ["--forcerun", target, "--", target], "forcerun", 240
    )
    assert returncode == 0, output[-6000:]
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", output)
    new_jobs = [j for j in live.cluster.jobs() if j.id not in jobs_before]
    assert len(submitted) == 1 and [j.id for j in new_jobs] == submitted, (submitted, [j.fields for j in new_jobs])
    assert new_jobs[0].rule == "train" and new_jobs[0].comment.endswith("_knn_0")
    after = json.loads((live.work / target).read_text())
    assert after["metrics"] == before["metrics"]
    print(
        f"\nsingle-target rerun: {len(submitted)} Slurm job ({seconds:.0f} s):",
        next(text for text in output.splitlines() if "has been submitted with SLURM jobid" in text).strip(),
    )


def sized_profile(raw: dict) -> None:
    """Random Forest (200 trees, a fit of seconds) on breast cancer (569 rows) and Protein
    (45,730), the memory and runtime floors lowered so that the requests show the cost model's
    estimates (a forest's memory grows with its training rows)."""
    forest = {
        "n_estimators": 200,
        "max_features": "sqrt",
        "criterion": {"classification": "gini", "regression": "squared_error"},
    }
    raw["profiles"]["slurm_sized"] = tiny_profile(
        ["random_forest"],
        ["breast_cancer", "protein"],
        description="live Slurm test: requests follow the dataset's size",
        model_overrides={"random_forest": {"params": forest, "reason": "live Slurm test: a fit of seconds"}},
        resources={"training": {"memory_floor_mb": 1, "runtime_floor_min": 1}},
    )
    raw["profile"] = "slurm_sized"


def test_a_large_dataset_job_asks_slurm_for_more_than_a_small_one(cluster, shared_data_server, tmp_path_factory):
    """Issue 13: the training rules' requests come from the compute plan, per dataset size. Protein
    is fetched from the offline copies through the mirror option, as a user without network would."""
    from tabrepro.config import MIRROR_ENV

    work = copy_workflow(tmp_path_factory.mktemp("live_sized"), sized_profile, with_profiles=True)
    os.symlink(os.readlink(REPO / "slurm"), work / "slurm")
    targets = [f"results/npt/{dataset}/random_forest/fold0/metrics.json" for dataset in ("breast_cancer", "protein")]
    env = {**cluster.env(), MIRROR_ENV: shared_data_server.url}
    started = time.monotonic()
    proc = subprocess.run(
        [str(SNAKEMAKE), "--profile", "slurm", *FAST, "--verbose", *targets],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    train = {
        dataset: next(j for j in cluster.jobs() if j.rule == "train" and f"_{dataset}_random_forest_" in j.comment)
        for dataset in ("breast_cancer", "protein")
    }
    small, large = (slurm_mb(train[d].get("MinMemoryNode")) for d in ("breast_cancer", "protein"))
    small_min, large_min = (slurm_minutes(train[d].get("TimeLimit")) for d in ("breast_cancer", "protein"))
    assert large > small, (small, large)  # the plan sizes it; how much more follows the calibration records
    assert large_min >= small_min, (small_min, large_min)
    for target in targets:
        assert json.loads((work / target).read_text())["metrics"]["test"]
    print(
        f"\nsized requests ({time.monotonic() - started:.0f} s): breast cancer {small} MB / {small_min} min, "
        f"Protein {large} MB / {large_min} min"
    )
