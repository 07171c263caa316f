"""Numbers as the tables print them."""

from __future__ import annotations

import math

DASH = "—"


def decimals_for(value: float, metric: str) -> int:
    """Percentages and ranks get 2 decimals (as the papers print them); others 3 significant."""
    if metric.endswith("_pct") or metric.startswith("rank"):
        return 2
    if value == 0 or not math.isfinite(value):
        return 3
    return max(0, 2 - math.floor(math.log10(abs(value))))


def format_value(value: float | None, metric: str, decimals: int | None = None) -> str:
    """One number as printed in a table; None or NaN prints as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    places = decimals_for(value, metric) if decimals is None else decimals
    return f"{value:.{places}f}"
