"""scripts/selection_bias.py: test-picked against validation-picked scores, and its bad input."""

from __future__ import annotations

import json

import pytest

from conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("selection_bias")


def test_picking_on_test_gains_what_the_best_test_score_exceeds_the_validation_pick_by(script):
    # Candidate 1 leads on validation; candidate 2 has the best test score (found only at k >= 3).
    scores = {"metric": "auroc", "val": [0.70, 0.90, 0.80, 0.60], "test": [0.75, 0.80, 0.95, 0.70]}
    rows = script.summarise(scores)["by_budget"]
    assert list(rows) == ["4"]  # every budget below 10 is the whole search here
    assert rows["4"] == {"picked_on_val": 0.80, "picked_on_test": 0.95, "gain": pytest.approx(0.15)}


def test_smaller_budgets_look_at_the_first_candidates_only(script, monkeypatch):
    monkeypatch.setattr(script, "BUDGETS", (2,))
    scores = {"metric": "nll", "val": [0.5, 0.4, 0.3], "test": [0.6, 0.2, 0.1]}  # lower is better
    rows = script.summarise(scores)["by_budget"]
    assert rows["2"] == {"picked_on_val": 0.2, "picked_on_test": 0.2, "gain": 0.0}
    assert rows["3"]["picked_on_val"] == 0.1 and rows["3"]["gain"] == 0.0


@pytest.mark.parametrize("case", ["qsar", "no_such_dataset:xgboost"])
def test_a_case_that_is_not_dataset_and_model_is_refused(script, tmp_path, capsys, case):
    out = tmp_path / "bias.json"
    assert script.main(["--cases", case, "--out", str(out)]) == 2
    assert case in capsys.readouterr().err and not out.exists()


def test_the_audit_page_holds_the_block_rendered_from_the_committed_record(script):
    from conftest import REPO

    argv = ["--out", str(REPO / "records/selection_bias/datasets_i.json"), "--doc", str(REPO / "docs/reproduction.md")]
    assert script.main([*argv, "--check"]) == 0, "run `python scripts/selection_bias.py --doc` to regenerate it"


def test_a_stale_block_is_reported_and_rewritten(script, tmp_path):
    record = {
        "cases": {
            "qsar:xgboost": {
                "metric": "auroc",
                "n_configs": 2,
                "n_test": 106,
                "by_budget": {"2": {"picked_on_val": 0.9, "picked_on_test": 0.95, "gain": 0.05}},
            }
        }
    }
    (tmp_path / "bias.json").write_text(json.dumps(record))
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{script.BEGIN}\nold\n{script.END}\nrest\n")
    argv = ["--out", str(tmp_path / "bias.json"), "--doc", str(doc)]
    assert script.main([*argv, "--check"]) == 1
    assert script.main(argv) == 0 and script.main([*argv, "--check"]) == 0
    assert "| qsar | xgboost | 106 | 90.00 | 95.00 | +5.00 |" in doc.read_text()
