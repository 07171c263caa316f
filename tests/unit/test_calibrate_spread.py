"""scripts/calibrate_spread.py: NPT's 10-fold protocol under several root seeds, its spread against the SE."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from conftest import load_script

TINY = ["--models", "knn", "--datasets", "breast_cancer", "--max-configs", "1"]


@pytest.fixture(scope="module")
def script():
    return load_script("calibrate_spread")


@pytest.fixture(scope="module")
def two_seeds(script, tmp_path_factory):
    """The tiny configuration run once with 2 seeds (shared by the tests that only read it)."""
    root = tmp_path_factory.mktemp("calib")
    out = root / "record.json"
    assert script.main(["--seeds", "2", "--out", str(out), "--work-dir", str(root / "work"), *TINY]) == 0
    return root, out


def _expected(unit: dict, metric: str) -> tuple[float, float, float]:
    """A run's mean, SD/sqrt(k) and Nadeau-Bengio SE, recomputed from its folds."""
    values = [f["test"][metric] for f in unit["folds"]]
    k = len(values)
    ratio = statistics.fmean(f["n_test"] / f["n_train"] for f in unit["folds"])
    sd = statistics.stdev(values)
    return statistics.fmean(values), sd / math.sqrt(k), sd * math.sqrt(1 / k + ratio)


def test_the_record_holds_each_seeds_protocol_and_its_spread(two_seeds):
    _, out = two_seeds
    record = json.loads(out.read_text())
    assert record["settings"]["max_configs"] == 1 and record["settings"]["seeds_requested"] == [0, 1]
    assert record["provenance"]["git_commit"] and record["provenance"]["cpu"]["model"] is not None
    assert "numpy" in record["provenance"]["packages"] and record["provenance"]["date"]
    units = record["units"]
    assert [(u["dataset"], u["model"], u["seed"]) for u in units] == [("breast_cancer", "knn", s) for s in (0, 1)]
    for unit in units:
        assert [f["fold"] for f in unit["folds"]] == list(range(10))
        assert sum(f["n_test"] for f in unit["folds"]) == 569  # KFold: every row tested once
        assert all(f["n_configs"] == 1 for f in unit["folds"])
    # another root seed is another split of the same rows
    assert {f["split_sha256"] for f in units[0]["folds"]}.isdisjoint(f["split_sha256"] for f in units[1]["folds"])

    rows = {row["metric"]: row for row in record["summary"]}
    assert sorted(rows) == ["accuracy_pct", "auroc", "nll"]
    for metric, row in rows.items():
        per_seed = [_expected(u, metric) for u in units]
        for unit, (mean, se, nb) in zip(units, per_seed, strict=True):
            figures = unit["per_metric"][metric]
            assert figures["mean"] == pytest.approx(mean, rel=1e-12)
            assert figures["assigned_se"] == pytest.approx(se, rel=1e-12)
            assert figures["nadeau_bengio_se"] == pytest.approx(nb, rel=1e-12)
        empirical = statistics.stdev(m for m, _, _ in per_seed)
        assigned = statistics.fmean(se for _, se, _ in per_seed)
        corrected = statistics.fmean(nb for _, _, nb in per_seed)
        assert row["n_seeds"] == 2 and row["empirical_sd"] == pytest.approx(empirical, rel=1e-12)
        assert row["ratio_assigned"] == pytest.approx(empirical / assigned, rel=1e-12)
        assert row["ratio_nadeau_bengio"] == pytest.approx(empirical / corrected, rel=1e-12)
        low, high = row["ratio_assigned_ci95"]
        assert low < row["ratio_assigned"] < high


def test_the_summary_arithmetic_on_known_numbers(script):
    def unit(seed: int, values: list[float]) -> dict:
        folds = [{"n_train": 80, "n_test": 20, "test": {"mse": v, "rmse": v}} for v in values]
        return {"dataset": "d", "model": "m", "seed": seed, "task": "regression",
                "per_metric": {m: script.seed_figures(folds, m) for m in ("rmse", "mse")}}  # fmt: skip

    # means 1 and 3 (SD across seeds sqrt(2)); fold SD sqrt(2) in both, so SE = 1 for k = 2
    row = script.spread_summary([unit(0, [0.0, 2.0]), unit(1, [2.0, 4.0])])[0]
    assert row["empirical_sd"] == pytest.approx(math.sqrt(2))
    assert row["assigned_se_mean"] == pytest.approx(1.0)
    assert row["ratio_assigned"] == pytest.approx(math.sqrt(2))
    assert row["nadeau_bengio_se_mean"] == pytest.approx(math.sqrt(2 * (0.5 + 0.25)))
    assert row["ratio_nadeau_bengio"] == pytest.approx(math.sqrt(2) / math.sqrt(1.5))


def test_a_rerun_continues_and_keeps_the_finished_units(script, two_seeds, capsys):
    root, out = two_seeds
    before = json.loads(out.read_text())["units"]
    resumed = root / "resumed.json"
    resumed.write_text(out.read_text())
    capsys.readouterr()
    assert script.main(["--seeds", "3", "--out", str(resumed), "--work-dir", str(root / "work"), *TINY]) == 0
    printed = capsys.readouterr().out
    assert "2 unit(s) held" in printed and "1 to run" in printed and "[1/1] breast_cancer/knn seed 2" in printed
    after = json.loads(resumed.read_text())
    assert after["units"][:2] == before and after["units"][2]["seed"] == 2
    assert after["summary"][0]["n_seeds"] == 3


def test_a_record_that_cannot_be_continued_is_refused_in_one_line(script, two_seeds, tmp_path, capsys):
    root, out = two_seeds
    work = ["--work-dir", str(root / "work")]
    other = tmp_path / "other.json"
    other.write_text(out.read_text())
    assert script.main(["--seeds", "2", "--out", str(other), *work, *TINY[:-1], "2"]) == 2
    assert "made under other settings (max_configs)" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text('{"settings": ')
    assert script.main(["--seeds", "2", "--out", str(broken), *work, *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a calibration record" in err
    assert broken.read_text() == '{"settings": '
