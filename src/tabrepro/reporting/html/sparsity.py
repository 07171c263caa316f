"""BiSHop's feature-sparsity curves, from `tabrepro sparsity-plot`'s summary."""

from __future__ import annotations

import json
from typing import Any

from tabrepro.bishop.feature_sparsity import ORDER_LABELS, curve_files, sparsity_settings
from tabrepro.reporting.html.page import Page, ReportError, fmt, table_html


def sparsity_section(page: Page, params: Any) -> None:
    """BiSHop's Fig. 4.1 (right), from `tabrepro sparsity-plot`'s summary (this profile only)."""

    settings = sparsity_settings(params)
    if settings is None:
        return
    page.section("feature_sparsity", "Feature sparsity (BiSHop Fig. 4.1, right)")
    files = curve_files(params, settings.paper)
    if not files["summary"].is_file():
        page.empty("Not run yet.")
        return
    try:
        summary = json.loads(files["summary"].read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ReportError(f"{files['summary']}: cannot read: {error}") from None
    if summary.get("profile") != params.profile_name:
        page.empty(f"Only results of profile {summary.get('profile')!r}; not run in this profile.")
        return
    page.note(
        f"Datasets: {', '.join(summary['datasets'])} ({settings.paper} paper). Features are removed "
        "at random, or least / most important first by a random forest fitted on each fold's "
        "training rows; each model is retrained with the configuration its validation search "
        "chose on all features and scored once on test. Mean test "
        f"{summary['metric']} over datasets (each the mean over its folds). The thesis shows "
        "these curves only as a figure, so there are no paper numbers to set beside them."
    )
    curves = summary["curves"]
    fractions = sorted({c["fraction"] for c in curves})
    rows = []
    for order in settings.orders:
        for model in settings.models:
            values = {c["fraction"]: c["mean"] for c in curves if c["model"] == model and c["order"] == order}
            label = next((c["label"] for c in curves if c["model"] == model), model)
            rows.append([ORDER_LABELS[order], label, *(fmt(values.get(f), summary["metric"]) for f in fractions)])
    page.add(table_html(["Removed", "Model", *(f"{100 * f:.0f} %" for f in fractions)], rows, 2))
    page.copy_figure(
        files["png"], "feature_sparsity.png", f"Mean test {summary['metric']} against the share of features removed."
    )
