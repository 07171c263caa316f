"""How much a search that picks its configuration on the test rows flatters the reported score.

BiSHop's sweeps log only test AUC and their code keeps the best of it (`launch_baseline2.py`,
`bishop.yaml`: metric "AUC", goal maximize); our protocol picks on validation and scores the test
rows once. This script fits every candidate of a BiSHop Datasets I job exactly as the pipeline's
search does (same split, configurations and seeds: `tabrepro.training`), scores each on both
validation and test, and reports the test score of the configuration picked on validation
(ours) beside the best test score (theirs), at the full budget and at smaller ones (the first k
candidates, as a search ended early would have).

    python scripts/selection_bias.py --cases qsar:xgboost seismic_bumps:lightgbm \\
        --profile reproduce --out records/selection_bias/datasets_i.json

The datasets must be prepared and split already (`tabrepro fetch/prepare/split`, or a workflow
run: `$TABREPRO_DATA_DIR` points at its data). Each finished case is written into --out as it
finishes; a case already there is not fitted again.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tabrepro.config import Job, Params
from tabrepro.io import write_json
from tabrepro.provenance import provenance
from tabrepro.training import _fit_config, load_fold, model_outputs, outputs_metrics, selection_metric
from tabrepro.tuning import job_configs, select_best

PAPER = "bishop"
BUDGETS = (10, 25, 50, 100, 200)


def score_every_candidate(params: Params, job: Job) -> dict:
    """Validation and test metric of each candidate configuration of `job`, in search order."""
    data = load_fold(params, job)
    configs = job_configs(params, job, data.task)
    metric = selection_metric(params, job.paper, data.task)
    va, te = data.split.val, data.split.test
    val, test = [], []

    def score(model, rows: np.ndarray) -> float:
        outputs = model_outputs(model, data.task, data.X[rows])
        return outputs_metrics(data.task, outputs, data.y[rows], data.target)[metric]

    started = time.perf_counter()
    for index, config in enumerate(tqdm(configs, desc=f"{job.dataset}/{job.model}", unit="config")):
        model = _fit_config(params, job, data, index, config, n_jobs=1)
        val.append(score(model, va))
        test.append(score(model, te))
    return {
        "metric": metric,
        "n_configs": len(configs),
        "n_val": int(len(va)),
        "n_test": int(len(te)),
        "val": val,
        "test": test,
        "wall_time_s": round(time.perf_counter() - started, 1),
    }


def summarise(scores: dict) -> dict:
    """Test score picked on validation against picked on test, per budget (first k candidates)."""
    metric, val, test = scores["metric"], scores["val"], scores["test"]
    rows = {}
    for k in [b for b in BUDGETS if b < len(val)] + [len(val)]:
        on_val = test[select_best(val[:k], metric)]
        on_test = test[select_best(test[:k], metric)]
        rows[str(k)] = {"picked_on_val": on_val, "picked_on_test": on_test, "gain": on_test - on_val}
    return {"by_budget": rows, "spread_of_test_scores": float(np.std(test, ddof=1)) if len(test) > 1 else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", required=True, metavar="DATASET:MODEL")
    parser.add_argument("--profile", default="reproduce", help="the profile whose budgets apply (default: reproduce)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--out", type=Path, required=True, help="the record (JSON) to write or extend")
    args = parser.parse_args(argv)
    params = Params.from_file(args.params, args.profile)
    cases = []
    for case in args.cases:
        dataset, _, model = case.partition(":")
        if not model or dataset not in params.paper(PAPER)["datasets"]:
            print(f"selection_bias: {case!r} is not DATASET:MODEL of a {PAPER} dataset", file=sys.stderr)
            return 2
        cases.append((dataset, model))
    record = json.loads(args.out.read_text()) if args.out.exists() else {"cases": {}}
    for dataset, model in cases:
        key = f"{dataset}:{model}"
        if key in record["cases"]:
            continue
        scores = score_every_candidate(params, Job(PAPER, dataset, model, 0))
        record["cases"][key] = {**scores, **summarise(scores)}
        record.update(
            profile=args.profile,
            seed=params.seed,
            written=datetime.now(UTC).isoformat(timespec="seconds"),
            provenance=provenance(threads=1),
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, record, indent=1)
        gain = record["cases"][key]["by_budget"][str(scores["n_configs"])]["gain"]
        print(f"{key}: picking on test adds {gain:+.4f} {scores['metric']} at {scores['n_configs']} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
