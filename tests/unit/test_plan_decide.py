"""The cost of the missing verdicts (tabrepro.plan_decide): runs per dataset × model, priced with
the compute plan, cheapest per decided cell first."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import REPO
from tabrepro.cli import main as tabrepro_main
from tabrepro.plan_decide import DecideError, decision_costs, format_decision_costs, read_scorecard

ROWS = [
    # paper, table, column, model, verdict_class, count_group, more_runs, counted_with
    ("npt", "table8", "boston", "xgboost", "inconclusive", "own", 4, None),
    ("npt", "table9", "boston", "xgboost", "shifted", "own", 9, None),  # the same fits: the group needs 9
    ("npt", "table12", "boston", "xgboost", "inconclusive", "own", 30, "table11"),  # counted with table 11
    ("npt", "table8", "boston", "knn", "cannot be decided", "own", None, None),  # no number of runs
    ("npt", "table8", "boston", "mlp", "inconclusive", "capped", 2, None),
    ("npt", "table8", "boston", "catboost", "reproduced", "own", None, None),  # decided: not priced
    ("npt", "table1", "binary", "npt", "inconclusive", "own", 3, None),  # a rank cell: no job of its own
]
COLUMNS = ["paper", "table", "column", "model", "verdict_class", "count_group", "more_runs", "counted_with"]
ONE_RUN = {("npt", "boston", "xgboost"): (0.5, 0.0), ("npt", "boston", "mlp"): (0.0, 3.0)}


def test_groups_take_their_largest_count_and_are_sorted_by_cost_per_cell():
    priced, never, unplanned = decision_costs(pd.DataFrame(ROWS, columns=COLUMNS), ONE_RUN)
    assert [(c.model, c.more_runs, c.cells) for c in priced] == [
        ("xgboost", 9, ("table8: 4", "table9: 9")),
        ("mlp", 2, ("table8: 2",)),
    ]
    assert priced[0].cpu_hours == pytest.approx(4.5) and priced[1].gpu_hours == pytest.approx(6.0)
    assert never == ["npt/table8/boston/knn"] and unplanned == ["npt/table1/binary/npt"]
    text = format_decision_costs(priced, never, unplanned, REPO / "x.csv", "quick")
    assert "Total: 3 cells decided by 11 more runs, 4.50 CPU-hours and 6.00 GPU-hours." in text
    assert "No number of runs decides 1 cells" in text


def test_an_old_scorecard_without_run_counts_is_refused(tmp_path):
    path = tmp_path / "scorecard.csv"
    pd.DataFrame(ROWS, columns=COLUMNS).drop(columns=["more_runs"]).to_csv(path, index=False)
    with pytest.raises(DecideError, match="more_runs"):
        read_scorecard(path)


def test_the_documented_command_prices_the_reproduce_record(capsys):
    scorecard = "records/runs/reproduce/results/scorecard/scorecard.csv"
    assert (
        tabrepro_main(
            [
                "--params",
                str(REPO / "params.yaml"),
                "--profile",
                "reproduce",
                "plan",
                "--to-decide",
                str(REPO / scorecard),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Runs that would decide the undecided cells" in out and "Total: " in out
