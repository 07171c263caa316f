"""NPT's analysis experiments: corruption (Table 2), the semi-synthetic lookup (Table 3, Fig. 3),
data deletion (§4.4) and attention between datapoints (Fig. 3b, 4). Only results written under
the active profile are shown."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import wilcoxon

from tabrepro import figures
from tabrepro.npt.analysis.settings import LOOKUP_VARIANTS
from tabrepro.reporting.html.page import Page, ReportError, as_float, esc, fmt, se_units, slug, table_html
from tabrepro.reporting.tables import DASH


def _analysis_results(params: Any) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    """Analysis result files written under the active profile, by experiment."""
    root = params.layout.analysis_dir.path()
    found: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for path in sorted(root.glob("*/*/result.json")) + sorted(root.glob("*/*/fold*/result.json")):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise ReportError(f"{path}: cannot read analysis result: {error}") from None
        if not isinstance(payload, dict) or "experiment" not in payload:
            raise ReportError(f"{path}: not an analysis result (no 'experiment')")
        if payload.get("profile") != params.profile_name:
            continue
        found.setdefault(payload["experiment"], []).append((path, payload))
    return found


def analysis_sections(page: Page, params: Any) -> list[dict[str, Any]]:
    found = _analysis_results(params)
    page.section("analysis", "NPT analysis experiments")
    if not found:
        page.empty("No analysis results for this profile yet.")
        return []
    _corruption_block(page, found.get("corruption", []))
    _lookup_block(page, found.get("lookup", []))
    _deletion_block(page, found.get("deletion", []))
    _attention_block(page, found.get("attention", []))
    return [payload for entries in found.values() for _, payload in entries]


def _mean_se(values: Sequence[float | None]) -> tuple[float | None, float | None, int]:
    clean = [v for v in values if v is not None]
    if not clean:
        return None, None, 0
    se = float(np.std(clean, ddof=1) / math.sqrt(len(clean))) if len(clean) > 1 else None
    return float(np.mean(clean)), se, len(clean)


def _corruption_block(page: Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:
    page.add('<h3 id="corruption">Corruption of the other datapoints (Alg. 1, Table 2)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    page.note(
        "For each test row every attribute of the other rows in its batch is permuted "
        "independently (values with their mask bits), and the row is predicted again. "
        "Δ is the accuracy change in points (classification) or (RMSE_clean − RMSE_corrupt) / "
        "RMSE_clean in % (regression): negative means the model needed the other rows. Mean ± "
        "SE over folds."
    )
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for _, payload in entries:
        if payload.get("n_test_rows"):
            by_dataset.setdefault(payload["dataset"], []).append(payload)
    rows, chart = [], []
    for dataset, payloads in sorted(by_dataset.items()):
        metric_delta = payloads[0]["table2"]["metric"]
        base_metric = "rmse" if metric_delta.startswith("delta_rmse") else "accuracy_pct"
        clean, clean_se, n = _mean_se([p["clean"].get(base_metric) for p in payloads])
        corrupt, corrupt_se, _ = _mean_se([p["corrupted"].get(base_metric) for p in payloads])
        delta, delta_se, _ = _mean_se([p["table2"]["ours"] for p in payloads])
        paper_value = payloads[0]["table2"].get("paper")
        z = se_units(delta, delta_se, paper_value, None)
        extra = []
        for other in ("auroc", "nll"):
            c, _, _ = _mean_se([p["clean"].get(other) for p in payloads])
            k, _, _ = _mean_se([p["corrupted"].get(other) for p in payloads])
            if c is not None and k is not None:
                extra.append(f"{other} {c:.3f} → {k:.3f}")
        rows.append(
            [
                dataset,
                metric_delta,
                n,
                sum(p["n_test_rows"] for p in payloads),
                fmt(clean, base_metric),
                fmt(corrupt, base_metric),
                f"{fmt(delta, '', 2)}" + ("" if delta_se is None else f" ± {delta_se:.2f}"),
                fmt(paper_value, "", 1),
                DASH if z is None else f"{z:+.2f}",
                "; ".join(extra) or DASH,
            ]
        )
        chart.append(
            {
                "dataset": dataset,
                "metric": base_metric,
                "clean": clean or 0.0,
                "corrupted": corrupt or 0.0,
                "clean_se": clean_se,
                "corrupted_se": corrupt_se,
                "delta_text": f"{fmt(delta, '', 2)} (paper {fmt(paper_value, '', 1)})",
            }
        )
    page.add(
        table_html(
            [
                "Dataset",
                "Δ metric",
                "Folds",
                "Test rows",
                "Clean",
                "Corrupted",
                "Δ ours",
                "Δ paper",
                "in SE units",
                "Other metrics",
            ],
            rows,
            2,
        )
    )
    if chart:
        figures.corruption_chart(chart, page.out_dir / "corruption.png")
        page.figure("corruption.png", "Clean vs corrupted test metric (mean ± SE over folds).")


def _lookup_block(page: Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:
    page.add('<h3 id="lookup">Semi-synthetic lookup (Table 3, Fig. 3)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    for path, payload in entries:
        comparable = payload.get("paper_values_comparable", False)
        paper_values = {(p["variant"], p["method"]): p["rmse"] for p in payload.get("paper_values", [])}
        page.note(
            f"Data: {payload.get('source')} ({payload.get('n_train_rows')} training rows, "
            f"{payload.get('n_features')} features). Each batch holds originals with hidden "
            f"targets and duplicates with revealed targets; test rows are fresh. 1-NN and k-NN "
            f"(k chosen on validation rows) are fitted on the test duplicates and predict the "
            f"originals. RMSE in target units"
            + (
                "."
                if comparable
                else "; the data are not Protein, so the paper's numbers "
                "(shown for reference) are on another scale: compare ratios, not values."
            )
        )
        rows = []
        order = [v for v in LOOKUP_VARIANTS if v in payload["variants"]]
        for variant in order:
            result = payload["variants"][variant]
            for method in ("NPT", "1-NN", "k-NN"):
                ours = result["rmse"][method]
                extra = ""
                if method == "NPT":
                    slopes = [run["slope"] for run in result.get("interventions", [])]
                    on_dup = result.get("attention_on_duplicate") or []
                    last = np.mean(on_dup[-1]) if on_dup else None
                    extra = (
                        f"r = {result['pearson_r']['NPT']:.3f}; intervention slope {np.mean(slopes):.2f}"
                        if slopes
                        else ""
                    ) + ("" if last is None else f"; attention on own duplicate {last:.2f}")
                elif method == "k-NN":
                    extra = f"k = {result['knn']['best_k']}"
                rows.append(
                    [
                        variant.replace("_", " "),
                        method,
                        f"{ours:.3f}",
                        fmt(paper_values.get((variant, method)), "", 2),
                        f"{ours / max(result['rmse']['NPT'], 1e-12):.1f}" if method != "NPT" else "1.0",
                        extra,
                    ]
                )
        page.add(table_html(["Variant", "Method", "RMSE ours", "RMSE paper", "÷ NPT (ours)", "Notes"], rows, 2))
        for name in payload.get("figures", []):
            target = name if name.startswith("lookup_") else f"lookup_{name}"
            page.copy_figure(path.parent / name, target, _lookup_caption(name))


def _lookup_caption(name: str) -> str:
    if name.startswith("lookup_rmse"):
        return "Test RMSE per variant: NPT vs 1-NN and k-NN (ours), paper values as diamonds."
    if name.startswith("lookup_knn"):
        return "k-NN test RMSE for k = 1..10 against NPT's RMSE."
    if name.startswith("lookup_interventions"):
        return (
            "Interventions (Fig. 3d-e): changing a duplicate's target moves NPT's prediction "
            "for its original along the dashed ideal line (minus one for Add One)."
        )
    return (
        "ABD attention on a test batch: originals (top/left block) attend to their duplicates "
        "(the off-diagonal band), each panel one head."
    )


def _deletion_block(page: Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:

    page.add('<h3 id="deletion">Data deletion (Alg. 2, §4.4)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    page.note(
        "Per test row, other rows are deleted greedily while the prediction changes by less "
        "than Δ_it (0.01, ×1.1 after 50 rejections) and by at most 10 % in total. Distances are "
        "mean Euclidean distances in the preprocessed feature space from the test row to the "
        "kept, the deleted, and an equally large random set of rows. p-values: one-sided "
        "Wilcoxon signed-rank tests over test rows (paper, Protein: kept vs random p ≈ 8.77e-130)."
    )
    rows = []
    pooled: dict[str, dict[str, list[float]]] = {}
    for _path, payload in sorted(entries, key=lambda e: (e[1]["dataset"], e[1].get("fold") or 0)):
        usable = [r for r in payload["runs"] if r["deleted"] and r["kept"]]
        store = pooled.setdefault(payload["dataset"], {"kept": [], "deleted": [], "random": []})
        for key in store:
            store[key] += [r[f"distance_{key}"] for r in usable]
        w = payload["wilcoxon"]
        rows.append(
            [
                payload["dataset"],
                payload.get("fold"),
                payload["n_test_rows"],
                fmt(payload.get("mean_fraction_deleted"), "", 3),
                fmt(payload["mean_distance"]["kept"], "", 3),
                fmt(payload["mean_distance"]["deleted"], "", 3),
                fmt(payload["mean_distance"]["random"], "", 3),
                _p(w["kept_less_than_random"]["p_value"]),
                _p(w["kept_less_than_deleted"]["p_value"]),
            ]
        )
    for dataset, store in pooled.items():
        if len(store["kept"]) > 1:
            p_random = _wilcoxon_p(wilcoxon, store["kept"], store["random"])
            p_deleted = _wilcoxon_p(wilcoxon, store["kept"], store["deleted"])
            rows.append(
                [
                    dataset,
                    "all",
                    len(store["kept"]),
                    DASH,
                    fmt(np.mean(store["kept"]), "", 3),
                    fmt(np.mean(store["deleted"]), "", 3),
                    fmt(np.mean(store["random"]), "", 3),
                    _p(p_random),
                    _p(p_deleted),
                ]
            )
        name = f"deletion_{slug(dataset)}.png"
        figures.deletion_histogram(
            store["kept"],
            store["deleted"],
            store["random"],
            page.out_dir / name,
            f"Data deletion on {dataset}: per test row, mean distance",
        )
        page.figure(
            name, f"{dataset}: distribution over test rows of the mean distance of kept, deleted and random rows."
        )
    page.add(
        table_html(
            [
                "Dataset",
                "Fold",
                "Test rows",
                "Fraction deleted",
                "Dist. kept",
                "Dist. deleted",
                "Dist. random",
                "p (kept < random)",
                "p (kept < deleted)",
            ],
            rows,
            2,
        )
    )


def _wilcoxon_p(test: Any, smaller: Sequence[float], larger: Sequence[float]) -> float | None:
    if np.allclose(smaller, larger):
        return None
    return float(test(smaller, larger, alternative="less").pvalue)


def _p(value: Any) -> str:
    number = as_float(value)
    return DASH if number is None else f"{number:.3g}"


def _attention_block(page: Page, entries: list[tuple[Path, dict[str, Any]]]) -> None:
    page.add('<h3 id="attention">Attention between datapoints (Fig. 3b, 4)</h3>')
    if not entries:
        page.empty("Not run in this profile.")
        return
    page.note(
        "ABD attention weights of every layer and head for a test row's batch, rows and columns "
        "sorted by feature-space distance to that test row (first row/column). ρ: Spearman "
        "correlation of the test row's weights with distance (negative = nearer rows get more "
        "attention); mass: the test row's attention on its 10 % nearest rows (uniform = the "
        "fraction itself)."
    )
    for path, payload in sorted(entries, key=lambda e: (e[1]["dataset"], e[1].get("fold") or 0)):
        for ref in payload.get("references", []):
            rows = [
                [
                    s["layer"],
                    s["head"],
                    fmt(s["spearman_weight_vs_distance"], "", 3),
                    fmt(s["mass_on_nearest_10pct"], "", 3),
                    fmt(s["uniform_mass_nearest_10pct"], "", 3),
                    fmt(s["self_weight"], "", 3),
                ]
                for s in ref["summary"]
            ]
            page.add(
                f"<p>{esc(payload['dataset'])}, fold {esc(payload.get('fold'))}, test row "
                f"{esc(ref['row'])} ({esc(ref['n_rows'])} rows in context)</p>"
            )
            page.add(
                table_html(
                    ["ABD layer", "Head", "ρ(weight, distance)", "Mass nearest 10 %", "Uniform", "Self weight"], rows, 0
                )
            )
        for name in payload.get("figures", []):
            page.copy_figure(
                path.parent / name,
                f"{slug(payload['dataset'], 'fold', payload.get('fold'))}_{name}",
                f"{payload['dataset']} fold {payload.get('fold')}: {name.removesuffix('.png').replace('_', ' ')}",
            )
