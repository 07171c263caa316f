"""Every figure of the HTML report and of the analysis experiments (matplotlib, Agg, no pyplot).

Figures are built on `matplotlib.figure.Figure` objects rather than pyplot, so nothing depends on
global state or a display, and written atomically (temp file + rename) without the Software
metadata entry, so the same inputs give the same PNG bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before anything else from matplotlib: no display, no GUI toolkit

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tabrepro.io import atomic_path  # noqa: E402

__all__ = [
    "save",
    "bar_chart_by_dataset",
    "paper_vs_ours_scatter",
    "mean_rank_plot",
    "critical_difference",
    "critical_difference_diagram",
    "corruption_chart",
    "deletion_histogram",
    "attention_grid",
    "lookup_rmse_bars",
    "knn_curves",
    "intervention_plot",
    "cost_chart",
    "sparsity_curves",
    "forest_plot",
]

OURS = "#1f77b4"
PAPER = "#d62728"
DPI = 110


def save(figure: Figure, path: Path) -> Path:
    """Write a PNG atomically; returns the path."""
    path = Path(path)
    with atomic_path(path, suffix=".png") as temp:
        figure.savefig(temp, format="png", dpi=DPI, metadata={"Software": None}, bbox_inches="tight")
    return path


def _grid(n: int, columns: int, width: float, height: float) -> tuple[Figure, list[Any]]:
    columns = max(1, min(columns, n))
    rows = max(1, math.ceil(n / columns))
    figure = Figure(figsize=(width * columns, height * rows))
    axes = [figure.add_subplot(rows, columns, i + 1) for i in range(max(n, 1))]
    return figure, axes


def _num(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return number


# ---------------------------------------------------------------------------- result tables
def bar_chart_by_dataset(rows: Sequence[Mapping[str, Any]], path: Path, title: str, metric: str) -> Path:
    """One panel per dataset: our mean ± SE per method (bars), the paper's value (diamonds).

    rows: dicts with dataset, method, ours_mean, ours_se, paper_value, paper_se.
    """
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    figure, axes = _grid(
        len(datasets), 3, 4.6, 0.45 * max([sum(1 for r in rows if r["dataset"] == d) for d in datasets] or [1]) + 1.4
    )
    for axis, dataset in zip(axes, datasets):
        chosen = [r for r in rows if r["dataset"] == dataset]
        y = np.arange(len(chosen))
        ours = np.array([_num(r.get("ours_mean")) for r in chosen])
        ours_se = np.nan_to_num(np.array([_num(r.get("ours_se")) for r in chosen]))
        paper = np.array([_num(r.get("paper_value")) for r in chosen])
        paper_se = np.nan_to_num(np.array([_num(r.get("paper_se")) for r in chosen]))
        finite = np.isfinite(ours)
        axis.barh(y[finite], ours[finite], xerr=ours_se[finite], color=OURS, alpha=0.8, capsize=3, label="ours (± SE)")
        has_paper = np.isfinite(paper)
        axis.errorbar(
            paper[has_paper],
            y[has_paper],
            xerr=paper_se[has_paper],
            fmt="D",
            color=PAPER,
            capsize=3,
            markersize=5,
            label="paper",
        )
        axis.set_yticks(y, [r["method"] for r in chosen])
        axis.invert_yaxis()
        values = np.concatenate([ours[finite], paper[has_paper]])
        if values.size:
            low, high = float(values.min()), float(values.max())
            pad = 0.15 * (high - low) + 1e-9 * max(abs(high), 1.0)
            # Close positive values (accuracy 94-97 %) get a zoomed axis; others start at 0.
            zoom = low > 0 and (high - low) < 0.5 * high
            axis.set_xlim(
                low - pad - float(ours_se.max(initial=0)) if zoom else min(0.0, low - pad),
                high + pad + float(ours_se.max(initial=0)),
            )
        axis.set_title(dataset, fontsize=10)
        axis.set_xlabel(metric)
        axis.grid(axis="x", alpha=0.3)
    for axis in axes[len(datasets) :]:
        axis.set_visible(False)
    if datasets:
        axes[0].legend(fontsize=8, loc="best")
    figure.suptitle(title, fontsize=11)
    return save(figure, path)


def paper_vs_ours_scatter(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Ours against the paper's number, one panel per metric, with the identity line."""
    metrics = list(dict.fromkeys(r["metric"] for r in rows)) or ["(none)"]
    figure, axes = _grid(len(metrics), 3, 4.2, 4.0)
    for axis, metric in zip(axes, metrics):
        chosen = [r for r in rows if r["metric"] == metric]
        x = np.array([_num(r["paper_value"]) for r in chosen])
        y = np.array([_num(r["ours_mean"]) for r in chosen])
        xerr = np.nan_to_num(np.array([_num(r.get("paper_se")) for r in chosen]))
        yerr = np.nan_to_num(np.array([_num(r.get("ours_se")) for r in chosen]))
        if x.size:
            axis.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", color=OURS, capsize=2, markersize=4)
            low, high = float(np.nanmin([x.min(), y.min()])), float(np.nanmax([x.max(), y.max()]))
            pad = 0.05 * (high - low) + 1e-9 * max(abs(high), 1.0)
            axis.plot([low - pad, high + pad], [low - pad, high + pad], "--", color="grey", lw=1)
            for xi, yi, r in zip(x, y, chosen):
                axis.annotate(
                    f"{r['method']}", (xi, yi), fontsize=6, alpha=0.7, xytext=(3, 3), textcoords="offset points"
                )
        else:
            axis.text(0.5, 0.5, "no pairs yet", ha="center", va="center", transform=axis.transAxes)
        axis.set_title(metric, fontsize=10)
        axis.set_xlabel("paper")
        axis.set_ylabel("ours")
        axis.grid(alpha=0.3)
    for axis in axes[len(metrics) :]:
        axis.set_visible(False)
    figure.suptitle("Paper vs ours (every cell with both numbers)", fontsize=11)
    return save(figure, path)


def mean_rank_plot(ranks: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Mean rank ± SE per method (1 = best), best at the top."""
    ordered = sorted(ranks, key=lambda r: r["mean_rank"])
    figure = Figure(figsize=(6.0, 0.4 * max(len(ordered), 1) + 1.3))
    axis = figure.add_subplot(1, 1, 1)
    y = np.arange(len(ordered))
    axis.barh(
        y,
        [r["mean_rank"] for r in ordered],
        xerr=[0.0 if r.get("se") is None else r["se"] for r in ordered],
        color=OURS,
        alpha=0.8,
        capsize=3,
    )
    axis.set_yticks(y, [r["method"] for r in ordered])
    axis.invert_yaxis()
    axis.set_xlabel("mean rank (1 = best)")
    axis.set_title(title, fontsize=10)
    axis.grid(axis="x", alpha=0.3)
    return save(figure, path)


# Two-tailed Nemenyi critical values q_0.05 (Demšar 2006, Table 5a): the studentised range
# statistic for infinite degrees of freedom divided by sqrt(2), for k = 2..10 methods.
_Q05 = {2: 1.960, 3: 2.343, 4: 2.569, 5: 2.728, 6: 2.850, 7: 2.949, 8: 3.031, 9: 3.102, 10: 3.164}


def critical_difference(n_methods: int, n_blocks: int, alpha: float = 0.05) -> float:
    """Nemenyi critical difference of mean ranks: q_alpha * sqrt(k (k + 1) / (6 N))."""
    if n_methods < 2 or n_blocks < 1:
        return float("nan")
    if alpha == 0.05 and n_methods in _Q05:
        q = _Q05[n_methods]
    else:
        from scipy.stats import studentized_range  # deferred: loads scipy

        q = float(studentized_range.ppf(1 - alpha, n_methods, 1e6)) / math.sqrt(2)
    return q * math.sqrt(n_methods * (n_methods + 1) / (6.0 * n_blocks))


def critical_difference_diagram(
    avg_ranks: Mapping[str, float],
    n_blocks: int,
    path: Path,
    title: str,
    alpha: float = 0.05,
    *,
    claims: bool = True,
    note: str | None = None,
) -> Path:
    """Demšar's diagram: methods on a rank axis; a bar joins methods whose mean ranks differ by
    less than the Nemenyi critical difference (not significantly different).

    With `claims` False (the Friedman test did not reject, or the blocks are not independent)
    the CD bar and the joining bars are drawn in light grey and `note` says why, so the figure
    still shows the mean ranks without asserting which differences are significant.
    """
    methods = sorted(avg_ranks, key=lambda m: avg_ranks[m])
    k = len(methods)
    cd = critical_difference(k, n_blocks, alpha)
    figure = Figure(figsize=(8.0, 1.6 + 0.3 * k + (0.3 if note else 0.0)))
    axis = figure.add_subplot(1, 1, 1)
    low, high = 1, max(k, 2)
    axis.set_xlim(low - 0.5, high + 0.5)
    axis.set_ylim(-(k // 2 + 2) - 0.5, 2.2)
    axis.axhline(0, color="black", lw=1)
    for tick in range(low, high + 1):
        axis.plot([tick, tick], [0, 0.15], color="black", lw=1)
        axis.text(tick, 0.3, str(tick), ha="center", fontsize=8)
    half = math.ceil(k / 2)
    for i, method in enumerate(methods):
        rank = avg_ranks[method]
        level = -(i + 1) if i < half else -(k - i)
        side = "left" if i < half else "right"
        end = low - 0.4 if side == "left" else high + 0.4
        axis.plot([rank, rank, end], [0, level, level], color="black", lw=0.8)
        axis.text(
            end + (-0.05 if side == "left" else 0.05),
            level,
            f"{method} ({rank:.2f})",
            ha="right" if side == "left" else "left",
            va="center",
            fontsize=8,
        )
    cd_colour, clique_colour = (PAPER, "grey") if claims else ("#c8c8c8", "#e0e0e0")
    if math.isfinite(cd):
        start = low
        axis.plot([start, start + cd], [1.4, 1.4], color=cd_colour, lw=2)
        label = f"CD = {cd:.2f} (Nemenyi, α = {alpha})" + ("" if claims else ", not a claim")
        axis.text(start + cd / 2, 1.6, label, ha="center", fontsize=8, color=PAPER if claims else "#8a8a8a")
        bar_level = -0.35
        for clique in _cliques([avg_ranks[m] for m in methods], cd):
            a, b = clique
            axis.plot(
                [avg_ranks[methods[a]] - 0.03, avg_ranks[methods[b]] + 0.03],
                [bar_level, bar_level],
                color=clique_colour,
                lw=3,
                solid_capstyle="round",
            )
            bar_level -= 0.25
    axis.set_axis_off()
    axis.set_title(f"{title} (N = {n_blocks})", fontsize=10)
    if note:
        figure.text(0.5, 0.0, note, ha="center", va="top", fontsize=8, color="#555555", wrap=True)
    return save(figure, path)


def _cliques(sorted_ranks: Sequence[float], cd: float) -> list[tuple[int, int]]:
    """Maximal runs of methods (in rank order) whose first and last differ by less than cd."""
    runs: list[tuple[int, int]] = []
    for start in range(len(sorted_ranks)):
        end = start
        while end + 1 < len(sorted_ranks) and sorted_ranks[end + 1] - sorted_ranks[start] < cd:
            end += 1
        if end > start and not any(a <= start and end <= b for a, b in runs):
            runs.append((start, end))
    return runs


def cost_chart(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Wall time and peak memory per model (mean over folds), one bar group per dataset."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    models = list(dict.fromkeys(r["method"] for r in rows))
    figure = Figure(figsize=(10.0, 0.35 * max(len(models), 1) * max(len(datasets), 1) + 1.5))
    for index, (key, label) in enumerate(
        (("wall_time_s", "wall time per fold (s, log)"), ("peak_memory_mb", "peak memory (MB)"))
    ):
        axis = figure.add_subplot(1, 2, index + 1)
        labels, values = [], []
        for dataset in datasets:
            for model in models:
                match = [r for r in rows if r["dataset"] == dataset and r["method"] == model]
                if match and match[0].get(key) is not None:
                    labels.append(f"{dataset} · {model}")
                    values.append(float(match[0][key]))
        y = np.arange(len(values))
        axis.barh(y, values, color=OURS, alpha=0.8)
        axis.set_yticks(y, labels, fontsize=7)
        axis.invert_yaxis()
        if key == "wall_time_s" and values and min(values) > 0:
            axis.set_xscale("log")
        axis.set_xlabel(label)
        axis.grid(axis="x", alpha=0.3)
        if index:
            axis.set_yticks(y, [""] * len(values))
    figure.suptitle(title, fontsize=11)
    return save(figure, path)


# ---------------------------------------------------------------------------- analysis figures
def corruption_chart(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Clean vs corrupted test metric per dataset (Table 2's experiment)."""
    figure, axes = _grid(len(rows), 4, 3.0, 3.2)
    for axis, row in zip(axes, rows):
        clean, corrupt = row["clean"], row["corrupted"]
        axis.bar(
            [0, 1],
            [clean, corrupt],
            yerr=[row.get("clean_se") or 0.0, row.get("corrupted_se") or 0.0],
            color=[OURS, PAPER],
            alpha=0.8,
            capsize=3,
        )
        axis.set_xticks([0, 1], ["clean", "corrupted"])
        axis.set_title(f"{row['dataset']}\nΔ = {row['delta_text']}", fontsize=9)
        axis.set_ylabel(row["metric"])
        axis.grid(axis="y", alpha=0.3)
    for axis in axes[len(rows) :]:
        axis.set_visible(False)
    figure.suptitle("Corrupting the other datapoints (Alg. 1)", fontsize=11, y=1.06)
    return save(figure, path)


def deletion_histogram(
    kept: Sequence[float], deleted: Sequence[float], random: Sequence[float], path: Path, title: str
) -> Path:
    """Per test row: mean feature-space distance of kept, deleted and random-deleted rows."""
    figure = Figure(figsize=(6.4, 3.8))
    axis = figure.add_subplot(1, 1, 1)
    series = [("kept", kept, OURS), ("deleted", deleted, PAPER), ("random", random, "#7f7f7f")]
    values = (
        np.concatenate([np.asarray(v, float) for _, v, _ in series if len(v)])
        if any(len(v) for _, v, _ in series)
        else np.array([0.0, 1.0])
    )
    bins = np.linspace(float(values.min()), float(values.max()) + 1e-9, 21)
    for label, data, color in series:
        if len(data):
            axis.hist(
                np.asarray(data, float),
                bins=bins.tolist(),
                histtype="step",
                lw=2,
                color=color,
                label=f"{label} (mean {np.mean(data):.2f})",
            )
    axis.set_xlabel("mean distance to the test row (feature space)")
    axis.set_ylabel("test rows")
    axis.legend(fontsize=8)
    axis.set_title(title, fontsize=10)
    return save(figure, path)


def attention_grid(maps: Sequence[np.ndarray], path: Path, title: str, boundaries: Sequence[int] = ()) -> Path:
    """Rows = ABD layers, columns = heads; each panel an (n x n) attention map.

    Rows and columns are in the caller's order (by distance to the reference row, which is
    first); `boundaries` draws separators (e.g. originals | duplicates in the lookup task).
    """
    n_layers = len(maps)
    n_heads = max((m.shape[0] for m in maps), default=1)
    figure = Figure(figsize=(1.9 * n_heads + 0.8, 1.9 * max(n_layers, 1) + 0.7))
    for layer, heads in enumerate(maps):
        for head in range(heads.shape[0]):
            axis = figure.add_subplot(max(n_layers, 1), n_heads, layer * n_heads + head + 1)
            weights = heads[head]
            top = float(np.quantile(weights, 0.995)) or 1.0
            axis.imshow(weights, cmap="viridis", vmin=0.0, vmax=top, interpolation="nearest")
            for b in boundaries:
                axis.axhline(b - 0.5, color="white", lw=0.6)
                axis.axvline(b - 0.5, color="white", lw=0.6)
            axis.set_xticks([])
            axis.set_yticks([])
            if layer == 0:
                axis.set_title(f"head {head}", fontsize=8)
            if head == 0:
                axis.set_ylabel(f"ABD {layer}", fontsize=8)
    figure.suptitle(title, fontsize=10)
    return save(figure, path)


def attention_profile(maps: Sequence[np.ndarray], distances: np.ndarray, path: Path, title: str) -> Path:
    """The reference row's attention weights against the distance of each row, per layer."""
    figure, axes = _grid(len(maps), 4, 3.2, 2.8)
    for layer, (axis, heads) in enumerate(zip(axes, maps)):
        for head in range(heads.shape[0]):
            axis.scatter(distances[1:], heads[head, 0, 1:], s=4, alpha=0.6, label=f"h{head}")
        axis.set_title(f"ABD {layer}", fontsize=9)
        axis.set_xlabel("distance to reference row")
        axis.set_ylabel("attention weight")
        axis.grid(alpha=0.3)
    for axis in axes[len(maps) :]:
        axis.set_visible(False)
    figure.suptitle(title, fontsize=10)
    return save(figure, path)


def lookup_rmse_bars(
    variants: Mapping[str, Mapping[str, Any]], paper: Mapping[tuple[str, str], float], path: Path, unit: str
) -> Path:
    """Table 3: RMSE of NPT, 1-NN and k-NN per variant; the paper's values as diamonds."""
    names = list(variants)
    methods = ["NPT", "1-NN", "k-NN"]
    figure = Figure(figsize=(2.2 * max(len(names), 1) + 1.5, 3.8))
    axis = figure.add_subplot(1, 1, 1)
    width = 0.26
    colors = [OURS, "#2ca02c", "#9467bd"]
    for i, method in enumerate(methods):
        x = np.arange(len(names)) + (i - 1) * width
        axis.bar(
            x,
            [variants[v]["rmse"][method] for v in names],
            width,
            color=colors[i],
            alpha=0.85,
            label=f"{method} (ours)",
        )
        paper_values = [paper.get((v, method), float("nan")) for v in names]
        axis.plot(x, paper_values, "D", color=PAPER, markersize=5, label="paper" if i == 0 else None)
    axis.set_xticks(np.arange(len(names)), [v.replace("_", " ") for v in names], fontsize=8)
    axis.set_ylabel(f"test RMSE ({unit})")
    axis.set_title("Lookup task (Table 3): NPT vs nearest neighbours", fontsize=10)
    axis.legend(fontsize=7, ncol=2)
    axis.grid(axis="y", alpha=0.3)
    return save(figure, path)


def knn_curves(variants: Mapping[str, Mapping[str, Any]], path: Path, unit: str) -> Path:
    """k-NN test RMSE against k per variant, with NPT's RMSE as a horizontal line."""
    figure, axes = _grid(len(variants), 4, 3.2, 2.8)
    for axis, (name, result) in zip(axes, variants.items()):
        curve = result["knn"]["test_rmse_by_k"]
        ks = sorted(int(k) for k in curve)
        axis.plot(ks, [curve[k] if k in curve else curve[str(k)] for k in ks], "o-", color="#9467bd", label="k-NN")
        axis.axhline(result["rmse"]["NPT"], color=OURS, label="NPT")
        axis.set_title(name.replace("_", " "), fontsize=9)
        axis.set_xlabel("k")
        axis.set_ylabel(f"RMSE ({unit})")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    if variants:
        axes[0].legend(fontsize=7)
    for axis in axes[len(variants) :]:
        axis.set_visible(False)
    return save(figure, path)


def intervention_plot(variants: Mapping[str, Mapping[str, Any]], path: Path, add: float) -> Path:
    """Fig. 3d-e: NPT's prediction for an original against its duplicate's (changed) target."""
    figure, axes = _grid(len(variants), 4, 3.2, 3.0)
    for axis, (name, result) in zip(axes, variants.items()):
        shift = add if "add_one" in name else 0.0
        for run in result["interventions"]:
            axis.plot(
                run["duplicate_values"],
                run["predictions"],
                "o-",
                markersize=3,
                lw=1,
                label=f"row {run['row']} (slope {run['slope']:.2f})",
            )
        values = result["interventions"][0]["duplicate_values"] if result["interventions"] else [0, 1]
        axis.plot(values, [v - shift for v in values], "--", color="grey", lw=1, label="ideal")
        axis.set_title(name.replace("_", " "), fontsize=9)
        axis.set_xlabel("duplicate's target (standardised)")
        axis.set_ylabel("NPT prediction for original")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6)
    for axis in axes[len(variants) :]:
        axis.set_visible(False)
    figure.suptitle("Interventions: the prediction follows the duplicate", fontsize=10, y=1.04)
    return save(figure, path)


def sparsity_curves(
    rows: Sequence[Mapping[str, Any]], path: Path, metric: str, orders: Sequence[tuple[str, str]], title: str
) -> Path:
    """BiSHop Fig. 4.1 (right): mean test metric against the % of features removed, one panel
    per removal order, one line per model (band: ± SE over datasets where there are several).

    rows: dicts with model, label, order, fraction, mean, se.
    """
    figure, axes = _grid(len(orders), 3, 3.8, 3.1)
    scale = 100.0 if metric == "auroc" else 1.0
    models = list(dict.fromkeys(r["model"] for r in rows))
    colours = matplotlib.colormaps["tab10"]
    values = scale * np.array([_num(r["mean"]) for r in rows])
    values = values[np.isfinite(values)]
    for axis, (order, label) in zip(axes, orders):
        for index, model in enumerate(models):
            chosen = sorted(
                (r for r in rows if r["model"] == model and r["order"] == order), key=lambda r: r["fraction"]
            )
            if not chosen:
                continue
            x = np.array([100 * r["fraction"] for r in chosen])
            y = scale * np.array([_num(r["mean"]) for r in chosen])
            se = scale * np.nan_to_num(np.array([_num(r.get("se")) for r in chosen]))
            axis.plot(x, y, "o-", markersize=3, color=colours(index), label=chosen[0].get("label", model))
            if se.any():
                axis.fill_between(x, y - se, y + se, color=colours(index), alpha=0.15, linewidth=0)
        axis.set_title(f"removed: {label}", fontsize=9)
        axis.set_xlabel("features removed (%)")
        axis.set_ylabel("test AUC (%)" if metric == "auroc" else f"test {metric}")
        if values.size:  # one scale for every panel, so the orders compare at a glance
            pad = 0.08 * (values.max() - values.min()) + 1e-6
            axis.set_ylim(values.min() - pad, values.max() + pad)
        axis.grid(alpha=0.3)
    if orders and models:
        axes[0].legend(fontsize=7)
    for axis in axes[len(orders) :]:
        axis.set_visible(False)
    figure.suptitle(title, fontsize=10, y=1.03)
    return save(figure, path)


VERDICT_COLOURS = {
    "reproduced": "#2ca02c",
    "differs": "#d62728",
    "shifted": "#ff7f0e",
    "cannot be decided": "#8c564b",
    "inconclusive": "#7f7f7f",
    "not comparable": "#9467bd",
}


def forest_plot(cells: Sequence[Any], path: Path, title: str) -> Path:
    """Δ and its 95 % CI per judged cell in units of the cell's margin δ (so the ±δ band is ±1 for
    every cell, absolute or relative margins alike), coloured by verdict; quoted numbers hollow."""
    shown = [c for c in cells if c.delta is not None and c.margin and c.ci_low is not None]
    figure = Figure(figsize=(6.4, 0.9 + 0.22 * max(len(shown), 1)))
    axis = figure.add_subplot(1, 1, 1)
    axis.axvspan(-1.0, 1.0, color="#2ca02c", alpha=0.12, label="±δ")
    axis.axvline(0.0, color="grey", lw=0.8)
    for row, cell in enumerate(reversed(shown)):
        colour = VERDICT_COLOURS.get(cell.verdict_class, "black")
        low, centre, high = (v / cell.margin for v in (cell.ci_low, cell.delta, cell.ci_high))
        axis.plot([low, high], [row, row], color=colour, lw=1.5)
        hollow = cell.count_group == "quoted"
        axis.plot(centre, row, "o", color=colour, markerfacecolor="white" if hollow else colour, markersize=4)
    axis.set_yticks(range(len(shown)))
    axis.set_yticklabels([f"{c.column} · {c.method}" for c in reversed(shown)], fontsize=6)
    axis.set_xlabel("Δ = ours − paper, in units of the margin δ (95 % CI; hollow: number quoted from another paper)")
    for verdict, colour in VERDICT_COLOURS.items():
        axis.plot([], [], "o", color=colour, label=verdict)
    axis.legend(fontsize=6, loc="best")
    if not shown:
        axis.text(0.5, 0.5, "no judged cell", ha="center", va="center", transform=axis.transAxes)
    axis.set_title(title, fontsize=9)
    axis.grid(alpha=0.3, axis="x")
    return save(figure, path)
