"""params.yaml: the real file validates; every kind of mistake stops with one line naming it."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from tabrepro.config import Job, Params, ParamsError, read_params_file, resolve_extends

RAW = read_params_file(REPO / "params.yaml")


def params_with(mutate, profile: str | None = None) -> Params:
    raw = copy.deepcopy(RAW)
    mutate(raw)
    return Params(raw, profile=profile)


def test_repository_params_validate_for_every_profile():
    for profile in RAW["profiles"]:
        assert Params(RAW, profile=profile).profile_name == profile


def test_quick_profile_is_breast_cancer_with_every_npt_paper_method_over_ten_folds():
    params = Params(RAW, profile="quick")
    jobs = params.jobs()
    assert {j.dataset for j in jobs} == {"breast_cancer"}
    assert {j.model for j in jobs} == set(RAW["papers"]["npt"]["models"])  # 7 baselines, TabNet, NPT
    assert sorted({j.fold for j in jobs}) == list(range(10))
    assert len(jobs) == 90


def test_npt_small_sweep_has_the_papers_eight_variants_and_quick_shrinks_npt():
    from tabrepro.tuning import sample_configs, variant_names

    paper = Params(RAW, profile="paper")
    space = paper.search_space("npt", "breast_cancer", "npt")
    assert variant_names(space) == [
        "vanilla",
        "layers16",
        "heads16",
        "layers16_heads16",
        "p_target_0.1",
        "p_target_0.5",
        "p_feature_0.2",
        "cosine_cyclic",
    ]
    configs = sample_configs(space, "binary", paper.n_configs("npt", "breast_cancer", "npt"), seed=0)
    assert len(configs) == 8
    assert configs[0]["embed_dim"] == 32 and configs[0]["lr"] == 0.0005  # breast cancer: e = 32
    assert configs[4]["p_target"] == 0.1 and configs[4]["max_steps"] == 10 * configs[0]["max_steps"]
    assert configs[7]["lr_schedule"] == "cosine_cyclic"
    boston = sample_configs(paper.search_space("npt", "boston", "npt"), "regression", 8, seed=0)
    assert boston[0]["embed_dim"] == 128 and boston[1]["n_layers"] == 16
    assert paper.n_configs("npt", "protein", "npt") == 1

    quick = Params(RAW, profile="quick")
    assert quick.n_configs("npt", "breast_cancer", "npt") == 1  # per-model cap beats max_configs
    assert quick.n_configs("npt", "breast_cancer", "xgboost") == RAW["profiles"]["quick"]["max_configs"]
    (small,) = sample_configs(quick.search_space("npt", "breast_cancer", "npt"), "binary", 1, seed=0)
    assert small["max_steps"] < configs[0]["max_steps"] and small["embed_dim"] == 16  # forced on top
    assert small["flat_fraction"] == 0.5  # the rest is NPT-Small
    job = quick.jobs()[0]
    assert quick.job_digest(job) != paper.job_digest(job)


def test_model_overrides_name_known_models():
    with pytest.raises(ParamsError, match=r"profiles\.quick\.model_overrides: unknown model 'nptt'.*npt"):
        params_with(lambda r: r["profiles"]["quick"].update(model_overrides={"nptt": {"max_configs": 1}}))


def test_paper_profile_covers_every_dataset_of_both_papers():
    params = Params(RAW, profile="paper")
    for paper in ("npt", "bishop"):
        datasets = {j.dataset for j in params.jobs([paper])}
        assert datasets == set(RAW["papers"][paper]["datasets"])
    assert len(params.selected_datasets("npt")) == 10
    assert len(params.selected_datasets("bishop")) == 9 + 19


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r.update(colour="blue"), r"at <top level>: Additional properties are not allowed \('colour'"),
        (lambda r: r.update(seed="zero"), r"at seed: 'zero' is not of type 'integer'"),
        (lambda r: r["profiles"]["quick"].update(max_configs=0), r"at profiles\.quick\.max_configs"),
        (lambda r: r["protocols"]["npt_cv10"].update(n_folds=1), r"at protocols\.npt_cv10"),
        (lambda r: r["fetch"].pop("retries"), r"at fetch: 'retries' is a required property"),
        (
            lambda r: r["search_spaces"]["npt_small"]["knn"]["params"].update(p={"normal": [0, 1]}),
            r"at search_spaces\.npt_small\.knn\.params\.p",
        ),
    ],
)
def test_schema_errors_name_the_key(mutate, expected):
    with pytest.raises(ParamsError, match=expected):
        params_with(mutate)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r.update(profile="fast"), r"unknown profile 'fast'"),
        (
            lambda r: r["profiles"]["quick"]["papers"]["npt"].update(datasets=["breast_canser"]),
            r"profiles\.quick\.papers\.npt\.datasets\[0\]: unknown dataset 'breast_canser'"
            r".*did you mean 'breast_cancer'",
        ),
        (
            lambda r: r["profiles"]["quick"]["papers"]["npt"].update(models=["xgbost"]),
            r"unknown model 'xgbost'.*did you mean 'xgboost'",
        ),
        (
            lambda r: r["papers"]["npt"]["datasets"]["boston"].update(source="bostn"),
            r"papers\.npt\.datasets\.boston\.source: unknown dataset 'bostn'",
        ),
        (lambda r: r["papers"]["npt"]["models"].update(forest="Forest"), r"unknown model 'forest'"),
        (lambda r: r["papers"]["npt"]["datasets"]["boston"].update(protocol="cv5"), r"unknown protocol 'cv5'"),
        (lambda r: r["protocols"]["npt_holdout"].update(test=0.3), r"must sum to 1"),
        (lambda r: r["search_spaces"]["npt_small"].update(extends="npt_higgs"), r"cycle in 'extends'"),
        (lambda r: r["papers"]["npt"]["tables"]["table8"].update(metric="f1"), r"unknown metric 'f1'"),
    ],
)
def test_reference_errors_name_the_value(mutate, expected):
    with pytest.raises(ParamsError, match=expected):
        params_with(mutate)


def test_malformed_yaml_names_file_and_line(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("profile: quick\nseed: [0\n")
    with pytest.raises(ParamsError, match=r"params\.yaml: line \d+, column \d+ not valid YAML"):
        Params.from_file(bad)


def test_cli_reports_schema_error_in_one_line(tmp_path):
    raw = copy.deepcopy(RAW)
    raw["profiles"]["quick"]["papers"]["npt"]["datasets"] = ["atlantis"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = subprocess.run([sys.executable, "-m", "tabrepro.cli", "--version"], capture_output=True, text=True)
    assert run.returncode == 0
    run = subprocess.run(
        [sys.executable, "-m", "tabrepro.cli", "validate", "--params", str(path)], capture_output=True, text=True
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown dataset 'atlantis'" in lines[0]


def test_extends_merges_parent_spaces():
    spaces = resolve_extends(RAW["search_spaces"], "npt_higgs")
    assert spaces["mlp"]["n_configs"] == 6  # own
    assert spaces["knn"]["n_configs"] == 40  # from npt_medium
    assert spaces["random_forest"]["n_configs"] == 24  # from baselines, through npt_small
    assert "random_forest" not in RAW["search_spaces"]["npt_small"]


def _digests(params: Params, paper: str) -> dict[Job, str]:
    return {job: params.job_digest(job) for job in params.jobs([paper])}


def test_editing_an_npt_space_reruns_no_bishop_job_and_the_shared_baselines_rerun_both():
    """BiSHop's spaces extend the explicit `baselines` space, not NPT's: an edit to any entry of
    npt_small leaves every BiSHop job's digest as it was."""
    before = Params(RAW, profile="paper")

    def edit_npt_small(raw):  # a new entry each (xgboost & co. alias the baselines' boosting grid)
        space = raw["search_spaces"]["npt_small"]
        for model, entry in space.items():
            if isinstance(entry, dict):
                space[model] = {**entry, "n_configs": 2}

    after = params_with(edit_npt_small, profile="paper")
    assert _digests(after, "bishop") == _digests(before, "bishop")
    assert _digests(after, "npt") != _digests(before, "npt")

    def edit_baselines(raw):
        raw["search_spaces"]["baselines"]["random_forest"]["n_configs"] = 2

    shared = params_with(edit_baselines, profile="paper")
    for paper in ("npt", "bishop"):
        old = _digests(before, paper)
        changed = {job.model for job, digest in _digests(shared, paper).items() if digest != old[job]}
        assert changed == {"random_forest"}, paper


def test_profile_caps_number_of_configurations():
    quick, paper = Params(RAW, profile="quick"), Params(RAW, profile="paper")
    assert paper.n_configs("npt", "breast_cancer", "knn") == 480
    assert quick.n_configs("npt", "breast_cancer", "knn") == RAW["profiles"]["quick"]["max_configs"]


def test_job_digest_changes_only_for_jobs_whose_parameters_change():
    before = Params(RAW)
    after = params_with(lambda r: r["search_spaces"]["npt_small"]["knn"]["params"].update(p=2))
    knn, rf = Job("npt", "breast_cancer", "knn", 0), Job("npt", "breast_cancer", "random_forest", 0)
    assert before.job_digest(knn) != after.job_digest(knn)
    assert before.job_digest(rf) == after.job_digest(rf)


def test_data_dir_and_mirror_follow_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TABREPRO_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TABREPRO_DATA_MIRROR", "http://127.0.0.1:1/mirror")
    params = Params(RAW)
    assert params.data_dir == tmp_path
    assert params.mirror == "http://127.0.0.1:1/mirror"


def _rename(mapping: dict, old: str, new: str) -> None:
    mapping[new] = mapping.pop(old)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        # The reported bug: a renamed key in the shared boosting space (anchor &npt_boosting).
        (
            lambda r: _rename(r["search_spaces"]["baselines"]["gradient_boosting"]["params"], "max_depth", "max_dept"),
            r"at search_spaces\.baselines\.gradient_boosting\.params\.max_dept: unknown hyperparameter 'max_dept' "
            r"for model 'gradient_boosting'; did you mean 'max_depth'\?",
        ),
        (
            lambda r: _rename(r["search_spaces"]["bishop_i"]["xgboost"]["params"], "max_depth", "max_dept"),
            r"search_spaces\.bishop_i\.xgboost\.params\.max_dept: "
            r"unknown hyperparameter 'max_dept' for model 'xgboost'",
        ),
        (
            lambda r: r["search_spaces"]["baselines"]["gradient_boosting"]["params"].update(
                max_depth={"choice": [3, "five"]}
            ),
            r"params\.max_depth\.choice\[1\]: 'five' is not accepted by gradient_boosting's 'max_depth' "
            r"\(takes an int >= 1",
        ),
        (
            lambda r: r["search_spaces"]["bishop_i"]["xgboost"]["params"].update(subsample={"uniform": [0.5, 1.5]}),
            r"bishop_i\.xgboost\.params\.subsample\.uniform: uniform range \[0\.5, 1\.5\] reaches values",
        ),
        (
            lambda r: r["search_spaces"]["baselines"]["random_forest"]["params"].update(
                criterion={"classification": {"choice": ["gini", "squared_error"]}, "regression": "squared_error"}
            ),
            r"random_forest\.params\.criterion\.classification\.choice\[1\]: 'squared_error' is not accepted",
        ),
        (
            lambda r: r["search_spaces"]["npt_small"]["npt"]["variants"].update(layers16={"n_layer": 16}),
            r"npt_small\.npt\.variants\.layers16\.n_layer: unknown hyperparameter 'n_layer'.*did you mean 'n_layers'",
        ),
        (
            lambda r: r["profiles"]["quick"]["model_overrides"]["npt"]["params"].update(embed_dim="big"),
            r"at profiles\.quick\.model_overrides\.npt\.params\.embed_dim: 'big' is not accepted",
        ),
        (
            lambda r: r["search_spaces"]["npt_small"]["knn"]["params"].update(n_jobs=4),
            r"knn\.params\.n_jobs: 'knn' does not take 'n_jobs' from a search space: tabrepro sets the thread count",
        ),
        (
            lambda r: r["search_spaces"]["bishop_i"].update(
                bishop_no_decoder={"n_configs": 1, "params": {"decoder": True}}
            ),
            r"bishop_no_decoder\.params\.decoder: .*fixed to False by this ablation",
        ),
        (
            lambda r: r["search_spaces"]["npt_small"].update(xgbost={"n_configs": 1, "params": {"max_depth": 3}}),
            r"at search_spaces\.npt_small\.xgbost: unknown model 'xgbost'; did you mean 'xgboost'",
        ),
    ],
)
def test_search_space_names_types_and_ranges_are_checked_at_load(mutate, expected):
    with pytest.raises(ParamsError, match=expected):
        params_with(mutate)


def test_a_search_space_value_must_suit_every_task_that_uses_it():
    """breast_cancer (binary) and boston (regression) share the baselines' random forest entry."""
    with pytest.raises(ParamsError, match=r"criterion: 'gini' is not accepted by random_forest's 'criterion'"):
        params_with(lambda r: r["search_spaces"]["baselines"]["random_forest"]["params"].update(criterion="gini"))


def test_cli_stops_with_one_line_naming_the_misspelt_key(tmp_path):
    text = (REPO / "params.yaml").read_text()
    assert text.count("max_depth: {choice: [3, 5, 10]}") == 1
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("max_depth: {choice: [3, 5, 10]}", "max_dept: {choice: [3, 5, 10]}"))
    run = subprocess.run(
        [sys.executable, "-m", "tabrepro", "validate", "--params", str(path)], capture_output=True, text=True
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "gradient_boosting.params.max_dept" in lines[0]
    assert "did you mean 'max_depth'" in lines[0]


def test_reproduce_profile_leaves_out_gpu_models_with_reasons_and_shows_caps():
    params = Params.from_file(REPO / "params.yaml", profile="reproduce")
    assert "npt" not in params.selected_models("npt") and "bishop" not in params.selected_models("bishop")
    assert params.not_run_reason("npt").startswith("needs a GPU")
    assert all(job.model not in params.not_run_models(job.paper) for job in params.jobs())
    note = params.budget_note("bishop", "adult", "ft_transformer")
    assert note.startswith("budget capped: 2 of the paper's 200 configurations") and "2-core budget" in note
    assert params.budget_note("npt", "breast_cancer", "xgboost") is None  # the paper's 48 configurations


def test_dataset_override_substitutes_a_source_with_its_reason():
    params = Params.from_file(REPO / "params.yaml", profile="reproduce")
    assert params.source_of("bishop", "bank") == "bank_marketing_sample"
    assert "10% sample" in params.substitute_note("bishop", "bank")
    assert Params.from_file(REPO / "params.yaml", profile="paper").source_of("bishop", "bank") == "bank_marketing"
    assert params.substitute_note("bishop", "adult") is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("bank_marketin_sample", "did you mean 'bank_marketing_sample'"),
        ("protein", "is a regression task"),
    ],
)
def test_dataset_override_names_a_bad_source(source, expected):
    def mutate(raw):
        raw["profiles"]["reproduce"]["dataset_overrides"]["bishop"]["bank"]["source"] = source
        raw["profile"] = "reproduce"

    with pytest.raises(ParamsError, match=expected):
        params_with(mutate)


def test_not_run_and_models_may_not_name_the_same_model():
    def mutate(raw):
        raw["profiles"]["quick"]["not_run"] = {"knn": "test"}
        raw["profiles"]["quick"]["papers"]["npt"]["models"] = ["knn"]

    with pytest.raises(ParamsError, match="also listed in profiles.quick.not_run"):
        params_with(mutate)


def test_an_extension_runs_only_where_a_profile_names_it():
    """papers.npt.extensions (npt_isab) is selectable by name, labelled as ours, and never part of
    `models: all`: the paper profile and the paper's own tables stay the paper's."""
    isab = Params.from_file(REPO / "params.yaml", profile="isab")
    assert isab.selected_models("npt") == ["npt", "npt_isab"]
    assert isab.paper("npt")["models"]["npt_isab"] == "NPT-ISAB (ours)"
    assert {j.model for j in isab.jobs()} == {"npt", "npt_isab"} and len(isab.jobs()) == 20
    npt_job = Job("npt", "breast_cancer", "npt", 0)
    quick = Params.from_file(REPO / "params.yaml", profile="quick")
    assert isab.job_digest(npt_job) == quick.job_digest(npt_job)  # NPT's jobs are the quick run's
    for name in ("quick", "paper", "reproduce"):
        params = Params.from_file(REPO / "params.yaml", profile=name)
        assert "npt_isab" not in params.selected_models("npt") and "npt_isab" not in params.paper("npt")["models"]
        assert "npt_isab" not in params.all_models("npt")


def test_the_cli_takes_an_extension_job_only_where_the_profile_selects_it():
    """`tabrepro train-config npt breast_cancer npt_isab ...` under the isab profile is a job of the
    paper (it was refused once, so the isab profile never ran); under quick it is not."""
    import argparse

    from tabrepro.cli import _job

    args = argparse.Namespace(paper="npt", dataset="breast_cancer", model="npt_isab", fold=3)
    assert _job(Params.from_file(REPO / "params.yaml", profile="isab"), args) == Job(
        "npt", "breast_cancer", "npt_isab", 3
    )
    with pytest.raises(ParamsError, match="'npt_isab' is not evaluated in paper 'npt'"):
        _job(Params.from_file(REPO / "params.yaml", profile="quick"), args)


@pytest.mark.parametrize(
    "extensions, expected",
    [
        ({"npt_isap": "typo"}, r"papers\.npt\.extensions: unknown model 'npt_isap'.*npt_isab"),
        ({"knn": "k-NN again"}, r"papers\.npt\.extensions: 'knn' is one of the paper's own models"),
    ],
)
def test_extensions_name_known_models_that_are_not_the_papers_own(extensions, expected):
    with pytest.raises(ParamsError, match=expected):
        params_with(lambda raw: raw["papers"]["npt"].update(extensions=extensions))


def test_a_profile_cannot_select_another_papers_extension():
    def mutate(raw):
        raw["profiles"]["quick"]["papers"]["bishop"] = {"datasets": [], "models": ["npt_isab"]}

    with pytest.raises(ParamsError, match=r"profiles\.quick\.papers\.bishop\.models\[0\]: unknown model 'npt_isab'"):
        params_with(mutate, profile="quick")


def test_a_profile_may_not_run_a_model_its_datasets_search_space_lacks():
    """The isab profile's extension on Protein, whose NPT-Base space has no npt_isab entry: its jobs
    would be listed and scheduled, then fail at start. Caught when params.yaml is read."""

    def mutate(raw):
        raw["profiles"]["isab"]["papers"]["npt"]["datasets"] = ["breast_cancer", "protein"]

    with pytest.raises(
        ParamsError,
        match=r"profiles\.isab\.papers\.npt: runs 'npt_isab' on 'protein', whose search space 'npt_protein' "
        r"has no entry for it",
    ):
        params_with(mutate)
