"""BiSHop's feature-sparsity curves (Xu 2024, Fig. 4.1 right).

A fraction of each dataset's features is removed — at random, least important first or most
important first — and each model is retrained on what is left; the curve is the mean test AUC
over datasets against the fraction removed. The thesis gives neither how the models were
configured for these runs nor how importance was measured beyond "random forest", so we fix:

* importance: a random forest's impurity importance, fitted on the fold's TRAINING rows only, an
  original feature's importance being the sum over its encoded columns (a one-hot block counts
  as one feature, so removing a feature removes all of its columns);
* removal is nested: the features removed at 20% include those removed at 10% (one order per
  fold; "random" is a seeded permutation), so a curve shows one sequence of removals;
* every model is retrained with the configuration its own validation search chose on all
  features (the main run's metrics.json), with a seed per point, and scored once on test. No
  selection happens on test rows, and no new search runs on the reduced data.

Settings per profile live in params.yaml `feature_sparsity:`; a profile without an entry runs
none. One job per (dataset, model, fold) writes the layout's `sparsity_result`
(`results/feature_sparsity/{paper}/{dataset}/{model}/fold{k}.json`) and is resumable point by
point; `plot_curves` averages the jobs into `curves.csv`, `curves.png` and `summary.json` beside
them. The commands are `tabrepro sparsity` and `tabrepro sparsity-plot`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from tabrepro.config import Job, Params
from tabrepro.data.availability import unobtainable_datasets
from tabrepro.errors import InputError
from tabrepro.features import FeatureLayout
from tabrepro.io import atomic_write, write_json
from tabrepro.job_spec import resolve_job
from tabrepro.models.registry import get_model_class
from tabrepro.provenance import peak_memory_mb, provenance
from tabrepro.seeding import derive_seed

__all__ = [
    "ORDERS",
    "SparsityError",
    "SparsitySettings",
    "sparsity_settings",
    "plan_jobs",
    "result_path",
    "curve_files",
    "attribute_importance",
    "removal_sequence",
    "restrict_features",
    "run_curve",
    "plot_curves",
]

log = logging.getLogger(__name__)

ORDERS = ("random", "least_important", "most_important")
ORDER_LABELS = {
    "random": "random",
    "least_important": "least important first",
    "most_important": "most important first",
}
EXPERIMENT = "feature_sparsity"


class SparsityError(InputError, ValueError):
    """Bad feature-sparsity settings or inputs; the message names the offending key, value or file."""


@dataclass(frozen=True)
class SparsitySettings:
    """One profile's `feature_sparsity` entry (see params.yaml for the meaning of each field)."""

    paper: str
    models: tuple[str, ...]
    datasets: tuple[str, ...] | str = "all"
    group: str | None = None
    folds: tuple[int, ...] | str = "all"
    fractions: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
    orders: tuple[str, ...] = ORDERS
    metric: str = "auroc"
    importance_trees: int = 200

    def digest(self, seed: int) -> str:
        """What a curve depends on besides the main run's result: reruns a job when it changes."""
        payload = json.dumps({"seed": seed, **dataclasses.asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def sparsity_settings(params: Params) -> SparsitySettings | None:
    """The active profile's settings (None when it runs no feature-sparsity curves), checked
    against the rest of params.yaml: every error names the offending key or value."""
    section = params.raw.get(EXPERIMENT) or {}
    entry = section.get(params.profile_name)
    if entry is None:
        return None
    where = f"{params.source}: {EXPERIMENT}.{params.profile_name}"
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in entry.items()}  # YAML, unchecked
    settings = SparsitySettings(**values)
    if settings.paper not in params.papers:
        raise SparsityError(f"{where}.paper: unknown paper {settings.paper!r}; known: {params.papers}")
    bad = [o for o in settings.orders if o not in ORDERS]
    if bad:
        raise SparsityError(f"{where}.orders: unknown order(s) {bad}; known: {list(ORDERS)}")
    if sorted(set(settings.fractions)) != list(settings.fractions) or not all(0 <= f < 1 for f in settings.fractions):
        raise SparsityError(f"{where}.fractions: distinct increasing values in [0, 1), got {list(settings.fractions)}")
    if settings.datasets != "all":
        unknown = [d for d in settings.datasets if d not in params.paper(settings.paper)["datasets"]]
        if unknown:
            raise SparsityError(f"{where}.datasets: {unknown} not datasets of paper {settings.paper!r}")
    for dataset in _datasets(params, settings):
        for model in settings.models:
            if model not in params.selected_models(settings.paper) or not params.runs_on(
                settings.paper, model, dataset
            ):
                raise SparsityError(
                    f"{where}.models: {model!r} does not run on {settings.paper}/{dataset} in "
                    f"profile {params.profile_name!r}; the curves retrain the configuration "
                    f"its main run selected"
                )
    return settings


def _datasets(params: Params, settings: SparsitySettings) -> list[str]:
    """The profile's datasets of the paper (restricted to the entry's list and group)."""
    selected = params.selected_datasets(settings.paper)
    if settings.datasets != "all":
        selected = [d for d in selected if d in settings.datasets]
    if settings.group is not None:
        entries = params.paper(settings.paper)["datasets"]
        selected = [d for d in selected if entries[d].get("group") == settings.group]
    return selected


def plan_jobs(params: Params, settings: SparsitySettings | None) -> list[Job]:
    """One job per (dataset, model, fold) of the curves; empty when the profile runs none."""
    if settings is None:
        return []
    jobs: list[Job] = []
    for dataset in _datasets(params, settings):
        folds = params.folds(settings.paper, dataset)
        if settings.folds != "all":
            folds = [k for k in folds if k in settings.folds]
        jobs.extend(Job(settings.paper, dataset, model, k) for model in settings.models for k in folds)
    return jobs


def result_path(params: Params, job: Job) -> Path:
    return params.layout.sparsity_result.path(job)


def curve_files(params: Params, paper: str) -> dict[str, Path]:
    """The aggregate outputs of `plot_curves` for a paper."""
    layout = params.layout
    return {
        "csv": layout.sparsity_curves_csv.path(paper=paper),
        "png": layout.sparsity_curves_png.path(paper=paper),
        "summary": layout.sparsity_summary.path(paper=paper),
    }


# ------------------------------------------------------------------------------ the method
def attribute_importance(
    X_train: np.ndarray,
    y_train: np.ndarray,
    layout: FeatureLayout,
    task: str,
    seed: int,
    n_trees: int,
    n_jobs: int = 1,
) -> np.ndarray:
    """Random-forest impurity importance of each original feature (summed over its columns).

    Fitted on the rows given, which the caller keeps to the fold's training rows.
    """
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # deferred: loads sklearn

    kind = RandomForestRegressor if task == "regression" else RandomForestClassifier
    forest = kind(n_estimators=n_trees, random_state=seed, n_jobs=n_jobs).fit(X_train, y_train)
    if layout.n_columns != X_train.shape[1]:
        raise ValueError(f"the feature layout covers {layout.n_columns} columns, the matrix has {X_train.shape[1]}")
    columns = forest.feature_importances_
    return np.array([columns[a : a + f.columns].sum() for a, f in zip(layout.starts, layout.features)])


def removal_sequence(order: str, importance: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Feature indices in the order they are removed. Ties keep the features' table order."""
    if order == "random":
        return rng.permutation(len(importance))
    if order == "least_important":
        return np.argsort(importance, kind="stable")
    if order == "most_important":
        return np.argsort(-importance, kind="stable")
    raise SparsityError(f"unknown removal order {order!r}; known: {list(ORDERS)}")


def n_removed(fraction: float, n_features: int) -> int:
    """Features removed at `fraction`: rounded, and at least one feature always stays."""
    return min(int(round(fraction * n_features)), n_features - 1)


def restrict_features(data: Any, keep: list[int]) -> Any:
    """The fold (job_run.FoldData) with only the features `keep` (indices into its layout)."""
    layout = data.feature_layout
    columns = np.concatenate([np.arange(layout.starts[i], layout.starts[i] + layout.features[i].columns) for i in keep])
    return dataclasses.replace(data, X=np.ascontiguousarray(data.X[:, columns]), feature_layout=layout.select(keep))


def _point_key(order: str, fraction: float) -> str:
    return f"{order}@{fraction:g}"


def run_curve(
    params: Params,
    job: Job,
    *,
    metrics_path: Path | None = None,
    out_path: Path | None = None,
    n_jobs: int = 1,
    progress: bool = True,
) -> Path:
    """Every (order, fraction) point of one dataset x model x fold; returns the result path.

    Points are written to `<out>.partial.json` as they finish, so a killed job resumes where it
    stopped (only while its settings and the main run's selected configuration are unchanged).
    """
    from tabrepro.job_run import load_fold, model_outputs, outputs_metrics  # deferred: loads sklearn

    settings = sparsity_settings(params)
    if settings is None:
        raise SparsityError(f"profile {params.profile_name!r} has no {EXPERIMENT} entry in {params.source}")
    started = time.perf_counter()
    metrics_path = Path(metrics_path or params.layout.job_metrics.path(job))
    out_path = Path(out_path or result_path(params, job))
    if not metrics_path.is_file():
        raise FileNotFoundError(
            f"{metrics_path}: the main run of {job.paper}/{job.dataset}/{job.model}/"
            f"fold{job.fold} is missing (the curves retrain its selected configuration)"
        )
    main_run = json.loads(metrics_path.read_text())
    config = main_run["selected_config"]
    data = load_fold(resolve_job(params, job))
    if main_run["split"]["sha256"] != data.split.sha256:
        raise SparsityError(f"{metrics_path} was trained on another split than {data.split_file}; rerun it")

    digest = settings.digest(params.seed)
    identity = {"settings_digest": digest, "selected_config": config, "split": data.split.sha256}
    partial_path = out_path.with_name(out_path.name + ".partial")
    done: dict[str, dict] = {}
    if partial_path.is_file():
        stored = json.loads(partial_path.read_text())
        if stored.get("identity") == json.loads(json.dumps(identity)):
            done = stored["points"]
            log.info("resuming %s: %d point(s) done", out_path, len(done))

    tr, va, te = data.split.train, data.split.val, data.split.test
    names = list(data.feature_layout.names)
    importance = attribute_importance(
        data.X[tr],
        data.y[tr],
        data.feature_layout,
        data.task,
        derive_seed(params.seed, *job.names(), "importance"),
        settings.importance_trees,
        n_jobs,
    )
    rng = np.random.default_rng(derive_seed(params.seed, *job.names(), "random_order"))
    sequences = {order: removal_sequence(order, importance, rng) for order in ORDERS}
    model_class = get_model_class(job.model)

    def fit_point(removed: list[int], key: str) -> dict:
        keep = sorted(set(range(len(names))) - set(removed))
        reduced = restrict_features(data, keep)
        point_started = time.perf_counter()
        seed = derive_seed(params.seed, *job.names(), EXPERIMENT, len(removed), *sorted(removed))
        work_dir = out_path.with_name(out_path.stem) / "state" / hashlib.sha256(key.encode()).hexdigest()[:12]
        model = model_class(data.task, config, seed=seed, n_jobs=n_jobs, n_classes=data.n_classes)
        model.fit(
            reduced.X[tr],
            reduced.y[tr],
            reduced.X[va],
            reduced.y[va],
            context=reduced.context(work_dir if model_class.accelerator == "gpu" else None),
        )
        scores = {
            part: outputs_metrics(
                data.task, model_outputs(model, data.task, reduced.X[rows]), data.y[rows], data.target
            )
            for part, rows in (("val", va), ("test", te))
        }
        return {**scores, "n_features": len(keep), "wall_time_s": round(time.perf_counter() - point_started, 3)}

    points = []
    plan = [(order, fraction) for order in settings.orders for fraction in settings.fractions]
    for order, fraction in tqdm(
        plan, desc=f"{EXPERIMENT} {job.dataset}/{job.model}/fold{job.fold}", unit="point", disable=not progress
    ):
        removed = [int(i) for i in sequences[order][: n_removed(fraction, len(names))]]
        # The same removed set (e.g. 0% in every order) is trained once and shared.
        key = json.dumps(sorted(removed))
        if key not in done:
            done[key] = fit_point(removed, key)
            write_json(partial_path, {"identity": identity, "points": done}, indent=None)
        metric = done[key]["test"].get(settings.metric)
        if metric is None:
            raise SparsityError(
                f"{job.paper}/{job.dataset}: metric {settings.metric!r} is not defined for its "
                f"{data.task} task (have {sorted(done[key]['test'])})"
            )
        points.append(
            {
                "order": order,
                "fraction": fraction,
                "n_removed": len(removed),
                "removed": [names[i] for i in removed],
                **done[key],
            }
        )

    result = {
        "experiment": EXPERIMENT,
        "paper": job.paper,
        "dataset": job.dataset,
        "model": job.model,
        "fold": job.fold,
        "task": data.task,
        "metric": settings.metric,
        "profile": params.profile_name,
        "seed": params.seed,
        "settings_digest": digest,
        "settings": dataclasses.asdict(settings),
        "split": {"sha256": data.split.sha256, "file": str(data.split_file)},
        "selected_config": config,
        "main_run": {"file": str(metrics_path), "params_digest": main_run.get("params_digest")},
        "n_features": len(names),
        "importance": dict(zip(names, importance.round(6).tolist())),
        "points": points,
        "wall_time_s": round(time.perf_counter() - started, 3),
        "peak_memory_mb": round(peak_memory_mb(), 1),
        "provenance": provenance(threads=n_jobs),
    }
    write_json(out_path, result)
    partial_path.unlink(missing_ok=True)
    return out_path


# ------------------------------------------------------------------------------ aggregation
def plot_curves(params: Params, paper: str | None = None) -> dict[str, Path]:
    """Average the profile's curve jobs: per dataset over folds, then over datasets.

    Writes curves.csv (model, order, fraction, mean metric, SE over datasets, n datasets),
    curves.png (one panel per order) and summary.json; returns their paths.
    """
    import pandas as pd  # deferred: loads pandas

    from tabrepro import figures  # deferred: loads matplotlib

    settings = sparsity_settings(params)
    if settings is None:
        raise SparsityError(f"profile {params.profile_name!r} has no {EXPERIMENT} entry in {params.source}")
    paper = paper or settings.paper
    if paper != settings.paper:
        raise SparsityError(
            f"profile {params.profile_name!r} draws the feature-sparsity curves for paper "
            f"{settings.paper!r}, not {paper!r}"
        )

    unobtainable = unobtainable_datasets(params, paper)  # a partial run averages what it could get
    rows = []
    for job in plan_jobs(params, settings):
        if job.dataset in unobtainable:
            continue
        path = result_path(params, job)
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: curve job missing (run `tabrepro sparsity {job.paper} "
                f"{job.dataset} {job.model} --fold {job.fold}`)"
            )
        result = json.loads(path.read_text())
        if result.get("settings_digest") != settings.digest(params.seed):
            raise SparsityError(f"{path} was written under other {EXPERIMENT} settings; rerun it")
        for point in result["points"]:
            rows.append(
                {
                    "dataset": job.dataset,
                    "model": job.model,
                    "fold": job.fold,
                    "order": point["order"],
                    "fraction": point["fraction"],
                    "value": point["test"][settings.metric],
                }
            )
    if not rows:
        raise SparsityError(
            f"no {EXPERIMENT} results for paper {paper!r}: none of its datasets could be "
            f"obtained ({', '.join(sorted(unobtainable))})"
        )
    frame = pd.DataFrame(rows)
    per_dataset = frame.groupby(["model", "order", "fraction", "dataset"], as_index=False)["value"].mean()
    curves = (
        per_dataset.groupby(["model", "order", "fraction"])["value"]
        .agg(mean="mean", se="sem", n_datasets="count")
        .reset_index()
    )
    labels = params.paper(paper)["models"]
    curves.insert(1, "label", [labels.get(m, m) for m in curves["model"]])
    files = curve_files(params, paper)
    atomic_write(files["csv"], curves.to_csv(index=False, float_format="%.6g"))
    figures.sparsity_curves(
        curves.to_dict("records"),
        files["png"],
        metric=settings.metric,
        orders=[(o, ORDER_LABELS[o]) for o in settings.orders],
        title=f"Feature sparsity ({', '.join(sorted(set(frame['dataset'])))})",
    )
    summary = {
        "experiment": EXPERIMENT,
        "paper": paper,
        "profile": params.profile_name,
        "metric": settings.metric,
        "settings": dataclasses.asdict(settings),
        "datasets": sorted(set(frame["dataset"])),
        "unobtainable": unobtainable,
        "curves": curves.to_dict("records"),
    }
    write_json(files["summary"], summary, default=float)
    return files
