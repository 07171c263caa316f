"""The command line keeps its promises: bad input is one line and exit 2 (with the traceback under
--debug), a bug keeps its traceback and exit 1, missing steps name the command to run, and
`tabrepro list` says what there is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, tiny_profile
from tabrepro.cli import build_parser, main
from tabrepro.config import Job, Params


@pytest.fixture
def write_params(tiny_params):
    """Profile `tiny` in the test's tmp_path: breast cancer, Gradient Boosting and k-NN, one
    configuration, fold 0; keywords are added to the profile entry."""
    return lambda **profile_extra: tiny_params(tiny_profile(["gradient_boosting", "knn"], **profile_extra))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tabrepro", *args], capture_output=True, text=True, cwd=cwd)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line]


def test_help_lists_every_command():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert {
        "validate",
        "list",
        "jobs",
        "fetch",
        "prepare",
        "split",
        "train",
        "train-config",
        "select",
        "tables",
        "analyse",
        "sparsity",
        "sparsity-plot",
        "report",
    } <= set(commands)
    text = parser.format_help()
    for name in commands:
        assert f"tabrepro {name}" in text, f"the module docstring does not mention `tabrepro {name}`"


def test_bad_input_is_one_line_and_exit_2_and_debug_adds_the_traceback(write_params):
    params = write_params()
    run = run_cli("--params", str(params), "split", "npt", "atlantis")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "unknown dataset 'atlantis'" in run.stderr
    run = run_cli("--params", str(params), "--debug", "split", "npt", "atlantis")
    assert run.returncode == 2 and "Traceback" in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("tabrepro split: error: ")


def test_a_bug_keeps_its_traceback_and_exit_1():
    code = (
        "import sys, tabrepro.cli as cli, tabrepro.cli.overview as overview\n"
        "def broken(args):\n    raise ValueError('an internal invariant broke')\n"
        "overview.cmd_validate = broken\nsys.exit(cli.main(['validate']))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 1
    assert "Traceback" in run.stderr and "ValueError: an internal invariant broke" in run.stderr
    assert not error_lines(run.stderr)


def test_missing_steps_name_the_command_to_run(capsys, write_params):
    params = str(write_params())
    assert main(["--params", params, "split", "npt", "boston"]) == 2
    assert "run `tabrepro prepare boston` first" in capsys.readouterr().err
    assert main(["--params", params, "-q", "train", "npt", "breast_cancer", "knn", "0"]) == 2
    assert "run `tabrepro prepare breast_cancer` first" in capsys.readouterr().err
    assert main(["--params", params, "prepare", "breast_cancer"]) == 0
    assert main(["--params", params, "-q", "train", "npt", "breast_cancer", "knn", "0"]) == 2
    err = capsys.readouterr().err
    assert "run `tabrepro split npt breast_cancer` first" in err and len(error_lines(err)) == 1


def test_a_configuration_the_library_refuses_is_one_line_naming_it(tmp_path, capsys, write_params):
    """tree_method 'approxx' passes the load-time check (XGBoost types it as a string) but XGBoost
    refuses it at fit time, which must read as bad input naming the configuration, not a crash."""
    params = str(
        write_params(
            model_overrides={"xgboost": {"max_configs": 1, "params": {"tree_method": "approxx", "n_estimators": 5}}}
        )
    )
    raw = yaml.safe_load(Path(params).read_text())
    raw["profiles"]["tiny"]["papers"]["npt"]["models"].append("xgboost")
    Path(params).write_text(yaml.safe_dump(raw, sort_keys=False))
    assert main(["--params", params, "prepare", "breast_cancer"]) == 0
    assert main(["--params", params, "split", "npt", "breast_cancer"]) == 0
    capsys.readouterr()
    assert main(["--params", params, "-q", "train", "npt", "breast_cancer", "xgboost", "0"]) == 2
    lines = error_lines(capsys.readouterr().err)
    assert len(lines) == 1
    assert "npt/breast_cancer/xgboost fold 0: configuration 0" in lines[0]
    assert "'tree_method': 'approxx'" in lines[0] and "was refused: XGBoostError: " in lines[0]
    assert not (tmp_path / "results" / "npt" / "breast_cancer" / "xgboost" / "fold0" / "metrics.json").exists()


def test_tables_without_results_warn_and_say_what_to_run(tmp_path, write_params):
    params = write_params()
    run = run_cli("--params", str(params), "tables", "npt")
    assert run.returncode == 0, run.stderr
    assert "warning: no results yet for npt" in run.stderr and "snakemake --cores N all" in run.stderr
    assert (tmp_path / "results" / "tables" / "npt" / "table10.md").is_file()  # the paper's numbers
    run = run_cli("--params", str(params), "report")
    assert run.returncode == 0, run.stderr
    assert "tabrepro report: warning: no results yet for npt" in run.stderr
    assert (tmp_path / "results" / "report" / "index.html").is_file()


def test_only_configuration_errors_from_a_fit_count_as_bad_input():
    """What training turns into a one-line ModelConfigError, and what it leaves a bug."""
    from tabrepro.job_run import _refused_configuration

    config = {"max_dept": 3, "learning_rate": 0.1, "p": 2}
    assert _refused_configuration(TypeError("__init__() got an unexpected keyword argument 'max_dept'"), config)
    assert _refused_configuration(ValueError("learning rate must be positive"), config)  # spaces for _
    assert not _refused_configuration(ValueError("operands could not be broadcast together"), config)
    assert not _refused_configuration(ValueError("expected p in the message"), config)  # 1-letter keys
    assert not _refused_configuration(KeyError("max_dept"), config)
    assert _refused_configuration(type("CatBoostError", (Exception,), {})("bad option"), config)


def test_list_datasets_shows_papers_task_rows_and_availability(tmp_path, capsys, write_params):
    params = write_params()
    raw_dir = tmp_path / "data" / "raw"
    (raw_dir / "boston").mkdir(parents=True)
    (raw_dir / "boston" / "housing.data").write_text("stand-in\n")
    (raw_dir / "yacht").mkdir()
    (raw_dir / "yacht" / "fetch_status.json").write_text(
        json.dumps({"source": "yacht", "ok": False, "error": "HTTP 404 for https://example.org/yacht", "files": []})
    )
    assert main(["--params", str(params), "list", "datasets"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["DATASET"].split() == ["DATASET", "PAPERS", "TASK", "ROWS", "AVAILABILITY"]
    assert "npt" in rows["breast_cancer"] and "binary" in rows["breast_cancer"] and "569" in rows["breast_cancer"]
    assert "embedded" in rows["breast_cancer"]
    assert "bishop:blastchar" in rows["telco_churn"] and "mirror only" in rows["telco_churn"]
    assert "downloadable (OpenML task 361055)" in rows["openml_361055_credit"]
    assert "fetched here" in rows["boston"] and "fetch failed here: HTTP 404" in rows["yacht"]
    assert "downloadable (archive.ics.uci.edu)" in rows["concrete"]
    starts = {line.index(line.split()[2]) for line in rows.values()}
    assert len(starts) == 1  # the TASK column is aligned


def test_list_models_and_profiles(capsys, write_params):
    params = write_params()
    assert main(["--params", str(params), "list", "models"]) == 0
    models = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert models["npt"].split()[1:3] == ["gpu", "one"] and "npt" in models["npt"].split()[-1]
    assert "configurations in one job" in models["xgboost"] and models["xgboost"].split()[1] == "cpu"
    assert models["bishop_attention"].split()[-1] == "bishop"
    assert main(["--params", str(params), "list", "profiles"]) == 0
    profiles = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    raw = yaml.safe_load(params.read_text())
    for name in raw["profiles"]:
        key = f"*{name}" if name == "tiny" else name
        n_jobs = len(Params(raw, profile=name).jobs())
        assert profiles[key].split()[1] == f"{n_jobs:,}"
        assert raw["profiles"][name]["description"] in profiles[key]


def test_configs_prints_the_candidates_the_recorded_quick_run_trained(capsys):
    """`tabrepro configs` against the committed quick record: for every job run under today's
    parameters (same digest), the candidate count and the selected configuration agree."""
    params = Params.from_file(REPO / "params.yaml", profile="quick")
    records = sorted((REPO / "records/runs/quick/results").glob("*/*/*/fold*/metrics.json"))
    checked, printed = 0, {}
    for path in records:
        result = json.loads(path.read_text())
        job = Job(result["paper"], result["dataset"], result["model"], result["fold"])
        if result["params_digest"] != params.job_digest(job):
            continue  # written under other parameters
        key = (job.paper, job.dataset, job.model)
        if key not in printed:  # one list per dataset x model, whatever the fold
            assert main(["--params", str(REPO / "params.yaml"), "--profile", "quick", "configs", *key, "--json"]) == 0
            printed[key] = json.loads(capsys.readouterr().out)
        configs = printed[key]
        assert len(configs) == result["selection"]["n_configs"], path
        assert configs[result["selection"]["best_index"]] == result["selected_config"], path
        checked += 1
    if not checked:
        pytest.skip("no record of the quick profile under today's parameters")
    assert checked >= 9 * 10 // 2, f"only {checked} of {len(records)} recorded jobs are current"


def test_configs_text_names_variants_and_the_budget_and_refuses_what_does_not_run(capsys):
    params_file = str(REPO / "params.yaml")
    assert main(["--params", params_file, "--profile", "paper", "configs", "npt", "breast_cancer", "npt"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        "# npt/breast_cancer/npt, profile 'paper': 8 configuration(s) from search space "
        "'npt_small_breast_cancer', task binary"
    )
    assert [line.split("\t")[0] for line in lines[1:]] == [
        "0 vanilla",
        "1 layers16",
        "2 heads16",
        "3 layers16_heads16",
        "4 p_target_0.1",
        "5 p_target_0.5",
        "6 p_feature_0.2",
        "7 cosine_cyclic",
    ]
    assert json.loads(lines[2].split("\t")[1])["n_layers"] == 16
    assert main(["--params", params_file, "--profile", "quick", "configs", "npt", "breast_cancer", "knn"]) == 0
    assert "budget capped: 6 of the paper's 480 configurations" in capsys.readouterr().out
    assert main(["--params", params_file, "--profile", "reproduce", "configs", "bishop", "adult", "bishop"]) == 0
    assert "does not run this job (needs a GPU" in capsys.readouterr().err
    assert main(["--params", params_file, "configs", "bishop", "openml_361062_pol", "bishop_no_decoder"]) == 2
    assert "does not run on bishop/openml_361062_pol" in capsys.readouterr().err
