"""Paper tables: our per-fold results aggregated and printed beside the papers' own numbers.

Every job writes one `metrics.json` per fold (read by results.py); folds.py is the only place
where folds are reduced to the mean ± spread a paper prints, so the arithmetic (sample SD,
SE = SD/sqrt(n), average ranks for ties) lives there once. views.py decides each table's rows,
columns and cells; render.py writes it three ways: Markdown to read, LaTeX to paste into a
report, and a tidy long CSV for any further analysis.
"""

from tabrepro.reporting.tables.folds import SPREAD_KINDS, fold_frame, rank_methods, summarize_folds
from tabrepro.reporting.tables.formatting import DASH, decimals_for, format_value
from tabrepro.reporting.tables.render import build_tables, latex_escape, render_latex, render_markdown
from tabrepro.reporting.tables.results import ResultsError, collect_current_results, collect_results
from tabrepro.reporting.tables.views import TIDY_COLUMNS, Cell, TableView, build_view, dataset_group

__all__ = [
    "DASH",
    "SPREAD_KINDS",
    "TIDY_COLUMNS",
    "Cell",
    "ResultsError",
    "TableView",
    "build_tables",
    "build_view",
    "collect_current_results",
    "collect_results",
    "dataset_group",
    "decimals_for",
    "fold_frame",
    "format_value",
    "latex_escape",
    "rank_methods",
    "render_latex",
    "render_markdown",
    "summarize_folds",
]
