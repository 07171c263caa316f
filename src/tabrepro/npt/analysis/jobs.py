"""Which analysis experiments the active profile runs and where their results go.

The workflow (common.smk) imports this at every start, and the report reads the same list, so they
agree on what exists; it imports no torch (running an experiment is tabrepro.npt.analysis.runner).

Layout (all under params.yaml's results directory):

    analysis/{corruption,deletion,attention}/{dataset}/fold{k}/result.json  (+ PNGs beside it)
    analysis/lookup/{dataset}/result.json                                    (+ PNGs beside it)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, overload

from tabrepro.npt.analysis.settings import FOLD_EXPERIMENTS, SYNTHETIC, AnalysisError, AnalysisSettings, settings_for

__all__ = ["active_settings", "plan_fold_jobs", "plan_targets", "result_path", "lookup_input_files", "NPT_MODEL"]

NPT_MODEL = "npt"


@overload
def active_settings(params: Any, *, required: Literal[True]) -> AnalysisSettings: ...
@overload
def active_settings(params: Any, *, required: bool = False) -> AnalysisSettings | None: ...
def active_settings(params: Any, *, required: bool = False) -> AnalysisSettings | None:
    """The active profile's analysis settings (None when it runs no analysis)."""
    settings = settings_for(params.raw, params.profile_name)
    if settings is None and required:
        # Run by hand under a profile without analysis settings: the fields' defaults.
        settings = AnalysisSettings()
    return settings


def result_path(params: Any, experiment: str, dataset: str, fold: int | None = None) -> Path:
    if experiment == "lookup":
        return params.layout.analysis_lookup_result.path(dataset=dataset)
    if fold is None:
        raise AnalysisError(f"experiment {experiment!r} needs --fold")
    return params.layout.analysis_fold_result.path(experiment=experiment, dataset=dataset, fold=fold)


def plan_fold_jobs(params: Any, settings: AnalysisSettings | None = None) -> list[tuple[str, str, int]]:
    """(experiment, dataset, fold) of every trained-NPT experiment the profile runs.

    Only datasets and folds for which the profile trains NPT: the experiments read its weights.
    """
    settings = settings if settings is not None else active_settings(params)
    if settings is None or settings.paper not in params.papers:
        return []
    paper = settings.paper
    if NPT_MODEL not in params.selected_models(paper):
        return []
    selected = params.selected_datasets(paper)
    # a str is "all" (the settings' check refuses any other)
    datasets = selected if isinstance(settings.datasets, str) else [d for d in settings.datasets if d in selected]
    jobs: list[tuple[str, str, int]] = []
    for dataset in datasets:
        folds = params.folds(paper, dataset)
        chosen = folds if isinstance(settings.folds, str) else [f for f in settings.folds if f in folds]
        for experiment in settings.experiments:
            if experiment in FOLD_EXPERIMENTS:
                jobs.extend((experiment, dataset, fold) for fold in chosen)
    return jobs


def plan_targets(params: Any, settings: AnalysisSettings | None = None) -> list[str]:
    """Result files of every analysis experiment of the active profile."""
    settings = settings if settings is not None else active_settings(params)
    if settings is None:
        return []
    targets = [str(result_path(params, e, d, f)) for e, d, f in plan_fold_jobs(params, settings)]
    if "lookup" in settings.experiments:
        targets.append(str(result_path(params, "lookup", settings.lookup.dataset)))
    return targets


def lookup_input_files(params: Any, dataset: str) -> list[str]:
    """The processed table the lookup task reads (none for the synthetic data)."""
    settings = active_settings(params, required=True)
    if dataset == SYNTHETIC:
        return []
    source = params.source_of(settings.paper, dataset)
    return [str(params.layout.processed_table.path(source=source))]
