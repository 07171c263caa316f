"""How far apart two independent runs of NPT's 10-fold protocol land, against the SE a verdict gives.

A cell's mean under `protocols.npt_cv10` is scored with SE = SD(fold metrics) / sqrt(k). This
script runs the real protocol (the project's splits, search and training, `tabrepro.training`)
once per root seed, so that split, search and model seeds all change (`tabrepro.seeding`), and
compares the spread of the protocol's means across seeds with that SE and with Nadeau and
Bengio's corrected SE, sqrt((1/k + n_test/n_train) * s^2), which allows for the folds' training
sets overlapping.

    python scripts/calibrate_spread.py --seeds 20 --mirror http://127.0.0.1:PORT

Each finished (dataset, model, seed) is written into --out as it finishes, so a stopped run
continues where it stopped; the summary is recomputed from every unit held after each one.
Tables, splits and job state go under --work-dir, never into the repository's data/ or results/
($TABREPRO_DATA_DIR and $TABREPRO_RESULTS_DIR are ignored here for that reason).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

from tabrepro.cli import is_input_error, one_line
from tabrepro.errors import InputError

REPO = Path(__file__).resolve().parents[1]
PAPER = "npt"
DEFAULT_OUT = REPO / "records" / "calibration" / "split_seed_spread.json"
METRICS = {"binary": ("accuracy_pct", "nll", "auroc"), "regression": ("rmse", "mse")}
# Settings a unit's numbers depend on: a record made under others is not continued.
SETTING_KEYS = ("paper", "profile", "max_configs", "protocol")


class RecordError(InputError):
    """An --out file that cannot be continued (unreadable, or made under other settings)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="number of root seeds (default 20)")
    parser.add_argument("--first-seed", type=int, default=0, help="first root seed; the rest follow (default 0)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"record to write (default {DEFAULT_OUT})")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/calib"), help="tables, splits, job state")
    parser.add_argument("--datasets", nargs="+", default=["breast_cancer", "boston"], help="NPT datasets (npt_cv10)")
    parser.add_argument("--models", nargs="+", default=["xgboost", "knn"], help="in-job models to run")
    parser.add_argument("--max-configs", type=int, default=6, help="search budget per job (default 6, as quick)")
    parser.add_argument("--profile", default="quick", help="profile of params.yaml the runs use (default quick)")
    parser.add_argument("--params", type=Path, default=REPO / "params.yaml", help="base parameters file")
    parser.add_argument("--mirror", default=os.environ.get("TABREPRO_DATA_MIRROR"), help="data mirror URL or folder")
    parser.add_argument("--threads", type=int, default=1, help="threads per model fit (default 1)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.max_configs < 1 or args.threads < 1:
        parser.error("--seeds, --max-configs and --threads must be at least 1")
    return args


# ----------------------------------------------------------------------------------- the runs
def seed_params_file(base: dict, seed: int, args: argparse.Namespace, data_dir: Path, results_dir: Path) -> Path:
    """A params file for one root seed: the base file with its seed, paths and search cap replaced."""
    raw = copy.deepcopy(base)
    raw["seed"] = seed
    raw["paths"] = {"data": str(data_dir), "results": str(results_dir)}
    raw["profiles"][args.profile]["max_configs"] = args.max_configs
    path = args.work_dir / f"seed{seed}" / "params.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def cli(*argv: str) -> None:
    """One `tabrepro` command, in this process; its one-line error (if any) ends the run."""
    from tabrepro.cli import main

    if main(["--quiet", *argv]) != 0:
        raise InputError(f"`tabrepro {' '.join(argv)}` failed (its error is above)")


def prepare_tables(params_file: Path, sources: list[str], mirror: str | None) -> None:
    """Each source's table in the shared data dir: embedded copies as they are, others fetched."""
    from tabrepro.config import Params
    from tabrepro.data.registry import get_source

    params = Params.from_file(params_file)
    for source in sources:
        if params.layout.processed_table.path(source=source).is_file():
            continue
        if get_source(source).embedded is None:
            cli("--params", str(params_file), "fetch", source, *(["--mirror", mirror] if mirror else []))
        cli("--params", str(params_file), "prepare", source)


def run_unit(params_file: Path, shared_data: Path, dataset: str, model: str, threads: int) -> dict:
    """The protocol once: splits for this seed, then every fold tuned, trained and tested."""
    from tabrepro.config import Job, Params
    from tabrepro.job_spec import resolve_job
    from tabrepro.seeding import derive_seed
    from tabrepro.splits import SPLIT_MANIFEST_FILE
    from tabrepro.training import run_folds

    started = time.perf_counter()
    params = Params.from_file(params_file)
    source = params.source_of(PAPER, dataset)
    table = params.processed_dir(source)
    if not table.is_dir():
        shutil.copytree(shared_data / "processed" / source, table)
    if not (params.split_dir(PAPER, dataset) / SPLIT_MANIFEST_FILE).is_file():
        cli("--params", str(params_file), "split", PAPER, dataset)
    specs = [resolve_job(params, Job(PAPER, dataset, model, k)) for k in range(params.n_folds(PAPER, dataset))]
    folds = []
    task = None
    for spec, result in run_folds(specs, n_jobs=threads, progress=False):
        task = result["task"]
        split = result["split"]
        folds.append(
            {
                "fold": spec.job.fold,
                "split_sha256": split["sha256"],
                "n_train": split["n_train"],
                "n_val": split["n_val"],
                "n_test": split["n_test"],
                "n_configs": result["selection"]["n_configs"],
                "selected_config": result["selected_config"],
                "test": {m: result["metrics"]["test"][m] for m in METRICS[task]},
            }
        )
        shutil.rmtree(spec.job_dir, ignore_errors=True)  # state only; the numbers are kept here
    return {
        "dataset": dataset,
        "model": model,
        "seed": params.seed,
        "split_seed": derive_seed(params.seed, PAPER, dataset, "split"),
        "task": task,
        "search_space": params.search_space(PAPER, dataset, model),
        "wall_time_s": round(time.perf_counter() - started, 1),
        "folds": folds,
        "per_metric": {m: seed_figures(folds, m) for m in METRICS[task]},
    }


# ----------------------------------------------------------------------------------- the figures
def seed_figures(folds: list[dict], metric: str) -> dict:
    """One run's mean, the SE the engine assigns it, and Nadeau-Bengio's corrected SE."""
    values = np.array([f["test"][metric] for f in folds], dtype=float)
    k = len(values)
    variance = float(np.var(values, ddof=1))
    test_over_train = float(np.mean([f["n_test"] / f["n_train"] for f in folds]))
    return {
        "mean": float(np.mean(values)),
        "fold_sd": float(np.sqrt(variance)),
        "assigned_se": float(np.sqrt(variance / k)),
        "nadeau_bengio_se": float(np.sqrt((1.0 / k + test_over_train) * variance)),
        "n_test_over_n_train": test_over_train,
    }


def spread_summary(units: list[dict]) -> list[dict]:
    """Per (dataset, model, metric): the SD of the protocol's means across seeds against the
    average assigned SE (ratio > 1: the engine's SE is too small), with a 95 % chi-square CI."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for unit in units:
        groups.setdefault((unit["dataset"], unit["model"]), []).append(unit)
    summary = []
    for (dataset, model), members in sorted(groups.items()):
        members = sorted(members, key=lambda u: u["seed"])
        for metric in METRICS[members[0]["task"]]:
            figures = [u["per_metric"][metric] for u in members]
            means = np.array([f["mean"] for f in figures])
            row = {
                "dataset": dataset,
                "model": model,
                "metric": metric,
                "n_seeds": len(members),
                "seeds": [u["seed"] for u in members],
                "mean_of_means": float(np.mean(means)),
                "assigned_se_mean": float(np.mean([f["assigned_se"] for f in figures])),
                "nadeau_bengio_se_mean": float(np.mean([f["nadeau_bengio_se"] for f in figures])),
            }
            if len(members) >= 2:
                dof = len(members) - 1
                sd = float(np.std(means, ddof=1))
                low, high = (sd * np.sqrt(dof / stats.chi2.ppf(q, dof)) for q in (0.975, 0.025))
                row["empirical_sd"] = sd
                row["empirical_sd_ci95"] = [float(low), float(high)]
                for name in ("assigned", "nadeau_bengio"):
                    se = row[f"{name}_se_mean"]
                    row[f"ratio_{name}"] = sd / se if se > 0 else None
                    row[f"ratio_{name}_ci95"] = [float(low / se), float(high / se)] if se > 0 else None
            summary.append(row)
    return summary


# ----------------------------------------------------------------------------------- the record
def settings_of(args: argparse.Namespace, base: dict) -> dict:
    return {
        "paper": PAPER,
        "profile": args.profile,
        "max_configs": args.max_configs,
        "protocol": base["protocols"]["npt_cv10"],
    }


def read_record(path: Path, settings: dict) -> dict | None:
    """The record a stopped run left, if it was made under the same settings."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        held = {k: record["settings"][k] for k in SETTING_KEYS}
        units = record["units"]
        if not isinstance(units, list) or not all(isinstance(u, dict) and "per_metric" in u for u in units):
            raise TypeError("units is not a list of finished units")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise RecordError(f"{path}: not a calibration record this script can continue ({error})") from None
    wanted = {k: settings[k] for k in SETTING_KEYS}
    if held != wanted:
        differ = ", ".join(k for k in SETTING_KEYS if held[k] != wanted[k])
        raise RecordError(f"{path}: made under other settings ({differ}); remove it or pass another --out")
    return record


def write_record(path: Path, settings: dict, seeds: list[int], units: list[dict]) -> None:
    from tabrepro.io import write_json
    from tabrepro.provenance import provenance

    record = {
        "what": (
            "Spread of NPT's 10-fold CV protocol means across root seeds (split, search and model "
            "seeds all change) against the SE the verdict engine assigns a cell, SD(fold metrics)/sqrt(k), "
            "and Nadeau-Bengio's corrected SE sqrt((1/k + n_test/n_train) s^2); ratio = empirical SD / "
            "mean SE over seeds (> 1: the SE is too small). n_train counts the rows a model is fitted on "
            "(validation rows excluded)."
        ),
        "settings": {**settings, "seeds_requested": seeds},
        "provenance": {"date": datetime.now(UTC).isoformat(timespec="seconds"), **provenance(threads=1)},
        "units": units,
        "summary": spread_summary(units),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record, indent=1, sort_keys=False)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name in ("TABREPRO_DATA_DIR", "TABREPRO_RESULTS_DIR"):
        os.environ.pop(name, None)  # every path comes from --work-dir
    try:
        return calibrate(args)
    except Exception as error:
        if not is_input_error(error):
            raise
        print(f"calibrate_spread: error: {one_line(error)}", file=sys.stderr)
        return 2


def load_base(args: argparse.Namespace) -> dict:
    """The base params file as it is now, validated: read again for each unit, since the schema it
    must meet can change while a long run goes on."""
    from tabrepro.config import YAML_LOADER, Params

    Params.from_file(args.params, profile=args.profile)  # a clear error for a bad base file or profile
    base = yaml.load(args.params.read_text(), Loader=YAML_LOADER)
    base["profile"] = args.profile
    return base


def calibrate(args: argparse.Namespace) -> int:
    from tabrepro.config import Params

    base = load_base(args)
    settings = settings_of(args, base)
    record = read_record(args.out, settings)
    units = record["units"] if record else []
    done = {(u["dataset"], u["model"], u["seed"]) for u in units}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if record:
        seeds = sorted(set(seeds) | set(record["settings"]["seeds_requested"]))

    shared_data = args.work_dir / "data"
    shared_file = seed_params_file(base, args.first_seed, args, shared_data, args.work_dir / "results")
    shared = Params.from_file(shared_file)
    for dataset in args.datasets:
        if shared.dataset_entry(PAPER, dataset)["protocol"] != "npt_cv10":
            raise InputError(f"dataset {dataset!r} does not use protocol npt_cv10 in {args.params}")
    sources = sorted({shared.source_of(PAPER, d) for d in args.datasets})
    prepare_tables(shared_file, sources, args.mirror)

    todo = [(d, m, s) for s in seeds for d in args.datasets for m in args.models if (d, m, s) not in done]
    print(f"calibrate_spread: {len(done)} unit(s) held in {args.out}, {len(todo)} to run", flush=True)
    for i, (dataset, model, seed) in enumerate(todo, 1):
        base = load_base(args)
        if settings_of(args, base) != settings:
            raise InputError(f"{args.params}: the protocol changed during the run; run again to continue")
        seed_dir = args.work_dir / f"seed{seed}"
        params_file = seed_params_file(base, seed, args, seed_dir / "data", seed_dir / "results")
        unit = run_unit(params_file, shared_data, dataset, model, args.threads)
        units.append(unit)
        write_record(args.out, settings, seeds, units)
        scores = ", ".join(f"{m}={f['mean']:.4g}±{f['assigned_se']:.2g}" for m, f in unit["per_metric"].items())
        print(f"[{i}/{len(todo)}] {dataset}/{model} seed {seed}: {scores} ({unit['wall_time_s']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
