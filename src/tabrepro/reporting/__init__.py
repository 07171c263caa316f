"""Reporting: the papers' reference numbers and the tables that put ours beside them."""

from tabrepro.reference import (
    PaperValue,
    load_reference,
    lookup,
    reference_methods,
    reference_table_id,
)
from tabrepro.reporting.tables import (
    ResultsError,
    build_tables,
    collect_current_results,
    collect_results,
    summarize_folds,
)

__all__ = [
    "PaperValue",
    "ResultsError",
    "build_tables",
    "collect_current_results",
    "collect_results",
    "load_reference",
    "lookup",
    "reference_methods",
    "reference_table_id",
    "summarize_folds",
]
