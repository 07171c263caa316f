"""The side-by-side benchmark harness (benchmarks.versus), without the authors' code except in the
last, optional test: refusing a busy machine, the forced warning, the matmul peak, the table,
obtaining code from a git repository into a scratch directory, stubs, bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from benchmarks.steps import common as nn_bench
from benchmarks.versus import authors, cases, cli, machine, stubs
from benchmarks.versus.authors import VersusError

NPT_MIRROR = Path("/work/.mirror/OATML+non-parametric-transformers/repo")


@pytest.fixture
def busy(monkeypatch):
    """A 2-core machine with a 1-minute load average of 7.5."""
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (7.5, 7.0, 6.0))
    monkeypatch.setattr(machine, "available_cores", lambda: 2)


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    monkeypatch.setattr(machine, "available_cores", lambda: 2)


@pytest.fixture
def in_process(monkeypatch):
    """Measurements in this process (no spawned interpreter), on this process's thread count."""
    monkeypatch.setattr(nn_bench, "run_in_subprocess", lambda function, *args, **kwargs: function(*args, **kwargs))


def _git(*args: str, cwd: Path) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def _repo(path: Path) -> str:
    """A one-commit git repository at `path`; returns the commit."""
    path.mkdir()
    _git("init", "--quiet", cwd=path)
    (path / "dummy.py").write_text("VALUE = 1\n")
    _git("add", "dummy.py", cwd=path)
    _git("commit", "--quiet", "-m", "dummy", cwd=path)
    return _git("rev-parse", "HEAD", cwd=path)


def _runs(authors_s: tuple[float, ...], ours_s: tuple[float, ...]) -> tuple[list[dict], list[dict]]:
    """One run per round for each side, with these median step times."""

    def run(step: float) -> dict:
        return {"step_s_median": step, "step_s_min": step, "gflop_per_step": 100.0}

    return [run(t) for t in authors_s], [run(t) for t in ours_s]


def _summary(name: str = "bishop_code", authors_s: float = 4.0, ours_s: float = 1.0) -> dict:
    case = cases.CASES[name]
    authors_run = {"step_s_median": authors_s, "step_s_min": authors_s, "gflop_per_step": 100.0, "data_s_median": 0.01}
    ours_run = {"step_s_median": ours_s, "step_s_min": ours_s, "gflop_per_step": 80.0}
    return cases.summarise(case, [authors_run] * 3, [ours_run] * 3)


# ------------------------------------------------------------------------------ the machine
def test_a_busy_machine_is_refused_with_one_line_and_exit_2(busy, capsys):
    assert cli.main(["--peak-only", "--peak-sizes", "8"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert "machine busy" in lines[0] and "7.50 > 0.5 x 2 cores" in lines[0] and "--force" in lines[0]


def test_the_load_limit_is_configurable(busy):
    assert machine.check_load(max_load=4.0) is None  # 7.5 <= 4 x 2
    with pytest.raises(machine.MachineBusy):
        machine.check_load(max_load=3.0)


def test_force_times_anyway_and_says_so_loudly(busy, in_process, tmp_path, capsys):
    target = tmp_path / "versus.json"
    argv = ["--peak-only", "--peak-sizes", "16", "--threads", str(torch.get_num_threads()), "--force"]
    assert cli.main([*argv, "--json", str(target)]) == 0
    out = capsys.readouterr().out
    assert "WARNING: TIMED ON A BUSY MACHINE" in out and "not trustworthy" in out
    payload = json.loads(target.read_text())
    assert payload["forced"] is True and "BUSY MACHINE" in payload["warning"]
    assert payload["machine"]["load_average_1min"] == 7.5
    assert payload["machine"]["isa_level"] and payload["machine"]["torch"] == torch.__version__
    assert payload["matmul_peak"]["peak_gflops"] > 0


def test_a_quiet_machine_carries_no_warning(quiet, in_process, tmp_path, capsys):
    target = tmp_path / "versus.json"
    argv = ["--peak-only", "--peak-sizes", "16", "--threads", str(torch.get_num_threads()), "--json", str(target)]
    assert cli.main(argv) == 0
    assert "WARNING" not in capsys.readouterr().out
    assert json.loads(target.read_text())["warning"] is None


def test_matmul_peak_on_tiny_products():
    peak = machine.matmul_peak([32, 64], threads=torch.get_num_threads(), repeats=1)
    assert peak["threads"] == torch.get_num_threads()
    assert set(peak["gflops"]["torch.mm"]) == {"32", "64"}
    values = [value for per_size in peak["gflops"].values() for value in per_size.values()]
    assert all(value > 0 for value in values) and peak["peak_gflops"] == max(values)


def test_device_cuda_without_a_gpu_is_one_line_and_exit_2(quiet, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["--peak-only", "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "--device cuda" in err and "no CUDA device" in err


def test_a_gpu_run_takes_more_steps_per_run_unless_told():
    args = cli.build_parser().parse_args(["--device", "cuda"])
    npt, bishop = cases.CASES["npt_breast_cancer"], cases.CASES["bishop_code"]
    assert cli._timing(args, npt) == (npt.gpu_steps, npt.gpu_warmup) and npt.gpu_steps > npt.steps
    assert cli._timing(args, bishop) == (bishop.gpu_steps, bishop.gpu_warmup)
    assert cli._timing(cli.build_parser().parse_args([]), npt) == (npt.steps, npt.warmup)
    told = cli.build_parser().parse_args(["--device", "cuda", "--steps", "7", "--warmup", "0"])
    assert cli._timing(told, bishop) == (7, 0)


def test_the_authors_npt_command_line_enables_cuda_only_on_a_gpu(tmp_path):
    from benchmarks.versus import driver

    settings = cases.authors_settings(cases.CASES["npt_breast_cancer"])
    assert "--exp_disable_cuda" in driver._npt_argv(settings, tmp_path)
    assert "--exp_disable_cuda" not in driver._npt_argv(settings, tmp_path, cuda=True)
    assert driver._bishop_args({**cases.authors_settings(cases.CASES["bishop_code"])}, 30, cuda=True).use_gpu


def test_a_run_cut_short_keeps_the_rounds_it_finished(quiet, in_process, tmp_path, monkeypatch):
    from benchmarks.versus import record

    repo = tmp_path / "npt"
    _repo(repo)
    ours_runs = []

    def authors_run(spec, workdir, timeout_s):
        return {"step_s_median": 2.0, "step_s_min": 2.0, "gflop_per_step": 10.0}

    def our_run(case, steps, warmup, threads, device="cpu"):
        ours_runs.append(case.name)
        if len(ours_runs) > 1:
            raise KeyboardInterrupt  # the machine taken away in the second round
        return {"step_s_median": 1.0, "step_s_min": 1.0, "gflop_per_step": 10.0}

    monkeypatch.setattr(authors, "run_driver", authors_run)
    monkeypatch.setattr(cases, "run_ours", our_run)
    target = tmp_path / "versus.json"
    argv = ["--npt-repo", str(repo), "--cases", "npt_tiny", "--rounds", "3", "--peak-sizes", "16"]
    argv += ["--threads", str(torch.get_num_threads()), "--scratch", str(tmp_path / "s"), "--json", str(target)]
    with pytest.raises(KeyboardInterrupt):
        cli.main(argv)
    payload = json.loads(target.read_text())
    assert payload["rounds_completed"] == 1 and payload["settings"]["rounds"] == 3
    assert payload["cases"][0]["case"] == "npt_tiny" and payload["cases"][0]["ratio"] == 2.0
    assert "1 alternating rounds (of 3 planned: cut short)" in record.render_block([target], tmp_path)


# ------------------------------------------------------------------------------ the table
def test_ratio_is_authors_time_over_ours():
    assert cases.ratio(8.0, 2.0) == 4.0
    assert cli.format_ratio(4.0) == "4.00x" and cli.format_ratio(0.5) == "0.50x"
    assert cli.format_ratio(float("inf")) == "n/a"


def test_summary_and_table():
    summary = _summary()
    assert summary["ratio"] == 4.0
    assert cases.round_ratios(summary) == [4.0, 4.0, 4.0]
    two_rounds = cases.summarise(cases.CASES["bishop_code"], *_runs((4.0, 6.0), (2.0, 2.0)))
    assert cases.round_ratios(two_rounds) == [2.0, 3.0] and two_rounds["ratio"] == 2.5
    assert summary["authors"]["gflops_per_s"] == 25.0 and summary["ours"]["gflops_per_s"] == 80.0
    assert summary["authors"]["samples_per_s"] == 8.0 and summary["ours"]["samples_per_s"] == 32.0
    assert summary["authors"]["data_s_median"] == 0.01 and "data_s_median" not in summary["ours"]
    lines = cli.format_table([summary, _summary("npt_breast_cancer", 6.0, 2.0)], peak_gflops=100.0)
    assert lines[0].startswith("case") and "ours faster" in lines[0] and set(lines[1]) <= {"-", "+"}
    bishop_row, npt_row = lines[2], lines[3]
    assert bishop_row.startswith("bishop_code") and "4.00x" in bishop_row and "25.0 (25%)" in bishop_row
    assert "5.00x" in bishop_row  # at the peak: 80 GFLOP in 0.8 s against the authors' 4 s
    assert "ours at peak" in lines[0] and "5.00x" not in cli.format_table([summary])[2]  # no peak, no bound
    assert "8.0" in bishop_row and "32.0" in bishop_row
    assert npt_row.startswith("npt_breast_cancer") and "3.00x" in npt_row and npt_row.rstrip().endswith("-")
    assert len({len(line) for line in lines}) == 1  # aligned columns


def test_header_names_machine_peak_and_code():
    info = {
        "cpu_model": "Some CPU",
        "isa_level": "AVX2",
        "logical_cores": 4,
        "available_cores": 4,
        "torch": "2.x",
        "torch_cpu_capability": "AVX2",
        "threads": 4,
        "load_average_1min": 0.25,
        "git_commit": "abc",
    }
    peak = {"threads": 4, "gflops": {"torch.mm": {"2048": 100.0}}, "peak_gflops": 100.0}
    code = {"npt": {"commit": "123", "kind": "git clone", "source": "somewhere"}}
    text = "\n".join(cli.format_header(info, peak, "WARNING: busy", code))
    assert "Some CPU" in text and "ISA AVX2" in text and "4 threads" in text and "0.25" in text
    assert "2048^2 100.0" in text and "authors' npt: 123 (git clone of somewhere)" in text
    assert text.startswith("!!!") and "WARNING: busy" in text
    assert "libraries held to: nothing (full ISA)" in text
    held = cli.format_header({**info, "isa_limits": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}, peak, None, code)
    assert "libraries held to: ONEDNN_MAX_CPU_ISA=AVX2" in "\n".join(held)


def test_the_machine_record_names_the_isa_limits_set_in_the_environment(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    assert machine.machine_info(1)["isa_limits"]["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert "MKL_ENABLE_INSTRUCTIONS" not in machine.machine_info(1)["isa_limits"]


# ------------------------------------------------------------------------------ their code
def test_obtaining_code_from_a_local_git_repository(tmp_path):
    commit = _repo(tmp_path / "theirs")
    scratch = tmp_path / "scratch"
    found = authors.obtain("--npt-repo", str(tmp_path / "theirs"), "HEAD", scratch, "npt")
    assert found.kind == "git clone" and found.commit == commit
    assert found.path.is_relative_to(scratch) and (found.path / "dummy.py").read_text() == "VALUE = 1\n"
    assert not found.path.is_relative_to(authors.PROJECT_ROOT)


def test_a_plain_directory_is_used_where_it_is(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    found = authors.obtain("--bishop-repo", str(plain), "HEAD", tmp_path / "scratch", "bishop")
    assert found.path == plain.resolve() and found.kind == "plain directory"
    assert not (tmp_path / "scratch").exists()


def test_their_code_never_goes_into_the_project(tmp_path):
    _repo(tmp_path / "theirs")
    inside = authors.PROJECT_ROOT / "versus-scratch-must-not-exist"
    with pytest.raises(VersusError, match="inside the project"):
        authors.obtain("--npt-repo", str(tmp_path / "theirs"), "HEAD", inside, "npt")
    assert not inside.exists()
    with pytest.raises(VersusError, match="inside the project"):
        authors.check_source("--npt-repo", str(authors.PROJECT_ROOT / "src"))


def test_an_unknown_revision_is_one_clear_error(tmp_path):
    _repo(tmp_path / "theirs")
    with pytest.raises(VersusError, match="no-such-rev"):
        authors.obtain("--npt-repo", str(tmp_path / "theirs"), "no-such-rev", tmp_path / "scratch", "npt")


def test_a_branch_other_than_the_default_can_be_checked_out(tmp_path):
    first = _repo(tmp_path / "theirs")
    _git("checkout", "--quiet", "-b", "other", cwd=tmp_path / "theirs")
    (tmp_path / "theirs" / "dummy.py").write_text("VALUE = 2\n")
    _git("commit", "--quiet", "-am", "two", cwd=tmp_path / "theirs")
    second = _git("rev-parse", "HEAD", cwd=tmp_path / "theirs")
    _git("checkout", "--quiet", "-", cwd=tmp_path / "theirs")
    scratch = tmp_path / "scratch"
    assert authors.obtain("--npt-repo", str(tmp_path / "theirs"), "other", scratch, "npt").commit == second
    assert authors.obtain("--npt-repo", str(tmp_path / "theirs"), first[:10], scratch, "npt").commit == first


def test_a_missing_repository_is_one_line_and_exit_2(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert cli.main(["--npt-repo", str(missing), "--cases", "npt_tiny"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"benchmarks.versus: error: --npt-repo: no such repository or directory: {missing}"]


def test_an_unknown_case_is_one_line_and_exit_2(capsys):
    assert cli.main(["--cases", "npt_breast_cancer", "no_such_case"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "unknown case 'no_such_case'" in lines[0] and "npt_breast_cancer" in lines[0]


def test_a_missing_step_dependency_names_the_option(tmp_path, monkeypatch):
    monkeypatch.setitem(authors.STEP_DEPENDENCIES, "bishop", {"no_such_module_xyz": "no_such_module_xyz==1"})
    with pytest.raises(VersusError, match="no_such_module_xyz.*--install-deps"):
        authors.ensure_deps("bishop", tmp_path, install=False)


def test_stub_modules_import_but_refuse_use():
    finder = stubs._StubFinder(["fake_tracking_xyz"])
    assert finder.find_spec("fake_tracking_xyz_other", None) is None
    spec = finder.find_spec("fake_tracking_xyz.sub", None)
    module = finder.create_module(spec)
    placeholder = module.Run
    assert isinstance(placeholder, type) and type("Sub", (placeholder,), {})  # subclassable
    with pytest.raises(stubs.StubbedUse, match="fake_tracking_xyz.sub.Run"):
        placeholder()
    assert stubs.missing(["json", "no_such_module_xyz"]) == ["no_such_module_xyz"]


# ------------------------------------------------------------------------------ the cases
def test_the_authors_settings_come_from_our_benchmark_configs():
    from benchmarks.steps.npt import CASES as NPT_BENCH

    npt = cases.authors_settings(cases.CASES["npt_breast_cancer"])
    bench = NPT_BENCH["breast_cancer"]
    assert (npt["n_rows"], npt["n_features"]) == (bench["n_rows"], bench["n_features"]) == (569, 30)
    assert (npt["embed_dim"], npt["n_layers"], npt["n_heads"]) == (32, 8, 8)
    assert (npt["lr"], npt["flat_fraction"], npt["max_steps"], npt["p_feature"]) == (5e-4, 0.5, 2000, 0.15)
    # the code variant changes our implementation options, not the shared settings
    assert cases.authors_key(cases.CASES["npt_breast_cancer"]) == cases.authors_key(
        cases.CASES["npt_breast_cancer_code"]
    )
    assert cases.ours_npt_case(cases.CASES["npt_breast_cancer_code"])["config"]["grad_clip"] == "value"
    bishop = cases.authors_settings(cases.CASES["bishop_default"])
    assert bishop == {**bishop, "emb_dim": 32, "patch_dim": 8, "factor": 10, "e_layers": 3, "n_agg": 4}
    assert (bishop["out_len"], bishop["d_model"], bishop["d_ff"], bishop["n_heads"]) == (24, 256, 512, 4)
    assert bishop["batch_size"] == 32 and bishop["learning_rate"] == 5e-5
    assert "npt_tiny" not in cases.DEFAULT_CASES


def test_the_authors_bishop_data_equals_our_benchmark_data():
    from benchmarks.steps.bishop import load_data
    from benchmarks.versus.data import breast_cancer_train

    x, y = breast_cancer_train()
    ours, _ = load_data()
    assert torch.equal(x, ours.x_num) and torch.equal(y, ours.y)


# ------------------------------------------------------------------------------ both sides
@pytest.mark.skipif(not NPT_MIRROR.is_dir(), reason="no copy of the NPT authors' repository here")
def test_both_npt_sides_run_one_tiny_step(tmp_path, capsys):
    target = tmp_path / "versus.json"
    argv = ["--npt-repo", str(NPT_MIRROR), "--cases", "npt_tiny", "--rounds", "1", "--steps", "1"]
    argv += ["--warmup", "0", "--threads", "1", "--peak-sizes", "64", "--force", "--scratch", str(tmp_path / "s")]
    assert cli.main([*argv, "--json", str(target)]) == 0
    assert "npt_tiny" in capsys.readouterr().out
    payload = json.loads(target.read_text())
    (summary,) = payload["cases"]
    for side in ("authors", "ours"):
        assert summary[side]["step_s_median"] > 0 and summary[side]["gflop_per_step"] > 0
    assert summary["authors"]["runs"][0]["threads"] == 1 and summary["ours"]["runs"][0]["threads"] == 1
    assert len(payload["authors_code"]["npt"]["commit"]) == 40
    loaded = summary["authors"]["runs"][0]["tabrepro_modules"]
    assert not [name for name in loaded if name.startswith(("tabrepro.models.npt", "tabrepro.models.bishop"))]


# ------------------------------------------------------------------------ the generated page
SPEED_RUNS = sorted((Path(__file__).resolve().parents[2] / "records" / "speed").glob("versus-*.json"))


def test_the_speed_page_is_generated_from_the_committed_runs():
    from benchmarks.versus import record

    page = Path(__file__).resolve().parents[2] / record.BLOCK.page
    assert SPEED_RUNS, "no committed side-by-side run under records/speed"
    assert record.update_page(page, SPEED_RUNS, check=True), (
        f"{record.BLOCK.page}'s versus block is stale: python -m benchmarks.versus.record"
    )


def test_a_speed_record_names_machine_isa_load_commit_and_ratios(tmp_path):
    from benchmarks.versus import record

    run = json.loads(SPEED_RUNS[0].read_text())
    run["machine"].update(git_commit="a" * 40 + "+dirty", isa_limits={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    run["machine"]["cpu_family_model"] = "family 25 model 1"
    run["cases"][0]["ratio"] = 1.234
    run["matmul_peak"]["peak_gflops"] = 100.0
    run["cases"][0]["authors"]["step_s_median"] = 3.0
    run["cases"][0]["ours"]["gflop_per_step"] = 200.0  # 2 s at the peak: the ratio's bound is 1.5
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{record.BEGIN}\nold\n{record.END}\ntail\n")
    assert not record.update_page(readme, [path], check=True)  # stale, nothing written
    assert "old" in readme.read_text()
    assert record.main([str(path), "--page", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("tail\n") and "old" not in text
    assert run["machine"]["cpu_model"] in text and "`ONEDNN_MAX_CPU_ISA=AVX2`" in text
    assert "aaaaaaaaaaaa+dirty" in text and "**1.23×** (" in text and "| 1.50× |" in text and "load " in text
    spread = record._spread(cases.round_ratios(run["cases"][0]))
    assert f"({spread}) | 1.50× |" in text and "–" in spread  # the rounds' own ratios, low to high
    assert f"{run['machine']['cpu_model']}, family 25 model 1 (" in text
    assert record.main([str(path), "--page", str(readme), "--check"]) == 0


def test_a_gpu_speed_record_names_the_gpu_and_the_host(tmp_path):
    from benchmarks.versus import record

    run = json.loads(SPEED_RUNS[0].read_text())
    gpu = {"used": True, "name": "NVIDIA H200", "capability": "9.0", "memory_mb": 143771, "cuda": "13.0", "cudnn": 91}
    run["machine"].update(device="cuda", gpu=gpu)
    run["matmul_peak"] = {"device": "cuda", "gflops": {"torch.mm (cuBLAS)": {"8192": 51000.0}}, "peak_gflops": 51000.0}
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(run))
    block = record.render_block([path], tmp_path)
    assert "NVIDIA H200 GPU (CUDA 13.0" in block and "both sides on the GPU" in block
    assert run["machine"]["cpu_model"] in block and "51.0 TFLOP/s" in block


def test_a_run_timed_on_a_busy_machine_is_no_record(tmp_path, capsys):
    from benchmarks.versus import record

    run = json.loads(SPEED_RUNS[0].read_text())
    run["warning"] = "WARNING: TIMED ON A BUSY MACHINE"
    path = tmp_path / "busy.json"
    path.write_text(json.dumps(run))
    readme = tmp_path / "README.md"
    readme.write_text(f"{record.BEGIN}\n{record.END}\n")
    assert record.main([str(path), "--page", str(readme)]) == 2
    assert "busy machine" in capsys.readouterr().err and readme.read_text().count("\n") == 2
