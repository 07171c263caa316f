"""Folds reduced to what a paper prints: mean, spread (sample SD or SE = SD/sqrt(n)) and ranks."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.reporting.tables.results import ResultsError, content_problem

SPREAD_KINDS = ("se", "sd")
FOLD_COLUMNS = ["dataset", "model", "method", "fold", "task", "metric", "value"]
RANK_TIE_DECIMALS = 12  # means of equal fold scores may differ in the last bit (summation order)


def fold_frame(
    results: Iterable[Mapping[str, Any]],
    paper: str,
    models: Mapping[str, str],
    datasets_filter: Collection[str] | None = None,
) -> pd.DataFrame:
    """One row per (dataset, model, fold, test metric), with the paper's label as `method`.

    Results of other papers are skipped (callers may pass a mixed list); results of datasets
    outside `datasets_filter` are dropped so stale runs of another profile do not leak in.
    """
    rows: list[dict[str, Any]] = []
    for result in results:
        if result.get("paper") != paper:
            continue
        problem = content_problem(result, paper)
        if problem is not None:
            name = f"{result.get('dataset')}/{result.get('model')}/fold{result.get('fold')}"
            raise ResultsError(f"result {name}: {problem}")
        if datasets_filter is not None and result["dataset"] not in datasets_filter:
            continue
        rows.extend(_metric_rows(result, models))
    frame = pd.DataFrame(rows, columns=FOLD_COLUMNS)
    frame["value"] = frame["value"].astype(float)
    frame = frame[np.isfinite(frame["value"])]
    _check_consistent(frame)
    return frame.reset_index(drop=True)


def _metric_rows(result: Mapping[str, Any], models: Mapping[str, str]) -> list[dict[str, Any]]:
    base = {
        "dataset": result["dataset"],
        "model": result["model"],
        "method": models.get(result["model"], result["model"]),
        "fold": result["fold"],
        "task": result["task"],
    }
    test = result["metrics"]["test"]
    return [{**base, "metric": metric, "value": value} for metric, value in test.items() if value is not None]


def _check_consistent(frame: pd.DataFrame) -> None:
    """Refuse duplicated folds and datasets with two task types: both would skew the means."""
    duplicated = frame.duplicated(subset=["dataset", "model", "fold", "metric"])
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise ResultsError(f"duplicate result for {first['dataset']}/{first['model']}/fold{first['fold']}")
    tasks = frame.groupby("dataset")["task"].unique()
    mixed = {dataset: sorted(values) for dataset, values in tasks.items() if len(values) > 1}
    if mixed:
        raise ResultsError(f"datasets with more than one task type: {mixed}")


def summarize_folds(frame: pd.DataFrame, spread_kind: str = "se") -> pd.DataFrame:
    """Mean, spread and fold count per (dataset, method, metric).

    The spread is the sample SD (ddof=1) or the SE = SD/sqrt(n); with one fold it is NaN, as a
    single holdout split says nothing about variability.
    """
    if spread_kind not in SPREAD_KINDS:
        raise ValueError(f"spread must be one of {SPREAD_KINDS}, got {spread_kind!r}")
    keys = ["dataset", "method", "metric"]
    if frame.empty:
        return pd.DataFrame(columns=[*keys, "mean", "spread", "n"])
    stats = frame.groupby(keys, sort=False)["value"].agg(["mean", "std", "count"]).reset_index()
    sd = stats["std"].where(stats["count"] > 1)
    spread = sd if spread_kind == "sd" else sd / np.sqrt(stats["count"])
    return pd.DataFrame(
        {**{key: stats[key] for key in keys}, "mean": stats["mean"], "spread": spread,
         "n": stats["count"].astype(int)}
    )  # fmt: skip


def rank_methods(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rank methods per dataset by mean metric: 1 = best, ties share the mean rank."""
    if metric not in HIGHER_IS_BETTER:
        raise KeyError(f"no direction known for metric {metric!r}; add it to HIGHER_IS_BETTER")
    scores = summary[summary["metric"] == metric].copy()
    if scores.empty:
        return scores.assign(rank=pd.Series(dtype=float))
    sign = -1.0 if HIGHER_IS_BETTER[metric] else 1.0
    scores["key"] = np.round(sign * scores["mean"].astype(float), RANK_TIE_DECIMALS)
    scores["rank"] = scores.groupby("dataset")["key"].transform(
        lambda keys: rankdata(keys.to_numpy(), method="average")
    )
    return scores.drop(columns="key").reset_index(drop=True)


def mean_and_se(values: pd.Series) -> tuple[float, float | None, int]:
    n = int(values.count())
    mean = float(values.mean())
    se = float(values.std(ddof=1)) / math.sqrt(n) if n > 1 else None
    return mean, se, n
