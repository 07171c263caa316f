"""DVC on top of the Snakemake workflow: repro, push, a fresh clone, pull, and selective reruns.

The round trip runs the real dvc.yaml on a tiny profile (breast cancer, k-NN and a tiny NPT, one
fold) in a scratch git repository whose DVC remote is the committed default location.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, copy_workflow, tiny_profile

BIN = Path(sys.executable).parent
GIT = shutil.which("git")
# The committed .dvc/config puts the remote beside the checkout: <parent>/tabrepro-dvc-remote.
DEFAULT_REMOTE_NAME = "tabrepro-dvc-remote"
TOUCH = ["snakemake", "--cores", "1", "--touch", "--forceall", "--quiet", "--", "all"]

pytestmark = [pytest.mark.live, pytest.mark.skipif(GIT is None, reason="git is needed for a DVC repository")]


def _env(tmp: Path) -> dict:
    """The venv's tools first on PATH (stage commands call `snakemake`); no user-level DVC or git config."""
    env = dict(os.environ)
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "DVC_NO_ANALYTICS": "1",
            "DVC_GLOBAL_CONFIG_DIR": str(tmp / "dvc-global"),
            "DVC_SYSTEM_CONFIG_DIR": str(tmp / "dvc-system"),
            "DVC_SITE_CACHE_DIR": str(tmp / "dvc-site-cache"),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "test",
            "GIT_AUTHOR_EMAIL": "test@example.org",
            "GIT_COMMITTER_NAME": "test",
            "GIT_COMMITTER_EMAIL": "test@example.org",
        }
    )
    env.pop("TABREPRO_DATA_DIR", None)  # dvc.yaml tracks the paths of params.yaml
    return env


def run(args: list[str], cwd: Path, env: dict, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run a command to completion (bounded by `timeout`); fail the test with its output if it fails."""
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def dvc_tiny_profile(raw: dict) -> None:
    raw["profiles"]["dvc_tiny"] = tiny_profile(
        ["knn", "npt"],
        description="DVC round-trip test",
        model_overrides={
            "npt": {
                "max_configs": 1,
                "params": {
                    "embed_dim": 8,
                    "n_layers": 2,
                    "n_heads": 2,
                    "max_steps": 4,
                    "eval_every_epochs": 2,
                    "checkpoint_every_steps": 2,
                },
            }
        },
    )
    raw["profile"] = "dvc_tiny"


def make_repo(dest: Path, env: dict, mutate=None) -> Path:
    """A git repository holding the workflow and the committed DVC files, as a clone would."""
    dest.mkdir()
    copy_workflow(dest, mutate)
    for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
        shutil.copy(REPO / name, dest / name)
    (dest / ".dvc").mkdir()
    for name in ("config", ".gitignore"):
        shutil.copy(REPO / ".dvc" / name, dest / ".dvc" / name)
    run([GIT, "init", "-q", "."], dest, env)
    run([GIT, "add", "-A"], dest, env)
    run([GIT, "commit", "-q", "-m", "workflow"], dest, env)
    return dest


def tracked_files(root: Path) -> dict[str, bytes]:
    """Every file under data/ and results/ that DVC tracks (state/ is .dvcignore'd)."""
    files = {}
    for top in ("data", "results"):
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and "state" not in path.relative_to(root).parts:
                files[str(path.relative_to(root))] = path.read_bytes()
    return files


def edit_params(root: Path, change) -> None:
    raw = yaml.safe_load((root / "params.yaml").read_text())
    change(raw)
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))


def changed_stages(root: Path, env: dict) -> set[str]:
    out = run(["dvc", "status", "--json"], root, env).stdout
    return set(json.loads(out or "{}"))


def test_dvc_files_are_committed_and_the_pipeline_parses(tmp_path):
    """Fast check: a fresh checkout is a DVC repo whose four stages resolve against params.yaml."""
    env = _env(tmp_path)
    config = (REPO / ".dvc" / "config").read_text()
    assert "remote = store" in config and f"url = ../../{DEFAULT_REMOTE_NAME}" in config
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())
    assert list(spec["stages"]) == ["data", "train", "tables", "report"]
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for name, stage in spec["stages"].items():
        assert "foreach" not in stage and "matrix" not in stage  # the job matrix stays in Snakemake
        for key in stage["params"]:  # every tracked key exists (a renamed key would go unnoticed)
            node = params
            for part in key.replace("${profile}", params["profile"]).split("."):
                assert isinstance(node, dict) and part in node, f"stage {name}: no {key} in params.yaml"
                node = node[part]
    work = make_repo(tmp_path / "repo", env)
    listed = run(["dvc", "stage", "list"], work, env, timeout=60).stdout
    assert "results/npt" in listed and "data/splits" in listed and "results/tables" in listed
    lock_free = run(["dvc", "status", "--json"], work, env, timeout=60).stdout
    assert set(json.loads(lock_free)) == {"data", "train", "tables", "report"}  # nothing run yet
    assert run(["dvc", "remote", "default"], work, env, timeout=60).stdout.strip() == "store"


def test_the_paper_blocks_of_dvc_yaml_are_generated_from_params_yaml():
    """Every line of dvc.yaml that names a paper comes from params.yaml's `papers`
    (tabrepro.dvc_blocks); a stale block names itself here."""
    from tabrepro.dvc_blocks import BLOCKS, update_dvc_yaml

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    assert update_dvc_yaml(raw, REPO / "dvc.yaml", check=True) == [], "regenerate with tabrepro.dvc_blocks"
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())
    papers = list(raw["papers"])
    assert spec["stages"]["train"]["outs"] == [{f"${{paths.results}}/{p}": {"persist": True}} for p in papers]
    assert spec["vars"] == [
        {
            "paper_results": " ".join(f"{raw['paths']['results']}/{p}" for p in papers),
            "tables_rules": " ".join(f"tables_{p}" for p in papers),
        }
    ]
    text = (REPO / "dvc.yaml").read_text()
    outside = [line for line in _outside_blocks(text, BLOCKS) if not line.lstrip().startswith("#")]
    for paper in papers:  # outside the generated blocks, no line of a stage names a paper
        assert not [line for line in outside if f"/{paper}" in line or f".{paper}." in line or f"_{paper}" in line]


def _outside_blocks(text: str, names) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith("# papers:begin "):
            inside = True
        elif line.strip().startswith("# papers:end "):
            inside = False
        elif not inside:
            lines.append(line)
    assert not inside and all(f"# papers:begin {name}" in text for name in names)
    return lines


@pytest.mark.slow
def test_repro_push_clone_pull_and_selective_reruns(tmp_path):
    env = {**_env(tmp_path), "TABREPRO_KEEP_STATE": "1"}  # NPT's state stays: the clone lacks it by .dvcignore
    work = make_repo(tmp_path / "repo", env, dvc_tiny_profile)

    # 1. dvc repro runs data -> train -> tables -> report through Snakemake.
    repro = run(["dvc", "repro"], work, env, timeout=600)
    assert (work / "results/report/index.html").is_file()
    for stage in ("data", "train", "tables", "report"):
        assert f"Running stage '{stage}'" in repro.stdout
    job = work / "results/npt/breast_cancer/npt/fold0"
    assert (job / "weights.pt").stat().st_size > 0 and (job / "config0/state").is_dir()
    assert "k-NN" in (work / "results/tables/npt/table10.md").read_text()
    assert (work / "data/splits/npt/breast_cancer/fold0.npy").is_file()
    run([GIT, "add", "dvc.lock"], work, env)
    run([GIT, "commit", "-q", "-m", "dvc repro"], work, env)

    # 2. Push to the default remote (beside the checkout), clone, pull: the same bytes come back.
    run(["dvc", "push"], work, env)
    assert any((tmp_path / DEFAULT_REMOTE_NAME).rglob("*")), "nothing pushed to the default remote"
    clone = tmp_path / "clone"
    run([GIT, "clone", "-q", str(work), str(clone)], tmp_path, env)
    run(["dvc", "pull"], clone, env)
    original, restored = tracked_files(work), tracked_files(clone)
    assert sorted(restored) == sorted(original)
    assert restored == original
    for must in (
        "data/splits/npt/breast_cancer/splits.json",
        "data/processed/breast_cancer/table.parquet",
        "results/npt/breast_cancer/npt/fold0/weights.pt",
        "results/tables/npt/table10.csv",
    ):
        assert must in restored
    assert not (clone / "results/npt/breast_cancer/npt/fold0/config0/state").exists()  # .dvcignore

    # 3. Snakemake after a pull: align timestamps and records, then nothing is left to do.
    run(TOUCH, clone, env)
    dry = run(["snakemake", "-n", "--", "all"], clone, env)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    assert changed_stages(clone, env) == set()

    # 4. Selective invalidation: another profile's settings touch nothing; a table title only the
    #    tables stage, which `dvc repro tables` then reruns on its own.
    edit_params(clone, lambda raw: raw["profiles"]["paper"].update(description="edited"))
    assert changed_stages(clone, env) == set()
    edit_params(clone, lambda raw: raw["papers"]["npt"]["tables"]["table10"].update(title="Our AUROC"))
    assert changed_stages(clone, env) == {"tables"}
    single = run(["dvc", "repro", "tables"], clone, env, timeout=300)
    assert "Running stage 'tables'" in single.stdout
    assert "Running stage 'train'" not in single.stdout and "Running stage 'data'" not in single.stdout
    assert "Our AUROC" in (clone / "results/tables/npt/table10.md").read_text()
    after = tracked_files(clone)
    assert {k for k in original if after[k] != original[k]} <= {
        f"results/tables/npt/table10.{ext}" for ext in ("md", "tex")
    }
    assert changed_stages(clone, env) == {"report"}  # the report shows the tables: now out of date

    # 5. A k-NN hyperparameter changes the train stage only; Snakemake reruns just the k-NN job and
    #    DVC the tables after it.
    edit_params(
        clone, lambda raw: raw["search_spaces"]["npt_small"]["knn"]["params"].update(n_neighbors={"choice": [3, 5, 7]})
    )
    assert changed_stages(clone, env) == {"train", "report"}
    npt_metrics = clone / "results/npt/breast_cancer/npt/fold0/metrics.json"
    npt_before = npt_metrics.stat().st_mtime_ns
    rerun = run(["dvc", "repro"], clone, env, timeout=600)
    assert "Stage 'data' didn't change, skipping" in rerun.stdout
    assert "Running stage 'train'" in rerun.stdout and "Running stage 'tables'" in rerun.stdout
    assert npt_metrics.stat().st_mtime_ns == npt_before  # Snakemake reran only the k-NN job
    knn = json.loads((clone / "results/npt/breast_cancer/knn/fold0/metrics.json").read_text())
    assert knn["selected_config"]["n_neighbors"] in (3, 5, 7)
    assert changed_stages(clone, env) == set()

    # 6. The remote's location is a local, uncommitted setting.
    elsewhere = tmp_path / "elsewhere"
    run(["dvc", "remote", "modify", "--local", "store", "url", str(elsewhere)], clone, env)
    run(["dvc", "push"], clone, env)
    assert any(elsewhere.rglob("*")) and (clone / ".dvc/config.local").is_file()
    assert run([GIT, "status", "--porcelain", "--", ".dvc"], clone, env).stdout == ""  # git-ignored


def test_dvc_yaml_command_says_when_the_paper_blocks_are_stale_and_rewrites_them(tmp_path, capsys):
    from tabrepro.cli import main

    dvc_file = tmp_path / "dvc.yaml"
    current = (REPO / "dvc.yaml").read_text()
    dvc_file.write_text(current.replace("- papers.bishop.datasets\n", "", 1))  # a paper's line lost
    argv = ["--params", str(REPO / "params.yaml"), "dvc-yaml", "--dvc-file", str(dvc_file)]
    with pytest.raises(SystemExit) as stale:
        main([*argv, "--check"])
    assert stale.value.code == 1 and "stale blocks data-params" in capsys.readouterr().err
    assert main(argv) in (0, None) and dvc_file.read_text() == current
    assert main([*argv, "--check"]) in (0, None) and "current" in capsys.readouterr().out
