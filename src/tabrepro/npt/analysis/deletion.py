"""Which datapoints does a prediction rely on? Delete the others greedily (Alg. 2, App. B.3.2).

For one test row i*, starting from its whole context (the evaluation batch, optionally capped
to a random subset), repeatedly propose deleting a uniformly random remaining other row:

* the proposal is accepted if the prediction for i* changes by less than Delta_it relative to
  the current prediction; otherwise it is rejected, and after `patience` (50) rejections since
  the last increase Delta_it grows by x1.1 (start 0.01);
* the run stops when an acceptable proposal would move the prediction more than 10 % away from
  the original one, when fewer than 2 % of the rows would remain, or (our cap) after
  `max_proposals` forward passes.

The prediction is the value in original units (regression) or the probability of the class
predicted from the full context (classification). If NPT relies on similar datapoints, the kept
rows lie nearer to i* in feature space than the deleted ones and than a random subset of the
same size; one-sided Wilcoxon signed-rank tests over test rows check both.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch
from scipy.stats import wilcoxon

from tabrepro.npt.analysis.common import NPTContext, batch_outputs, pairwise_distances

__all__ = ["delete_for_row", "deletion_experiment", "one_sided_wilcoxon"]

_EPS = 1e-12


def _predict(context: NPTContext, rows: np.ndarray, reference_class: int | None) -> float:
    """Prediction for rows[0] with only `rows` as input."""
    index = torch.as_tensor(rows)
    outputs = batch_outputs(context.model, context.table.inputs[index], context.table.input_missing[index])
    first = outputs[:1].cpu().double().numpy()
    return float(context.prediction(first, reference_class)[0])


def delete_for_row(
    context: NPTContext,
    row: int,
    context_rows: np.ndarray,
    rng: np.random.Generator,
    *,
    delta_start: float = 0.01,
    delta_growth: float = 1.1,
    patience: int = 50,
    max_total_change: float = 0.10,
    min_remaining_fraction: float = 0.02,
    max_proposals: int | None = None,
) -> dict[str, Any]:
    """Alg. 2 for one test row; `context_rows` are the other rows it may attend to."""
    reference_class = None
    if context.task != "regression":
        index = torch.as_tensor(np.concatenate([[row], context_rows]))
        outputs = batch_outputs(context.model, context.table.inputs[index], context.table.input_missing[index])
        reference_class = int(np.argmax(context.probabilities(outputs[:1].cpu().double().numpy())[0]))
    kept = list(map(int, context_rows))
    deleted: list[int] = []
    n_start = len(kept) + 1
    min_rows = math.ceil(min_remaining_fraction * n_start)
    original = _predict(context, np.array([row, *kept]), reference_class)
    current, delta, rejected, proposals = original, delta_start, 0, 0
    stop = "min_rows"
    # After one more deletion len(kept) rows remain (i* included): at least min_rows of them.
    while kept and len(kept) >= min_rows:
        if max_proposals is not None and proposals >= max_proposals:
            stop = "max_proposals"
            break
        proposals += 1
        candidate = kept[int(rng.integers(len(kept)))]
        trial = [r for r in kept if r != candidate]
        value = _predict(context, np.array([row, *trial]), reference_class)
        step_change = abs(value - current) / max(abs(current), _EPS)
        if step_change >= delta:
            rejected += 1
            if rejected >= patience:
                delta *= delta_growth
                rejected = 0
            continue
        if abs(value - original) / max(abs(original), _EPS) > max_total_change:
            stop = "max_total_change"
            break
        kept, current = trial, value
        deleted.append(candidate)
    return {
        "row": int(row),
        "n_context": len(context_rows),
        "kept": kept,
        "deleted": deleted,
        "original_prediction": original,
        "final_prediction": current,
        "final_delta": delta,
        "proposals": proposals,
        "stop": stop,
    }


def deletion_experiment(
    context: NPTContext,
    *,
    max_test_rows: int | None = None,
    max_context_rows: int | None = None,
    max_proposals: int | None = None,
    delta_start: float = 0.01,
    delta_growth: float = 1.1,
    patience: int = 50,
    max_total_change: float = 0.10,
    min_remaining_fraction: float = 0.02,
    seed: int = 0,
) -> dict[str, Any]:
    """Alg. 2 for a (seeded) sample of test rows; distances of kept/deleted/random rows and tests."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    test_rows = context.test_rows()
    if max_test_rows is not None and test_rows.size > max_test_rows:
        test_rows = np.sort(rng.choice(test_rows, size=max_test_rows, replace=False))
    runs = []
    for row in test_rows:
        batch = context.batch_of(int(row)).cpu().numpy()
        others = batch[batch != row]
        if max_context_rows is not None and others.size > max_context_rows - 1:
            others = np.sort(rng.choice(others, size=max_context_rows - 1, replace=False))
        run = delete_for_row(
            context,
            int(row),
            others,
            rng,
            delta_start=delta_start,
            delta_growth=delta_growth,
            patience=patience,
            max_total_change=max_total_change,
            min_remaining_fraction=min_remaining_fraction,
            max_proposals=max_proposals,
        )
        kept, deleted = np.array(run["kept"], dtype=np.int64), np.array(run["deleted"], dtype=np.int64)
        random = rng.choice(others, size=deleted.size, replace=False) if deleted.size else deleted
        run["distance_kept"] = _mean_distance(context, row, kept)
        run["distance_deleted"] = _mean_distance(context, row, deleted)
        run["distance_random"] = _mean_distance(context, row, random)
        runs.append(run)
    usable = [r for r in runs if r["deleted"] and r["kept"]]
    kept_d = np.array([r["distance_kept"] for r in usable])
    deleted_d = np.array([r["distance_deleted"] for r in usable])
    random_d = np.array([r["distance_random"] for r in usable])
    return {
        "task": context.task,
        "n_test_rows": len(runs),
        "n_usable": len(usable),
        "mean_fraction_deleted": float(np.mean([len(r["deleted"]) / max(r["n_context"], 1) for r in runs]))
        if runs
        else None,
        "mean_distance": {"kept": _mean(kept_d), "deleted": _mean(deleted_d), "random": _mean(random_d)},
        "wilcoxon": {
            "kept_less_than_random": one_sided_wilcoxon(kept_d, random_d),
            "kept_less_than_deleted": one_sided_wilcoxon(kept_d, deleted_d),
            "deleted_greater_than_random": one_sided_wilcoxon(random_d, deleted_d),
        },
        "runs": runs,
        "settings": {
            "delta_start": delta_start,
            "delta_growth": delta_growth,
            "patience": patience,
            "max_total_change": max_total_change,
            "min_remaining_fraction": min_remaining_fraction,
            "max_proposals": max_proposals,
            "max_context_rows": max_context_rows,
        },
        "seconds": round(time.perf_counter() - started, 3),
    }


def _mean_distance(context: NPTContext, row: int, others: np.ndarray) -> float | None:
    if others.size == 0:
        return None
    return float(pairwise_distances(context.features, int(row), others).mean())


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def one_sided_wilcoxon(smaller: np.ndarray, larger: np.ndarray) -> dict[str, Any]:
    """Wilcoxon signed-rank test of H1: `smaller` < `larger` (paired, one-sided)."""
    smaller, larger = np.asarray(smaller, float), np.asarray(larger, float)
    n = int(smaller.size)
    if n < 2 or np.allclose(smaller, larger):
        return {"n": n, "statistic": None, "p_value": None, "alternative": "less"}
    result = wilcoxon(smaller, larger, alternative="less")
    return {"n": n, "statistic": float(result.statistic), "p_value": float(result.pvalue), "alternative": "less"}
