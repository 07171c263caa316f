"""Faults around resuming: a kill -9 inside a multi-fold job, corrupt resume files, a full disk,
temporary files a killed writer left behind. Each ends with one line that names the file and a
job that goes on from what is still good, never a dead end.

The jobs are the real CLI on breast cancer (k-NN, a tiny NPT); a kill lands at a chosen point
through a hook run before the CLI in the same process.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from conftest import REPO, SNAKEMAKE, copy_workflow, tiny_profile, write_params
from tabrepro.cli import main
from tabrepro.config import Job, Params
from tabrepro.job_spec import resolve_job

FOLDS = (0, 1)
KNN = ("npt", "breast_cancer", "knn")
NPT_CONFIG = ("npt", "breast_cancer", "npt", "0", "0")  # paper, dataset, model, fold, configuration


def profile() -> dict:
    """k-NN (three configurations) and a tiny NPT on breast cancer, two folds in one job."""
    tiny = {"embed_dim": 8, "n_layers": 2, "n_heads": 2, "max_steps": 6, "eval_every_epochs": 2}
    entry = tiny_profile(
        ["knn", "npt"],
        max_configs=3,
        folds=list(FOLDS),
        model_overrides={"npt": {"max_configs": 1, "params": {**tiny, "checkpoint_every_steps": 3}}},
    )
    entry["resources"] = {"training": {"folds_in_one_job": "all"}}
    return entry


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> tuple[Path, Params]:
    root = tmp_path_factory.mktemp("resume_faults")
    params_file = write_params(root, profile())
    for command in (["prepare", "breast_cancer"], ["split", "npt", "breast_cancer"]):
        assert main(["--params", str(params_file), "--quiet", *command]) == 0
    return params_file, Params.from_file(params_file)


def cli(params_file: Path, *args: str, hook: str = "") -> subprocess.CompletedProcess:
    """`tabrepro ARGS` in a process of its own, after the Python code `hook` ran in it."""
    script = f"import sys\n{hook}\nfrom tabrepro.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    command = [sys.executable, "-c", script, "--params", str(params_file), "--quiet", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=params_file.parent)


def trains_folds(record: Path, kill_at: int | None = None) -> str:
    """A hook: each fold the job trains is appended to `record`; fold `kill_at` kills the job
    (SIGKILL, as a lost node or the OOM killer would) as it starts."""
    return textwrap.dedent(f"""
        import os, signal
        import tabrepro.training as training
        _run_job = training.run_job
        def run_job(spec, **kwargs):
            with open({str(record)!r}, "a") as out:
                out.write(f"{{spec.job.fold}}\\n")
            if spec.job.fold == {kill_at!r}:
                os.kill(os.getpid(), signal.SIGKILL)
            return _run_job(spec, **kwargs)
        training.run_job = run_job
    """)


# ------------------------------------------------------------------ kill -9 in a train_folds job
def test_a_train_folds_job_killed_after_its_first_fold_does_not_train_it_again(prepared, tmp_path):
    """Killed as fold 1 starts: Snakemake then deletes every output of the incomplete job, fold
    0's metrics.json included (`--rerun-incomplete`); the rerun gives fold 0 back, same bytes,
    trains only fold 1, and leaves no kept results behind."""
    params_file, params = prepared
    metrics = {fold: params.layout.job_metrics.path(Job(*KNN, fold)) for fold in FOLDS}
    killed = cli(params_file, "train-folds", *KNN, hook=trains_folds(tmp_path / "killed.txt", kill_at=1))
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert (tmp_path / "killed.txt").read_text().split() == ["0", "1"]
    finished = metrics[0].read_bytes()
    predictions = metrics[0].with_name("test_predictions.npz")
    finished_rows = predictions.read_bytes()
    assert not metrics[1].exists()
    metrics[0].unlink()  # what Snakemake does to the outputs of a job that did not complete
    predictions.unlink()

    rerun = cli(params_file, "train-folds", *KNN, hook=trains_folds(tmp_path / "rerun.txt"))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (tmp_path / "rerun.txt").read_text().split() == ["1"]  # fold 0 was not trained again
    assert "knn fold 0: finished by an earlier, stopped run of this job; not trained again" in rerun.stderr
    assert metrics[0].read_bytes() == finished and predictions.read_bytes() == finished_rows
    assert json.loads(metrics[1].read_text())["fold"] == 1
    assert metrics[1].with_name("test_predictions.npz").is_file()
    for fold in FOLDS:
        assert not (params.job_dir(Job(*KNN, fold)) / "state").exists()


SITECUSTOMIZE = """
import os, signal, sys
if "train-folds" in sys.argv:  # the workflow's train_folds job
    import tabrepro.training as training
    _run_job = training.run_job
    def run_job(spec, **kwargs):
        with open(os.environ["TRAINED_FOLDS"], "a") as out:
            out.write(f"{spec.job.fold}\\n")
        if spec.job.fold == int(os.environ.get("KILL_AT_FOLD", "-1")):
            os.killpg(os.getpgrp(), signal.SIGKILL)  # the node is lost: Snakemake dies with its job
        return _run_job(spec, **kwargs)
    training.run_job = run_job
"""


@pytest.mark.slow
def test_snakemake_rerun_incomplete_after_a_kill_does_not_train_finished_folds_again(tmp_path):
    """The issue's run: Snakemake and its train_folds job killed together as fold 1 starts;
    `snakemake --unlock`, then `--rerun-incomplete`, deletes the job's outputs (fold 0's metrics.json among them)
    and reruns it, which trains fold 1 only and gives fold 0 back as it was."""

    def knn_folds(raw: dict) -> None:
        raw["profiles"]["resume"] = profile()
        raw["profiles"]["resume"]["papers"]["npt"]["models"] = ["knn"]
        raw["profile"] = "resume"

    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work", knn_folds)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    targets = [f"results/npt/breast_cancer/knn/fold{fold}/metrics.json" for fold in FOLDS]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hooks), os.environ.get("PYTHONPATH")]))}

    def snakemake(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SNAKEMAKE), "--cores", "1", *args, *targets],
            cwd=work,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=900,
            start_new_session=True,  # its own process group, which the hook kills
        )

    killed = snakemake(TRAINED_FOLDS=str(tmp_path / "killed.txt"), KILL_AT_FOLD="1")
    assert killed.returncode == -9, (killed.stdout + killed.stderr)[-3000:]
    assert (tmp_path / "killed.txt").read_text().split() == ["0", "1"]
    finished = (work / targets[0]).read_bytes()
    assert snakemake("--unlock").returncode == 0  # the lock a killed Snakemake leaves
    rerun = snakemake("--rerun-incomplete", TRAINED_FOLDS=str(tmp_path / "rerun.txt"))
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    assert (tmp_path / "rerun.txt").read_text().split() == ["1"]
    assert (work / targets[0]).read_bytes() == finished
    assert not any(work.glob("results/npt/breast_cancer/knn/fold*/state"))
    assert all((work / target).with_name("test_predictions.npz").is_file() for target in targets)


def test_a_kept_fold_result_that_cannot_be_read_is_set_aside_and_the_fold_trained_again(prepared, tmp_path):
    params_file, params = prepared
    killed = cli(params_file, "train-folds", *KNN, hook=trains_folds(tmp_path / "killed.txt", kill_at=1))
    assert killed.returncode == -9, killed.stderr[-3000:]
    kept = params.job_dir(Job(*KNN, 0)) / "state" / "finished.json"
    kept.write_text(kept.read_text()[:40])  # cut short by a broken disk
    rerun = cli(params_file, "train-folds", *KNN, hook=trains_folds(tmp_path / "rerun.txt"))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (tmp_path / "rerun.txt").read_text().split() == ["0", "1"]
    assert f"{kept}: not a result" in rerun.stderr and "fold 0 is trained again" in rerun.stderr


# ------------------------------------------------------------------ corrupt training state
@pytest.fixture(scope="module")
def npt_state(prepared, tmp_path_factory) -> tuple[Path, dict]:
    """A finished tiny NPT configuration run with --keep-state: its state directory and result."""
    params_file, _ = prepared
    out = tmp_path_factory.mktemp("npt") / "config0"
    run = cli(params_file, "train-config", *NPT_CONFIG, "--output-dir", str(out), "--keep-state")
    assert run.returncode == 0, run.stderr[-3000:]
    (state,) = out.glob("state/*/state.pt")
    return state.parent, json.loads((out / "result.json").read_text())


def _pickled_object(state: bytes) -> bytes:
    """A valid PyTorch archive that holds a pickled object, which a weights-only load refuses."""
    buffer = io.BytesIO()
    torch.save({"format": 1, "config": argparse.Namespace(steps=6)}, buffer)
    return buffer.getvalue()


CORRUPTIONS = {
    "empty": lambda state: b"",
    "truncated": lambda state: state[: len(state) // 2],
    "garbage": lambda state: b"not a checkpoint\n" * 64,
    "pickled_object": _pickled_object,
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_corrupt_state_file_is_set_aside_and_training_starts_from_scratch(
    prepared, npt_state, tmp_path, capfd, corruption
):
    """One line names the file and what is wrong, the file moves to state.pt.corrupt, and the job
    trains from step 0 to the uninterrupted run's result; a killed writer's temporary files in
    the state directory go at the start. (One case runs the CLI in a process of its own, for
    its real stderr; the others in this one, which is faster.)"""
    params_file, _ = prepared
    state_dir, reference = npt_state
    out = tmp_path / "config0"
    copied = out / "state" / state_dir.name
    shutil.copytree(state_dir, copied)
    state = copied / "state.pt"
    state.write_bytes(CORRUPTIONS[corruption](state.read_bytes()))
    stale = [copied / ".state.pt.1a2b3c4d.tmp", copied / ".pass-in-progress.pt.0badcafe.tmp"]
    for path in stale:
        path.write_bytes(b"half a file")

    args = ["train-config", *NPT_CONFIG, "--output-dir", str(out), "--keep-state"]
    if corruption == "pickled_object":
        run = cli(params_file, *args)
        assert run.returncode == 0, run.stderr[-3000:]
        stderr = run.stderr
    else:
        with _logged_to_stderr():
            assert main(["--params", str(params_file), "--quiet", *args]) == 0
        stderr = capfd.readouterr().err
    lines = [line for line in stderr.splitlines() if str(state) in line]
    assert len(lines) == 1, stderr[-3000:]
    assert "moved aside to state.pt.corrupt; training starts from scratch" in lines[0]
    assert "weights_only" not in stderr and "Traceback" not in stderr
    assert (copied / "state.pt.corrupt").is_file() and state.is_file()  # set aside, then a fresh state
    assert not any(path.exists() for path in stale)
    result = json.loads((out / "result.json").read_text())
    assert result["fit_info"]["resumed_from"] is None
    assert result["metrics"] == reference["metrics"]


@contextlib.contextmanager
def _logged_to_stderr() -> Iterator[None]:
    """Log records on stderr, as the CLI's own process has them."""
    handler = logging.StreamHandler(sys.stderr)
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)


def test_a_corrupt_saved_pass_is_set_aside_and_the_pass_starts_at_its_first_batch(tmp_path, caplog):
    from tabrepro.nn.checkpoint import PASS_FILE, SavedPass

    (tmp_path / PASS_FILE).write_bytes(b"PK\x03\x04 and then nothing")
    saved = SavedPass(tmp_path, lambda: "key", torch.zeros(4))
    assert saved.resume() == 0
    assert (tmp_path / f"{PASS_FILE}.corrupt").is_file() and not (tmp_path / PASS_FILE).exists()
    assert f"{tmp_path / PASS_FILE}: not a PyTorch archive" in caplog.text
    assert "this pass starts at its first batch" in caplog.text


# ------------------------------------------------------------------ corrupt saved scores
SCORE_CORRUPTIONS = {
    "truncated": lambda text: text[: len(text) // 2],
    "empty": lambda text: "",
    "no_metrics": lambda text: json.dumps({**json.loads(text), "metrics": {}}),
}


@pytest.mark.parametrize("corruption", sorted(SCORE_CORRUPTIONS))
def test_a_corrupt_saved_score_is_set_aside_and_only_that_configuration_scored_again(
    prepared, monkeypatch, caplog, corruption
):
    import tabrepro.training as training

    _, params = prepared
    job = Job(*KNN, 0)
    spec = resolve_job(params, job)
    reference = training.run_job(spec, progress=False)
    original = training.fit_config
    fitted: list[int] = []

    def stopping(spec, data, index, config, **kwargs):
        if len(fitted) == 2:
            raise KeyboardInterrupt  # killed while fitting the third configuration
        fitted.append(index)
        return original(spec, data, index, config, **kwargs)

    monkeypatch.setattr(training, "fit_config", stopping)
    with pytest.raises(KeyboardInterrupt):
        training.run_job(spec, progress=False)
    (saved,) = params.job_dir(job).glob("state/tuning/*/config0.json")
    saved.write_text(SCORE_CORRUPTIONS[corruption](saved.read_text()))

    fitted.clear()
    monkeypatch.setattr(training, "fit_config", lambda *a, **k: fitted.append(a[2]) or original(*a, **k))
    result = training.run_job(spec, progress=False)
    best = reference["selection"]["best_index"]
    assert fitted == [0, 2] + ([1] if best == 1 else [])  # configuration 1's saved score was kept
    assert f"{saved}: " in caplog.text and "moved aside to config0.json.corrupt" in caplog.text
    assert "configuration 0 is scored again" in caplog.text
    assert result["metrics"] == reference["metrics"] and result["selection"] == reference["selection"]


# ------------------------------------------------------------------ a full disk
def full_disk_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Writes to files whose name contains `name` fail as on a full disk (ENOSPC)."""
    fdopen = os.fdopen

    class FullDisk:
        def __init__(self, handle):
            self._handle = handle

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, attribute):
            return getattr(self._handle, attribute)

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            self._handle.close()

    def opened(fd, *args, **kwargs):
        handle = fdopen(fd, *args, **kwargs)
        return FullDisk(handle) if name in os.readlink(f"/proc/self/fd/{handle.fileno()}") else handle

    monkeypatch.setattr(os, "fdopen", opened)


def test_a_full_disk_in_prepare_leaves_table_and_schema_together_or_not_at_all(tmp_path, monkeypatch, capsys):
    params_file = write_params(tmp_path, profile())
    processed = tmp_path / "data" / "processed" / "breast_cancer"
    prepare = ["--params", str(params_file), "--quiet", "prepare", "breast_cancer"]
    with monkeypatch.context() as patch:
        full_disk_for(patch, "schema.json")
        assert main(prepare) == 2
    err = capsys.readouterr().err
    assert f"No space left on device: '{processed / 'schema.json'}'" in err and len(err.splitlines()) == 1
    assert not processed.exists() or not os.listdir(processed)  # no table without its schema, no temp file

    assert main(prepare) == 0
    pair = {name: (processed / name).read_bytes() for name in ("table.parquet", "schema.json")}
    with monkeypatch.context() as patch:
        full_disk_for(patch, "schema.json")
        assert main(prepare) == 2
    assert sorted(os.listdir(processed)) == sorted(pair)  # the old pair, as it was
    assert all((processed / name).read_bytes() == data for name, data in pair.items())


def test_a_full_disk_names_the_file_that_could_not_be_written(tmp_path, monkeypatch):
    from tabrepro.io import write_json

    target = tmp_path / "results" / "metrics.json"
    full_disk_for(monkeypatch, "metrics.json")
    with pytest.raises(OSError) as raised:
        write_json(target, {"auroc": 0.5})
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(target)
    assert os.listdir(target.parent) == []


# ------------------------------------------------------------------ temporary files left behind
WRITER = """
import os, signal, sys, time
from tabrepro.io import atomic_open
with atomic_open(sys.argv[1], suffix=sys.argv[2]) as out:
    out.write(b"half a file")
    out.flush()
    print("writing", flush=True)
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)
"""


def writer(target: Path, suffix: str, then: str) -> subprocess.Popen:
    """A process inside atomic_open(target): killed there (`kill`) or holding it (`hold`)."""
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target), suffix, then], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "writing\n"
    return process


@pytest.mark.parametrize(("name", "suffix"), [("state.pt", ".tmp"), ("dataset.arff", ".part")])
def test_a_killed_writers_temporary_file_goes_when_the_file_is_next_written(tmp_path, name, suffix):
    from tabrepro.io import atomic_write

    target = tmp_path / name
    writer(target, suffix, "kill").wait()
    (left,) = tmp_path.glob(f".{name}.*{suffix}")
    atomic_write(target, b"whole")
    assert sorted(os.listdir(tmp_path)) == [name] and target.read_bytes() == b"whole"
    assert not left.exists()


def test_stale_temporary_files_are_swept_but_never_one_a_live_writer_holds(tmp_path):
    from tabrepro.io import remove_stale_temps

    writer(tmp_path / "state.pt", ".tmp", "kill").wait()
    (stale,) = tmp_path.glob(".state.pt.*.tmp")
    live = writer(tmp_path / "predictions.npz", ".tmp", "hold")
    try:
        (held,) = tmp_path.glob(".predictions.npz.*.tmp")
        (tmp_path / ".notes.txt").write_text("a hidden file of the user's")
        assert remove_stale_temps(tmp_path) == [stale]
        assert held.exists() and not stale.exists() and (tmp_path / ".notes.txt").exists()
    finally:
        live.kill()
        live.wait()


def test_dvc_ignores_temporary_and_corrupt_files(tmp_path):
    """.dvcignore leaves them out of tracked directories (DVC's own matcher decides)."""
    shutil.copy(REPO / ".dvcignore", tmp_path / ".dvcignore")
    dvc = Path(sys.executable).with_name("dvc")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run([str(dvc), "init", "--no-scm", "-q"], cwd=tmp_path, check=True, env=env, timeout=120)
    job = Path("results/npt/breast_cancer/knn/fold0")
    ignored = [".metrics.json.1a2b3c4d.tmp", ".dataset.arff.0badcafe.part", ".proba-3.npy.deadbeef.npy"]
    ignored += ["config0.json.corrupt"]
    for name in [*ignored, "metrics.json"]:
        (tmp_path / job / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / job / name).write_text("x")
    check = subprocess.run(
        [str(dvc), "check-ignore", *(str(job / name) for name in [*ignored, "metrics.json"])],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert sorted(check.stdout.split()) == sorted(str(job / name) for name in ignored)
