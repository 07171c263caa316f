"""BiSHop's feature-sparsity curves (tabrepro.bishop.feature_sparsity), without Snakemake."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import REPO, tiny_profile
from conftest import write_params as write_profile
from tabrepro.bishop import feature_sparsity as fs
from tabrepro.cli import main
from tabrepro.config import Job, Params, ParamsError
from tabrepro.features import FeatureLayout


def write_params(tmp_path: Path, sparsity: dict | None = None) -> Path:
    """Profile `tiny` (k-NN and XGBoost on breast cancer, folds 0 and 1) with curves for k-NN."""

    def add_sparsity(raw: dict) -> None:
        raw["feature_sparsity"]["tiny"] = sparsity or {
            "paper": "npt",
            "models": ["knn"],
            "fractions": [0.0, 0.3, 0.6],
            "importance_trees": 20,
        }

    profile = tiny_profile(["knn", "xgboost"], max_configs=2, folds=[0, 1])
    return write_profile(tmp_path, profile, mutate=add_sparsity)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Breast cancer prepared and split, with k-NN's main run on folds 0 and 1."""
    tmp_path = tmp_path_factory.mktemp("sparsity")
    params_file = write_params(tmp_path)
    for command in (
        ["prepare", "breast_cancer"],
        ["split", "npt", "breast_cancer"],
        ["train", "npt", "breast_cancer", "knn", "0"],
        ["train", "npt", "breast_cancer", "knn", "1"],
    ):
        assert main(["--params", str(params_file), "--quiet", *command]) == 0
    return tmp_path, params_file, Params.from_file(params_file)


def scores(result: dict) -> list[dict]:
    """A curve's points without their timings (which differ between runs)."""
    return [{k: v for k, v in point.items() if k != "wall_time_s"} for point in result["points"]]


# ------------------------------------------------------------------------------ pieces
def test_importance_is_summed_over_a_features_encoded_columns_and_finds_the_signal():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 3] > 0).astype(int)  # column 3 = the second column of feature "b" (width 3)
    layout = FeatureLayout.from_groups((("continuous", 1), ("categorical", 3), ("continuous", 1)))
    importance = fs.attribute_importance(X, y, layout, "binary", seed=0, n_trees=30)
    assert importance.shape == (3,) and importance.argmax() == 1
    assert importance.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="covers 4 columns"):
        fs.attribute_importance(X, y, layout.select([0, 1]), "binary", seed=0, n_trees=5)


def test_removal_orders_and_counts():
    importance = np.array([0.1, 0.5, 0.0, 0.4])
    assert fs.removal_sequence("least_important", importance, np.random.default_rng(0)).tolist() == [2, 0, 3, 1]
    assert fs.removal_sequence("most_important", importance, np.random.default_rng(0)).tolist() == [1, 3, 0, 2]
    random = fs.removal_sequence("random", importance, np.random.default_rng(7))
    assert sorted(random.tolist()) == [0, 1, 2, 3]
    assert random.tolist() == fs.removal_sequence("random", importance, np.random.default_rng(7)).tolist()
    with pytest.raises(fs.SparsityError, match="unknown removal order 'best'"):
        fs.removal_sequence("best", importance, np.random.default_rng(0))
    assert [fs.n_removed(f, 30) for f in (0.0, 0.1, 0.35, 0.7)] == [0, 3, 10, 21]
    assert fs.n_removed(0.9, 2) == 1  # one feature always stays


def test_restricting_features_removes_whole_one_hot_blocks(prepared):
    from tabrepro.job_run import load_fold
    from tabrepro.job_spec import resolve_job

    _, _, params = prepared
    data = load_fold(resolve_job(params, Job("npt", "breast_cancer", "knn", 0)))
    wide = fs.restrict_features(data, [0, 2])
    assert wide.X.shape == (data.X.shape[0], 2) and wide.feature_layout.features == (
        data.feature_layout.features[0],
        data.feature_layout.features[2],
    )
    np.testing.assert_array_equal(wide.X[:, 1], data.X[:, 2])
    # A one-hot block (width 3) goes or stays as a whole.
    import dataclasses

    grouped = dataclasses.replace(
        data,
        X=np.arange(12.0).reshape(2, 6),
        feature_layout=FeatureLayout.from_groups(
            (("continuous", 1), ("categorical", 3), ("categorical", 2)), names=("x", "cat", "z")
        ),
    )
    narrow = fs.restrict_features(grouped, [1])
    assert narrow.X.tolist() == [[1, 2, 3], [7, 8, 9]] and narrow.feature_layout.names == ("cat",)


# ------------------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    "entry, message",
    [
        ({"paper": "npt", "models": ["knn"], "orders": ["random", "best_first"]}, "orders"),
        ({"paper": "npt", "models": ["knn"], "fractions": [0.5, 0.2]}, "fractions"),
        ({"paper": "npt", "models": ["catboost"]}, "'catboost' does not run on npt/breast_cancer"),
        ({"paper": "npt", "models": ["knn"], "datasets": ["brest_cancer"]}, "brest_cancer"),
        ({"paper": "nips", "models": ["knn"]}, "unknown paper 'nips'"),
        ({"paper": "npt", "models": ["knn"], "fractions": [0.0, 1.0]}, "fractions"),
        ({"paper": "npt", "models": ["knn"], "trees": 3}, "trees"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(tmp_path, entry, message):
    params_file = write_params(tmp_path, entry)
    with pytest.raises((fs.SparsityError, ParamsError), match=message):
        fs.sparsity_settings(Params.from_file(params_file))


def test_plan_follows_the_profile_and_the_entry(prepared):
    _, _, params = prepared
    settings = fs.sparsity_settings(params)
    assert settings is not None and settings.fractions == (0.0, 0.3, 0.6) and settings.orders == fs.ORDERS
    assert fs.plan_jobs(params, settings) == [
        Job("npt", "breast_cancer", "knn", 0),
        Job("npt", "breast_cancer", "knn", 1),
    ]
    assert fs.plan_jobs(params, None) == []
    quick = Params.from_file(REPO / "params.yaml", profile="paper")
    paper = fs.sparsity_settings(quick)
    jobs = fs.plan_jobs(quick, paper)
    assert {j.model for j in jobs} == {"bishop", "xgboost", "lightgbm"}
    assert {j.dataset for j in jobs} == {d for d, e in quick.paper("bishop")["datasets"].items() if e["group"] == "i"}


# ------------------------------------------------------------------------------ one curve job
def test_a_curve_retrains_the_selected_configuration_and_is_deterministic(prepared, tmp_path):
    _, _, params = prepared
    job = Job("npt", "breast_cancer", "knn", 0)
    path = fs.run_curve(params, job, progress=False)
    result = json.loads(path.read_text())
    main_run = json.loads((params.job_dir(job) / "metrics.json").read_text())
    assert result["selected_config"] == main_run["selected_config"]
    assert result["split"]["sha256"] == main_run["split"]["sha256"]
    assert len(result["points"]) == 3 * 3 and result["n_features"] == 30
    by_key = {(p["order"], p["fraction"]): p for p in result["points"]}
    assert by_key["random", 0.0]["test"] == by_key["most_important", 0.0]["test"]  # all features: one fit
    assert by_key["most_important", 0.6]["n_removed"] == 18 and by_key["most_important", 0.6]["n_features"] == 12
    ranked = sorted(result["importance"], key=lambda name: -result["importance"][name])
    assert by_key["most_important", 0.3]["removed"] == ranked[:9]
    assert set(by_key["least_important", 0.3]["removed"]) <= set(by_key["least_important", 0.6]["removed"])  # nested
    # k-NN on the 60 % least useful features loses far less than on the 60 % most useful removed.
    assert by_key["least_important", 0.6]["test"]["auroc"] > by_key["most_important", 0.6]["test"]["auroc"]
    again = fs.run_curve(params, job, out_path=tmp_path / "again.json", progress=False)
    assert scores(json.loads(again.read_text())) == scores(result)
    assert not list(path.parent.glob("*.partial"))


def test_a_killed_curve_job_resumes_without_refitting_finished_points(prepared, tmp_path, monkeypatch):
    _, _, params = prepared
    job = Job("npt", "breast_cancer", "knn", 1)
    out = tmp_path / "fold1.json"
    real_fit = fs.restrict_features
    calls = {"n": 0}

    def failing(data, keep):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # killed during the 4th distinct fit
        return real_fit(data, keep)

    monkeypatch.setattr(fs, "restrict_features", failing)
    with pytest.raises(KeyboardInterrupt):
        fs.run_curve(params, job, out_path=out, progress=False)
    assert not out.exists()
    partial = json.loads(out.with_name(out.name + ".partial").read_text())
    assert len(partial["points"]) == 3
    calls["n"] = 100  # from here on every fit succeeds; count them
    fs.run_curve(params, job, out_path=out, progress=False)
    assert calls["n"] - 100 == 7 - 3  # 1 (all features) + 3 orders x 2 fractions = 7 distinct fits
    assert not out.with_name(out.name + ".partial").exists()
    monkeypatch.undo()
    fresh = fs.run_curve(params, job, out_path=tmp_path / "fresh.json", progress=False)
    assert scores(json.loads(fresh.read_text())) == scores(json.loads(out.read_text()))


def test_a_missing_main_run_is_named(prepared):
    _, _, params = prepared
    with pytest.raises(FileNotFoundError, match="xgboost/fold0.*main run"):
        fs.run_curve(params, Job("npt", "breast_cancer", "xgboost", 0), progress=False)


def test_plot_averages_the_jobs_and_refuses_stale_ones(prepared):
    tmp_path, params_file, params = prepared
    for fold in (0, 1):
        fs.run_curve(params, Job("npt", "breast_cancer", "knn", fold), progress=False)
    assert main(["--params", str(params_file), "--quiet", "sparsity-plot"]) == 0
    files = fs.curve_files(params, "npt")
    curves = json.loads(files["summary"].read_text())["curves"]
    assert len(curves) == 3 * 3 and files["png"].read_bytes()[:4] == b"\x89PNG"
    fold_values = [
        json.loads(fs.result_path(params, Job("npt", "breast_cancer", "knn", k)).read_text()) for k in (0, 1)
    ]
    expected = np.mean(
        [
            next(p["test"]["auroc"] for p in r["points"] if p["order"] == "random" and p["fraction"] == 0.3)
            for r in fold_values
        ]
    )
    got = next(c["mean"] for c in curves if c["order"] == "random" and c["fraction"] == 0.3)
    assert got == pytest.approx(expected)
    with pytest.raises(fs.SparsityError, match="for paper 'npt', not 'bishop'"):
        fs.plot_curves(params, "bishop")
    # Other settings (here: fewer trees) make the stored jobs stale.
    raw = yaml.safe_load(params_file.read_text())
    raw["feature_sparsity"]["tiny"]["importance_trees"] = 21
    with pytest.raises(fs.SparsityError, match="other feature_sparsity settings"):
        fs.plot_curves(Params(raw))


def test_the_cli_runs_several_folds_in_one_process_as_single_jobs_would(prepared, tmp_path, capsys):
    """`sparsity --fold 0 1` (a feature_sparsity_folds job) against one run_curve per fold."""
    _, params_file, params = prepared
    args = ["--params", str(params_file), "--quiet", "sparsity", "npt", "breast_cancer", "knn"]
    assert main([*args, "--fold", "1", "0"]) == 0
    for fold in (0, 1):
        job = Job("npt", "breast_cancer", "knn", fold)
        together = json.loads(fs.result_path(params, job).read_text())
        alone = fs.run_curve(params, job, out_path=tmp_path / f"alone{fold}.json", progress=False)
        assert scores(together) == scores(json.loads(alone.read_text()))
    capsys.readouterr()
    assert main([*args, "--fold", "0", "1", "--output", str(tmp_path / "x.json")]) == 2
    assert "give one --fold" in capsys.readouterr().err
