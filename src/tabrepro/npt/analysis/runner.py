"""Run one analysis experiment end to end: inputs from the workflow's results, outputs to disk.

Layout (all under params.yaml's results directory):

    analysis/{corruption,deletion,attention}/{dataset}/fold{k}/result.json  (+ PNGs beside it)
    analysis/lookup/{dataset}/result.json                                    (+ PNGs beside it)

Which experiments the active profile runs, and where their results go, is tabrepro.npt.analysis.jobs
(no torch: the workflow imports it at every start).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tabrepro.io import write_json
from tabrepro.layout import RESULT_FILE
from tabrepro.npt.analysis.common import NPTContext, finite_json, load_fold_context
from tabrepro.npt.analysis.corruption import corruption_experiment
from tabrepro.npt.analysis.jobs import active_settings, result_path
from tabrepro.npt.analysis.settings import (
    EXPERIMENTS,
    FOLD_EXPERIMENTS,
    LOOKUP_VARIANTS,
    SYNTHETIC,
    AnalysisError,
    AnalysisSettings,
    experiment_digest,
)
from tabrepro.provenance import peak_memory_mb, provenance
from tabrepro.seeding import derive_seed

__all__ = ["run_experiment"]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- running
def run_experiment(
    params: Any,
    paper: str,
    dataset: str,
    experiment: str,
    *,
    fold: int | None = None,
    out_dir: Path | None = None,
    settings: AnalysisSettings | None = None,
    threads: int = 1,
    metrics_path: Path | None = None,
    weights_path: Path | None = None,
) -> Path:
    """Run one experiment and write result.json (and its figures) into `out_dir`."""

    if experiment not in EXPERIMENTS:
        raise AnalysisError(f"unknown experiment {experiment!r}; known: {', '.join(EXPERIMENTS)}")
    settings = settings if settings is not None else active_settings(params, required=True)
    assert settings is not None
    if dataset != SYNTHETIC:
        params.dataset_entry(paper, dataset)  # a clear error for an unknown name
    if experiment in FOLD_EXPERIMENTS:
        if fold is None:
            raise AnalysisError(f"experiment {experiment!r} needs --fold")
        if fold not in range(params.n_folds(paper, dataset)):
            raise AnalysisError(f"fold {fold} out of range for {paper}/{dataset}")
    elif dataset == SYNTHETIC and settings.lookup.dataset != SYNTHETIC:
        log.info("lookup on synthetic data although the profile names %s", settings.lookup.dataset)
    out_dir = Path(out_dir) if out_dir is not None else result_path(params, experiment, dataset, fold).parent
    seed = derive_seed(params.seed, "analysis", experiment, paper, dataset, "none" if experiment == "lookup" else fold)
    started = time.perf_counter()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        if experiment == "lookup":
            payload = _run_lookup(params, paper, dataset, settings, seed, out_dir)
        else:
            assert fold is not None  # a fold experiment: checked above
            context = load_fold_context(
                params,
                paper,
                dataset,
                int(fold),
                metrics_path=metrics_path,
                weights_path=weights_path,
                batch_seed=derive_seed(seed, "batches"),
                device=settings.device,
            )
            payload = _RUNNERS[experiment](context, settings, seed, out_dir, paper, dataset)
    finally:
        torch.set_num_threads(previous_threads)
    payload.update(
        {
            "experiment": experiment,
            "paper": paper,
            "dataset": dataset,
            "fold": fold,
            "profile": params.profile_name,
            "seed": seed,
            "settings": settings.to_dict()[experiment],
            "settings_digest": experiment_digest(settings, experiment, params.seed),
            "wall_time_s": round(time.perf_counter() - started, 3),
            "peak_memory_mb": round(peak_memory_mb(), 1),
            "provenance": provenance(threads=threads),
        }
    )
    path = out_dir / RESULT_FILE
    write_json(path, finite_json(payload), allow_nan=False)
    return path


def _run_corruption(
    context: NPTContext, settings: AnalysisSettings, seed: int, out_dir: Path, paper: str, dataset: str
) -> dict[str, Any]:
    from tabrepro.reference import lookup  # deferred: loads pandas

    result = corruption_experiment(context, max_test_rows=settings.corruption.max_test_rows, seed=seed)
    metric = "delta_rmse_over_rmse_pct" if context.task == "regression" else "delta_accuracy_pct"
    paper_value = lookup(paper, "2", dataset, "NPT", metric)
    result["table2"] = {
        "metric": metric,
        "ours": result.get("delta", {}).get(metric),
        "paper": None if paper_value is None else paper_value.value,
    }
    result["figures"] = []
    return result


def _run_deletion(
    context: NPTContext, settings: AnalysisSettings, seed: int, out_dir: Path, paper: str, dataset: str
) -> dict[str, Any]:
    from tabrepro import figures  # deferred: loads matplotlib
    from tabrepro.npt.analysis.deletion import deletion_experiment  # deferred: loads scipy

    s = settings.deletion
    result = deletion_experiment(
        context,
        max_test_rows=s.max_test_rows,
        max_context_rows=s.max_context_rows,
        max_proposals=s.max_proposals,
        delta_start=s.delta_start,
        delta_growth=s.delta_growth,
        patience=s.patience,
        max_total_change=s.max_total_change,
        min_remaining_fraction=s.min_remaining_fraction,
        seed=seed,
    )
    runs = [r for r in result["runs"] if r["deleted"] and r["kept"]]
    name = "deletion_hist.png"
    figures.deletion_histogram(
        [r["distance_kept"] for r in runs],
        [r["distance_deleted"] for r in runs],
        [r["distance_random"] for r in runs],
        out_dir / name,
        f"Data deletion, {dataset} fold {context.name.rsplit('fold', 1)[-1]}",
    )
    result["figures"] = [name]
    return result


def _run_attention(
    context: NPTContext, settings: AnalysisSettings, seed: int, out_dir: Path, paper: str, dataset: str
) -> dict[str, Any]:
    from tabrepro import figures  # deferred: loads matplotlib
    from tabrepro.npt.analysis.attention import attention_experiment  # deferred: loads scipy

    s = settings.attention
    result = attention_experiment(context, n_reference_rows=s.n_reference_rows, max_rows=s.max_rows, seed=seed)
    names = []
    references = []
    for ref in result["references"]:
        grid = f"attention_row{ref['row']}.png"
        profile = f"attention_profile_row{ref['row']}.png"
        figures.attention_grid(
            ref["maps"],
            out_dir / grid,
            f"{dataset}: ABD attention, rows and columns sorted by distance to test row {ref['row']} (first)",
        )
        figures.attention_profile(
            ref["maps"],
            ref["distances"],
            out_dir / profile,
            f"{dataset}: attention of test row {ref['row']} vs distance",
        )
        names += [grid, profile]
        references.append(
            {
                "row": ref["row"],
                "n_rows": int(len(ref["rows"])),
                "n_train_rows": int(np.sum(ref["roles"] == 0)),
                "summary": ref["summary"],
                "nearest_distances": ref["distances"][:20],
            }
        )
    return {
        "references": references,
        "figures": names,
        "n_abd_layers": len(result["references"][0]["maps"]) if result["references"] else 0,
    }


_RUNNERS = {"corruption": _run_corruption, "deletion": _run_deletion, "attention": _run_attention}


def _run_lookup(
    params: Any, paper: str, dataset: str, settings: AnalysisSettings, seed: int, out_dir: Path
) -> dict[str, Any]:
    from tabrepro import figures  # deferred: loads matplotlib

    # deferred: loads scipy, sklearn
    from tabrepro.npt.analysis.lookup import dataset_lookup_data, lookup_experiment, synthetic_lookup_data
    from tabrepro.reference import lookup  # deferred: loads pandas

    s = settings.lookup
    if dataset == SYNTHETIC:
        data = synthetic_lookup_data(s, derive_seed(seed, "data"))
    else:
        data = dataset_lookup_data(params, paper, dataset, s, derive_seed(seed, "data"))
    result = lookup_experiment(data, s, seed, settings.device)
    variants = result["variants"]
    paper_values = {}
    for variant in variants:
        for method in ("NPT", "1-NN", "k-NN"):
            value = lookup(paper, "3", f"protein_lookup_{variant}", method, "rmse")
            if value is not None:
                paper_values[(variant, method)] = value.value
    unit = "target units" if dataset != SYNTHETIC else "standardised units"
    variants = {v: variants[v] for v in LOOKUP_VARIANTS if v in variants}  # the paper's order
    figures.lookup_rmse_bars(variants, paper_values if dataset == "protein" else {}, out_dir / "lookup_rmse.png", unit)
    figures.knn_curves(variants, out_dir / "lookup_knn.png", unit)
    figures.intervention_plot(variants, out_dir / "lookup_interventions.png", s.add)
    names = ["lookup_rmse.png", "lookup_knn.png", "lookup_interventions.png"]
    for variant, entry in variants.items():
        maps = entry.pop("_attention", None)
        if maps:
            name = f"lookup_attention_{variant}.png"
            m = int(maps[0].shape[-1] // 2)
            figures.attention_grid(
                maps,
                out_dir / name,
                f"Lookup ({variant.replace('_', ' ')}): ABD attention; rows 0..{m - 1} "
                f"originals, then their duplicates",
                boundaries=[m],
            )
            names.append(name)
    result["paper_values"] = [{"variant": v, "method": m, "rmse": x} for (v, m), x in paper_values.items()]
    result["paper_values_comparable"] = dataset == "protein"
    result["figures"] = names
    return result
