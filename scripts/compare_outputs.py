"""Prove that a refactoring changed no result: snapshot quick fits under two versions of the code,
then compare the two output trees bit for bit.

    python scripts/compare_outputs.py snapshot OUT [--src SRC]    quick fits into OUT
    python scripts/compare_outputs.py resume BEFORE AFTER          resume BEFORE's killed runs
    python scripts/compare_outputs.py compare DIR_A DIR_B          compare two output trees

`snapshot` runs the code under SRC (a `src/` directory, e.g. of `git archive COMMIT`; default:
this checkout) through its own command line and model classes, with a fixed seed and tiny budgets:

* the workflow's steps (`tabrepro prepare`, `split`, `train`, `train-config`, `select`) for NPT,
  TabNet, the MLP and a random forest on scikit-learn's copy of WDBC (NPT's breast cancer, two
  folds), and for BiSHop, TabNet, FT-Transformer, ResNet, the MLP and a random forest on
  seismic-bumps (BiSHop's Datasets I, four categorical features; fetched from the offline mirror
  named by $TABREPRO_DATA_MIRROR, default http://127.0.0.1:8765);
* the model classes directly (preprocessor, fit context, fit, predict, save_weights) for NPT,
  BiSHop, TabNet, FT-Transformer, ResNet, the MLP and a random forest on WDBC, and for the
  models that embed categories on a synthetic table whose categorical features have missing
  values in the training rows, only outside them, and levels the training rows never show;
* two runs killed after their first checkpoint (NPT, BiSHop), kept for `resume`.

`resume BEFORE AFTER` (run under the new code) resumes BEFORE's killed runs into AFTER and checks
that they resumed (fit_info.resumed_from) and ended with the weights and predictions of the
uninterrupted runs BEFORE recorded.

`compare` walks both trees (e.g. two `snapshot` outputs, or two workflow `results/` or `data/`
trees): JSON files are compared as data without provenance and timing fields (`provenance`,
`wall_time_s`, `peak_memory_mb`, the analyses' `seconds`) and with each tree's root path replaced
by `<root>` (with `--run-dirs A B`, a path under the directory each run ran in is read relative to
it, so that a path one version recorded absolute and the other relative to its run compares
equal); `.pt` files tensor by tensor (torch.equal, and whether the bytes are equal too); `.npz`
files array by array (dtype, shape and bytes); every other file byte for byte. Exit status 1 when anything
differs or exists on one side only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get("TABREPRO_DATA_MIRROR", "http://127.0.0.1:8765")
VOLATILE_FIELDS = frozenset({"provenance", "wall_time_s", "peak_memory_mb", "seconds"})
CODE_LABEL = Path("code.txt")  # what code a snapshot ran (`snapshot --label`); not compared

# ------------------------------------------------------------------------------ the fixed fits
TINY_OVERRIDES: dict[str, dict[str, Any]] = {
    "npt": {
        "max_configs": 2,
        "params": {
            "embed_dim": 16,
            "n_layers": 2,
            "n_heads": 4,
            "lr": 0.002,
            "max_steps": 30,
            "checkpoint_every_steps": 10,
            "device": "cpu",
        },
    },
    "bishop": {
        "max_configs": 1,
        "params": {
            "embed_dim": 8,
            "patch_size": 4,
            "d_model": 16,
            "n_heads": 2,
            "ffn_dim": 32,
            "n_pooling": 2,
            "n_levels": 2,
            "n_decoded": 8,
            "head_hidden": [1.0],
            "batch_size": 128,
            "max_epochs": 2,
            "device": "cpu",
        },
    },
    "tabnet": {"max_configs": 1, "params": {"max_epochs": 3, "patience": 2}},
    "mlp": {"max_configs": 1, "params": {"max_epochs": 5, "patience": 2}},
    "ft_transformer": {"max_configs": 1, "params": {"n_blocks": 1, "d_block": 16, "max_epochs": 3, "patience": 2}},
    "resnet": {"max_configs": 1, "params": {"n_blocks": 1, "d_block": 16, "max_epochs": 3, "patience": 2}},
    "random_forest": {"max_configs": 1, "params": {"n_estimators": 10}},
}
NPT_MODELS = ["npt", "tabnet", "mlp", "random_forest"]
BISHOP_MODELS = ["bishop", "tabnet", "ft_transformer", "resnet", "mlp", "random_forest"]
PER_CONFIG = {"npt", "bishop"}

# The runs killed after their first checkpoint: longer than the fits above, so a kill lands mid-run.
RESUME_RUNS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "npt": ("npt", "breast_cancer", {"max_steps": 120, "checkpoint_every_steps": 10}),
    "bishop": ("bishop", "seismic_bumps", {"max_epochs": 8}),
}


def _profile(models_npt: list[str], models_bishop: list[str], overrides: dict[str, dict]) -> dict:
    return {
        "description": "compare_outputs: tiny fits",
        "max_configs": 1,
        "folds": [0, 1],
        "model_overrides": overrides,
        "papers": {
            "npt": {"datasets": ["breast_cancer"], "models": models_npt},
            "bishop": {"datasets": ["seismic_bumps"], "models": models_bishop},
        },
    }


def write_params(src: Path, work: Path) -> Path:
    """The checked-out version's params.yaml with the tiny profiles added; data/results in `work`."""
    raw = yaml.safe_load((src.parent / "params.yaml").read_text())
    raw["paths"] = {"data": str(work / "data"), "results": str(work / "results")}
    raw["profiles"]["compare"] = _profile(NPT_MODELS, BISHOP_MODELS, TINY_OVERRIDES)
    for name, (model, _, changes) in RESUME_RUNS.items():
        override = json.loads(json.dumps(TINY_OVERRIDES[model]))
        override["params"].update(changes)
        override["max_configs"] = 1
        raw["profiles"][f"compare_resume_{name}"] = _profile(
            [model] if model == "npt" else [], [model] if model == "bishop" else [], {model: override}
        )
    raw["profile"] = "compare"
    path = work / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


class Runner:
    """Runs `tabrepro` (and this script's own in-process parts) under one version of the code."""

    def __init__(self, src: Path, work: Path):
        self.src = src.resolve()
        self.work = work
        self.env = {**os.environ, "PYTHONPATH": str(self.src), "TABREPRO_DATA_MIRROR": MIRROR}
        self.env.pop("TABREPRO_DATA_DIR", None)
        self.env.pop("TABREPRO_RESULTS_DIR", None)

    def command(self, *args: str, profile: str | None = None) -> list[str]:
        extra = ["--profile", profile] if profile else []
        return [sys.executable, "-m", "tabrepro.cli", "--params", str(self.work / "params.yaml"), *extra, *args, "-q"]

    def tabrepro(self, *args: str, profile: str | None = None) -> None:
        print("  tabrepro", " ".join(args), flush=True)
        subprocess.run(self.command(*args, profile=profile), env=self.env, check=True, cwd=self.work)


def run_workflow_steps(runner: Runner) -> None:
    for source in ("breast_cancer", "seismic_bumps"):
        if source != "breast_cancer":
            runner.tabrepro("fetch", source)
        runner.tabrepro("prepare", source)
    jobs = [("npt", "breast_cancer", m, fold) for m in NPT_MODELS for fold in (0, 1)]
    jobs += [("bishop", "seismic_bumps", m, 0) for m in BISHOP_MODELS]
    for paper, dataset in (("npt", "breast_cancer"), ("bishop", "seismic_bumps")):
        runner.tabrepro("split", paper, dataset)
    for paper, dataset, model, fold in jobs:
        if model in PER_CONFIG:
            for config in range(TINY_OVERRIDES[model]["max_configs"]):
                runner.tabrepro("train-config", paper, dataset, model, str(fold), str(config))
            runner.tabrepro("select", paper, dataset, model, str(fold))
        else:
            runner.tabrepro("train", paper, dataset, model, str(fold))


def _state_files(directory: Path) -> list[Path]:
    return sorted(directory.rglob("state.pt"))


def run_killed(runner: Runner, out: Path) -> None:
    """Each RESUME_RUNS entry: an uninterrupted run (the reference) and one killed at its first
    checkpoint, both under this version of the code."""
    for name, (model, dataset, _) in RESUME_RUNS.items():
        paper = "npt" if model == "npt" else "bishop"
        profile = f"compare_resume_{name}"
        runner.tabrepro(
            "train-config", paper, dataset, model, "0", "0", "--output-dir", str(out / name / "uninterrupted"),
            profile=profile,
        )  # fmt: skip
        killed = out / name / "killed"
        command = runner.command(
            "train-config", paper, dataset, model, "0", "0", "--output-dir", str(killed), profile=profile
        )
        print("  (killed at its first checkpoint)", " ".join(command[3:]), flush=True)
        process = subprocess.Popen(command, env=runner.env, cwd=runner.work, start_new_session=True)
        while process.poll() is None and not _state_files(killed):
            time.sleep(0.02)
        if process.poll() is not None:
            raise SystemExit(f"{name}: the run ended before it could be killed; raise its budget")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        (out / name / "killed_at.txt").write_text(f"{[str(p.relative_to(killed)) for p in _state_files(killed)]}\n")


# ------------------------------------------------------------------------------ direct model fits
def _fit_context(preprocessor: Any, X_test: np.ndarray, work_dir: Path) -> Any:
    """The FitContext of either version: (kind, width) pairs before the FeatureLayout, the
    preprocessor's layout after."""
    from tabrepro.models.base import FitContext

    fields = {f.name for f in dataclasses.fields(FitContext)}
    if "feature_groups" in fields:
        return FitContext(feature_groups=tuple(preprocessor.feature_groups), X_test=X_test, work_dir=work_dir)
    return FitContext(feature_layout=preprocessor.feature_layout, X_test=X_test, work_dir=work_dir)


def _wdbc_frame() -> tuple[Any, Any]:
    import pandas as pd
    from sklearn.datasets import load_breast_cancer

    from tabrepro.data.table import ColumnSpec, TableSchema

    data = load_breast_cancer(as_frame=True)
    frame = data.frame.rename(columns=lambda c: str(c).replace(" ", "_"))
    frame["target"] = frame["target"].map({0: "malignant", 1: "benign"}).astype(object)
    features = [c for c in frame.columns if c != "target"]
    columns = [ColumnSpec(c, "continuous") for c in features]
    columns.append(ColumnSpec("target", "categorical", ["benign", "malignant"]))
    schema = TableSchema(dataset="wdbc", task="binary", target="target", columns=columns, n_rows=len(frame))
    return pd.DataFrame(frame), schema


def _synthetic_frame() -> tuple[Any, Any]:
    """Categorical features with missing values in training (a missing column), missing only
    outside training (all-zero rows), and a level the training rows never show."""
    import pandas as pd

    from tabrepro.data.table import ColumnSpec, TableSchema

    rng = np.random.default_rng(7)
    n = 400
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    x2[rng.random(n) < 0.1] = np.nan
    a = rng.choice(["a0", "a1", "a2", "a3"], size=n).astype(object)
    a[rng.random(n) < 0.1] = None  # missing everywhere, training included
    b = rng.choice(["b0", "b1", "b2"], size=n).astype(object)
    b[300:][rng.random(100) < 0.3] = None  # missing only in rows 300.. (validation and test)
    b[350:360] = "b3"  # a level that only test rows have
    c = rng.choice(["no", "yes"], size=n).astype(object)
    signal_ = x1 + (a == "a1") * 1.5 - (b == "b2") + (c == "yes") * 0.5
    y = np.where(signal_ + rng.normal(scale=0.5, size=n) > 0.3, "pos", "neg").astype(object)
    frame = pd.DataFrame({"x1": x1, "x2": x2, "a": a, "b": b, "c": c, "y": y})
    columns = [
        ColumnSpec("x1", "continuous"),
        ColumnSpec("x2", "continuous"),
        ColumnSpec("a", "categorical", ["a0", "a1", "a2", "a3"]),
        ColumnSpec("b", "categorical", ["b0", "b1", "b2", "b3"]),
        ColumnSpec("c", "categorical", ["no", "yes"]),
        ColumnSpec("y", "categorical", ["neg", "pos"]),
    ]
    schema = TableSchema(dataset="synthetic", task="binary", target="y", columns=columns, n_rows=n)
    return frame, schema


DIRECT_PARAMS: dict[str, dict[str, Any]] = {
    "npt": {**TINY_OVERRIDES["npt"]["params"], "max_steps": 20},
    "bishop": {**TINY_OVERRIDES["bishop"]["params"], "head_hidden": (1.0,)},
    "tabnet": {
        "n_d": 8,
        "n_a": 8,
        "n_steps": 3,
        "max_epochs": 3,
        "patience": 2,
        "batch_size": 64,
        "virtual_batch_size": 32,
    },
    "ft_transformer": {"n_blocks": 1, "d_block": 16, "max_epochs": 3, "patience": 2, "batch_size": 64},
    "resnet": {"n_blocks": 1, "d_block": 16, "max_epochs": 3, "patience": 2, "batch_size": 64},
    "mlp": {"hidden_layer_sizes": [16], "max_epochs": 5, "patience": 2, "batch_size": 64},
    "random_forest": {"n_estimators": 10},
}
DIRECT_RUNS = {
    "wdbc": ["npt", "bishop", "tabnet", "ft_transformer", "resnet", "mlp", "random_forest"],
    "synthetic": ["npt", "bishop", "tabnet", "ft_transformer"],
}


def run_direct(out: Path) -> None:
    """Fit each model class on fixed splits of the two tables; runs inside the checked-out code."""
    from tabrepro.models.registry import get_model_class
    from tabrepro.preprocessing import Preprocessor, TargetEncoder

    for table, models in DIRECT_RUNS.items():
        frame, schema = _wdbc_frame() if table == "wdbc" else _synthetic_frame()
        order = np.random.default_rng(3).permutation(len(frame)) if table == "wdbc" else np.arange(len(frame))
        n = len(frame)
        train, val, test = order[: int(0.6 * n)], order[int(0.6 * n) : int(0.8 * n)], order[int(0.8 * n) :]
        pre = Preprocessor().fit(frame, schema, train)
        target = TargetEncoder().fit(frame, schema, train)
        X, y = pre.transform(frame), target.transform(frame)
        for name in models:
            destination = out / table / name
            destination.mkdir(parents=True, exist_ok=True)
            print(f"  direct {table}/{name}", flush=True)
            model = get_model_class(name)("binary", dict(DIRECT_PARAMS[name]), seed=11, n_jobs=1, n_classes=2)
            context = _fit_context(pre, X[test], destination / "state")
            model.fit(X[train], y[train], X[val], y[val], context=context)
            np.savez(
                destination / "outputs.npz",
                val=model.predict_proba(X[val]),
                test=model.predict_proba(X[test]),
                test_labels=model.predict(X[test]),
            )
            if name != "random_forest":
                model.save_weights(destination / "weights.pt")
            info = {k: v for k, v in model.fit_info_.items() if k not in VOLATILE_FIELDS}
            (destination / "fit_info.json").write_text(json.dumps(info, indent=1, sort_keys=True, default=str) + "\n")


# ------------------------------------------------------------------------------ comparing
def _normalise(value: Any, roots: tuple[str, ...], run_dirs: tuple[str, ...] = ()) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v, roots, run_dirs) for k, v in value.items() if k not in VOLATILE_FIELDS}
    if isinstance(value, list):
        return [_normalise(v, roots, run_dirs) for v in value]
    if isinstance(value, str):
        for run_dir in run_dirs:
            if value.startswith(run_dir + "/"):
                value = value[len(run_dir) + 1 :]
                break
        for root in roots:
            value = value.replace(root, "<root>")
        return value
    return value


def _same(a: Any, b: Any, where: str, problems: list[str]) -> None:
    """Recursive equality: tensors with torch.equal (and dtype), floats NaN-aware and exact."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            problems.append(f"{where}: tensor vs {type(b).__name__}")
        elif a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
            if a.dtype == b.dtype and a.shape == b.shape and a.is_floating_point():
                same_nan = torch.equal(torch.isnan(a), torch.isnan(b))
                if same_nan and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)):
                    return
            problems.append(f"{where}: tensors differ ({a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)})")
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            problems.append(f"{where}: keys differ: {sorted(map(str, set(a) ^ set(b)))[:10]}")
        for key in set(a) & set(b):
            _same(a[key], b[key], f"{where}.{key}", problems)
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            problems.append(f"{where}: {type(a).__name__}[{len(a)}] vs {type(b).__name__}[{len(b)}]")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]", problems)
        return
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return
    if type(a) is not type(b) or a != b:
        problems.append(f"{where}: {a!r} vs {b!r}"[:300])


def compare_file(a: Path, b: Path, roots: tuple[str, ...], run_dirs: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """(problems, how it was compared)."""
    problems: list[str] = []
    if a.suffix == ".json":
        left, right = (_normalise(json.loads(p.read_text()), roots, run_dirs) for p in (a, b))
        _same(left, right, a.name, problems)
        return problems, "json"
    if a.suffix == ".pt":
        import torch

        left, right = (torch.load(p, map_location="cpu", weights_only=True) for p in (a, b))
        _same(left, right, a.name, problems)
        return problems, "tensors, bytes equal" if a.read_bytes() == b.read_bytes() else "tensors, bytes differ"
    if a.suffix == ".npz":
        with np.load(a, allow_pickle=False) as left, np.load(b, allow_pickle=False) as right:
            if sorted(left.files) != sorted(right.files):
                problems.append(f"{a.name}: arrays {sorted(left.files)} vs {sorted(right.files)}")
            for key in set(left.files) & set(right.files):
                x, y = left[key], right[key]
                if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                    problems.append(f"{a.name}[{key}]: arrays differ")
        return problems, "arrays"
    if a.read_bytes() != b.read_bytes():
        problems.append(f"{a.name}: bytes differ")
    return problems, "bytes"


def _spellings(*directories: Path) -> tuple[str, ...]:
    """Each directory as given and resolved, longest first (so that no prefix of another wins)."""
    return tuple(sorted({str(d) for d in directories} | {str(d.resolve()) for d in directories}, key=len, reverse=True))


def compare_trees(
    dir_a: Path,
    dir_b: Path,
    record: Path | None = None,
    run_dirs: tuple[Path, ...] = (),
    code: tuple[str, str] | None = None,
) -> int:
    """Print every difference; with `record`, also write them as JSON (each file's first few
    problems), so that a check of a code change can be committed beside the change. `run_dirs`:
    the directories the two runs ran in; `code`: what code each tree came from, for the record
    (default: each snapshot's code.txt)."""
    roots = _spellings(dir_a, dir_b)
    spelt_run_dirs = _spellings(*run_dirs)
    files_a = {p.relative_to(dir_a) for p in dir_a.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    files_b = {p.relative_to(dir_b) for p in dir_b.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    files_a, files_b = files_a - {CODE_LABEL}, files_b - {CODE_LABEL}
    kinds: dict[str, int] = {}
    only = {str(rel): "A" if rel in files_a else "B" for rel in sorted(files_a ^ files_b)}
    differs: dict[str, list[str]] = {}
    for rel, side in only.items():
        print(f"ONLY IN {side}: {rel}")
    for rel in sorted(files_a & files_b):
        problems, how = compare_file(dir_a / rel, dir_b / rel, roots, spelt_run_dirs)
        kinds[how] = kinds.get(how, 0) + 1
        if problems:
            differs[str(rel)] = problems[:5]
            print(f"DIFFERS: {rel}")
            for problem in problems[:20]:
                print(f"    {problem}")
    failures = len(only) + len(differs)
    print(f"{len(files_a & files_b)} files in both trees, compared as: {dict(sorted(kinds.items()))}")
    print(f"{failures} file(s) differ or exist on one side only" if failures else "identical")
    if record is not None:
        summary = {
            "a": Path(dir_a).name,  # names only: a record names no local path
            "b": Path(dir_b).name,
            "code": dict(zip("ab", code))
            if code
            else {side: _snapshot_code(d) for side, d in (("a", dir_a), ("b", dir_b))},
            "files_in_both": len(files_a & files_b),
            "compared_as": dict(sorted(kinds.items())),
            "only_in": only,
            "differs": differs,
        }
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if failures else 0


def _snapshot_code(out: Path) -> str | None:
    """The code a snapshot ran (`code.txt`, written by `snapshot --label`), if it says."""
    path = out / CODE_LABEL
    return path.read_text().strip() if path.exists() else None


# ------------------------------------------------------------------------------ resuming
def resume(before: Path, after: Path) -> int:
    """Resume BEFORE's killed runs under this checkout's code; compare with the uninterrupted ones."""
    work = after / "work"
    work.mkdir(parents=True, exist_ok=True)
    # The same data, splits and params as the runs that were killed.
    for name in ("data", "params.yaml"):
        if not (work / name).exists():
            source = before / "work" / name
            (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
    params = (work / "params.yaml").read_text().replace(str(before / "work"), str(work))
    (work / "params.yaml").write_text(params)
    runner = Runner(REPO / "src", work)
    failures = 0
    for name, (model, dataset, _) in RESUME_RUNS.items():
        paper = "npt" if model == "npt" else "bishop"
        target = after / "resumed" / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(before / "killed" / name / "killed", target)
        runner.tabrepro(
            "train-config", paper, dataset, model, "0", "0", "--output-dir", str(target),
            profile=f"compare_resume_{name}",
        )  # fmt: skip
        result = json.loads((target / "result.json").read_text())
        resumed_from = result["fit_info"].get("resumed_from")
        print(f"  {name}: resumed from {resumed_from!r}")
        if not resumed_from:
            print(f"  {name}: did NOT resume from the old state file")
            failures += 1
        reference = before / "killed" / name / "uninterrupted"
        for file in ("weights.pt", "predictions.npz"):
            problems, how = compare_file(reference / file, target / file, ())
            print(f"  {name}/{file} vs the uninterrupted run ({how}): {'identical' if not problems else problems}")
            failures += bool(problems)
    return 1 if failures else 0


# ------------------------------------------------------------------------------ command line
def snapshot(out: Path, src: Path) -> None:
    out = out.resolve()
    if out.exists():
        raise SystemExit(f"{out} exists; give a fresh directory")
    work = out / "work"
    work.mkdir(parents=True)
    write_params(src, work)
    runner = Runner(src, work)
    print(f"snapshot of {src} into {out}", flush=True)
    subprocess.run(
        [sys.executable, "-c", "import tabrepro, sys; print('  tabrepro from', tabrepro.__file__)"],
        env=runner.env,
        check=True,
    )
    run_workflow_steps(runner)
    subprocess.run([sys.executable, __file__, "_direct", str(out / "direct")], env=runner.env, check=True)
    run_killed(runner, out / "killed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("snapshot", help="quick fits under one version of the code into OUT")
    p.add_argument("out", type=Path)
    p.add_argument("--src", type=Path, default=REPO / "src", help="the code's src/ directory (default: this checkout)")
    p.add_argument("--label", help="what code SRC is (e.g. a commit), written to OUT/code.txt for records")
    p = sub.add_parser("resume", help="resume BEFORE's killed runs under this checkout's code, into AFTER")
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p = sub.add_parser("compare", help="compare two output trees")
    p.add_argument("dir_a", type=Path)
    p.add_argument("dir_b", type=Path)
    p.add_argument("--record", type=Path, help="also write the differences as JSON to this file")
    p.add_argument(
        "--run-dirs",
        nargs=2,
        type=Path,
        metavar=("RUN_A", "RUN_B"),
        default=(),
        help="the directories the runs ran in: a path recorded under one is compared relative to it",
    )
    p.add_argument("--code", nargs=2, metavar=("CODE_A", "CODE_B"), help="what code each tree came from (the record's)")
    p = sub.add_parser("_direct", help=argparse.SUPPRESS)
    p.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "snapshot":
        snapshot(args.out, args.src)
        if args.label:
            (args.out / CODE_LABEL).write_text(args.label + "\n")
        return 0
    if args.command == "resume":
        return resume(args.before.resolve(), args.after.resolve())
    if args.command == "_direct":
        run_direct(args.out)
        return 0
    for directory in (args.dir_a, args.dir_b):
        if not directory.is_dir():
            print(f"compare_outputs: {directory} is not a directory", file=sys.stderr)
            return 2
    return compare_trees(args.dir_a, args.dir_b, args.record, tuple(args.run_dirs), args.code)


if __name__ == "__main__":
    sys.exit(main())
