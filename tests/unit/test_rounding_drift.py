"""benchmarks/rounding_drift.py: BiSHop on WDBC under two versions of the code, compared."""

from __future__ import annotations

import json

import pytest

from benchmarks import rounding_drift

TINY = ["d_model=16", "n_heads=2", "ffn_dim=32", "embed_dim=8", "patch_size=4", "n_pooling=3", "batch_size=64"]


def _script():
    return rounding_drift


def test_a_run_matches_itself_and_a_changed_metric_is_reported(tmp_path, capsys):
    script = _script()
    record = tmp_path / "a.json"
    assert script.main(["run", str(record), "--epochs", "1", "--set", *TINY]) == 0
    data = json.loads(record.read_text())
    assert data["settings"]["d_model"] == 16 and len(data["history"]) == 1
    assert len(data["test_probabilities"]) == 114  # the last fifth of WDBC's 569 rows
    assert script.main(["compare", str(record), str(record)]) == 0
    data["test_auc"] -= 0.01
    data["test_probabilities"][0] += 0.25
    changed = tmp_path / "b.json"
    changed.write_text(json.dumps(data))
    assert script.main(["compare", str(record), str(changed)]) == 1
    assert "largest difference 2.50e-01" in capsys.readouterr().out


def test_a_setting_without_a_value_is_refused():
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        _script().main(["run", "x.json", "--set", "d_model"])
