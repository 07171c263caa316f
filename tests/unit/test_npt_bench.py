"""NPT's step benchmark (benchmarks.steps.npt): its HIGGS case is the paper profile's job, and a
case runs one real training step and reports finite figures."""

from __future__ import annotations

import math

from benchmarks.steps import npt as bench
from tabrepro.config import Params
from tabrepro.models.npt.config import NPTConfig


def test_the_higgs_case_is_the_paper_profiles_higgs_job():
    params = Params.from_file(profile="paper").search_space("npt", "higgs", "npt")["params"]
    case = bench.CASES["higgs"]
    assert case["n_rows"] == params["batch_size"]  # one batch of the job's size
    assert case["n_features"] + 1 == 29  # HIGGS: 28 features and the label
    settings = {key: value for key, value in params.items() if key not in ("batch_size", "checkpoint_every_steps")}
    assert settings == {key: value for key, value in case["config"].items() if key != "batch_size"}
    assert NPTConfig(**case["config"]).embed_dim == 64  # NPT-Base


def test_a_case_runs_one_step_and_reports_its_figures(monkeypatch):
    small = {**bench.CASES["higgs"], "n_rows": 64, "n_features": 5}
    small["config"] = {**small["config"], "embed_dim": 8, "n_layers": 2, "n_heads": 2}
    monkeypatch.setitem(bench.CASES, "higgs", small)
    result = bench.run_case("higgs", steps=1, warmup=0, device="cpu", threads=1)
    assert (result["rows"], result["attributes"], result["embed_dim"]) == (64, 6, 8)
    assert result["step_s_median"] > 0 and result["gflop_per_step"] > 0
    assert math.isfinite(result["gflops_per_s"]) and result["peak_memory_mib"] >= 0
