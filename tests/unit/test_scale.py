"""Stand-ins of the large datasets, the prepare gate for them, stage measurement and the scale benchmark."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.scale import census_levels
from benchmarks.scale.bench import BENCH_PROFILE, TINY_BUDGETS, Record, bench_params, format_table
from benchmarks.scale.generators import _planted_hand, poker_hand_class
from benchmarks.scale.measure import run_measured
from benchmarks.scale.standins import StandinRequestError, plan_files, write_standin
from tabrepro.config import Params
from tabrepro.data.parse import parse_dataset
from tabrepro.data.registry import get_source
from tabrepro.data.standin import ALLOW_ENV, MARKER_FILE, StandinError, source_for_directory
from tabrepro.errors import InputError

REPO = Path(__file__).resolve().parents[2]
DATASETS = ("higgs", "poker_hand", "forest_cover", "census_income_kdd")


def _opened(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


@pytest.fixture
def allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_ENV, "1")


# ----------------------------------------------------------------------------------------------
# the generated files parse through the real parser


@pytest.mark.parametrize("dataset", DATASETS)
def test_a_small_stand_in_parses_into_the_registry_shape(tmp_path, allow, dataset):
    source = get_source(dataset)
    marker = write_standin(dataset, tmp_path, rows=2000, seed=3)
    table = parse_dataset(dataset, tmp_path)
    schema = table.schema
    assert schema.n_rows == marker.rows == 2000
    assert len(schema.features) == source.expected.features
    assert [c.name for c in schema.columns] == [
        c for c in source.format.columns if c not in source.drop and c != source.target
    ] + [source.target]
    assert schema.task == source.task
    expected_kinds = {"higgs": {"continuous"}, "poker_hand": {"categorical"}}
    if dataset in expected_kinds:
        assert {c.kind for c in schema.features} == expected_kinds[dataset]
    if source.has_official_test:
        assert 0 < schema.n_fixed_test_rows < schema.n_rows
    assert list(marker.file_rows) == [f.parsed_name for f in source.table_files]


def test_stand_ins_keep_the_formats_of_the_original_files(tmp_path):
    for dataset in DATASETS:
        write_standin(dataset, tmp_path, rows=300, seed=0)
    higgs = _opened(tmp_path / "higgs" / "HIGGS.csv.gz").decode().splitlines()
    fields = higgs[0].split(",")
    assert len(fields) == 29 and fields[0] in ("1.000000000000000000e+00", "0.000000000000000000e+00")
    assert all(len(f.split("e")[0].split(".")[1]) == 18 for f in fields)
    btags = {float(line.split(",")[9]) for line in higgs}
    assert btags <= {0.0, 1.0865380764007568, 2.1730761528015137}
    poker = (tmp_path / "poker_hand" / "poker-hand-testing.data").read_bytes()
    assert poker.endswith(b"\r\n") and poker.count(b"\r\n") == poker.count(b"\n")
    cover = _opened(tmp_path / "forest_cover" / "covtype.data.gz").decode().splitlines()
    rows = np.array([[int(v) for v in line.split(",")] for line in cover])
    assert rows.shape[1] == 55
    assert (rows[:, 10:14].sum(axis=1) == 1).all() and (rows[:, 14:54].sum(axis=1) == 1).all()
    assert set(rows[:, 54]) <= set(range(1, 8))
    census = _opened(tmp_path / "census_income_kdd" / "census-income.data.gz").decode().splitlines()
    fields = census[0].split(", ")
    assert len(fields) == 42 and fields[-1] in census_levels.LABELS
    assert any("?" in line.split(", ") for line in census)
    assert {line.split(", ")[-1] for line in census} <= set(census_levels.LABELS)


def test_census_values_come_from_the_names_file_levels(tmp_path, allow):
    write_standin("census_income_kdd", tmp_path, rows=5000, seed=1)
    table = parse_dataset("census_income_kdd", tmp_path)
    for column in table.schema.features:
        if column.kind == "categorical":
            allowed = {v.strip() for v in census_levels.LEVELS[column.name]}
            assert set(column.levels) <= allowed, column.name
    assert table.schema.target_column.levels == ["- 50000", "50000+"]
    assert table.frame["migration_code_change_in_msa"].isna().mean() > 0.3  # '?' read as missing
    positive = (table.frame["income"] == "50000+").mean()
    assert 0.02 < positive < 0.2


def test_the_same_seed_gives_the_same_bytes_and_another_seed_other_bytes(tmp_path):
    digests = []
    for seed, where in ((5, "a"), (5, "b"), (6, "c")):
        write_standin("higgs", tmp_path / where, rows=500, seed=seed)
        digests.append(hashlib.sha256((tmp_path / where / "higgs" / "HIGGS.csv.gz").read_bytes()).hexdigest())
    assert digests[0] == digests[1] != digests[2]


def test_labels_depend_on_the_features_so_models_can_learn(tmp_path, allow):
    from sklearn.linear_model import LogisticRegression

    write_standin("higgs", tmp_path, rows=6000, seed=0)
    frame = parse_dataset("higgs", tmp_path).frame
    X, y = np.log(np.abs(frame.iloc[:, :-1].to_numpy()) + 1e-3), frame["label"].to_numpy()
    model = LogisticRegression(max_iter=2000).fit(X[:4000], y[:4000])
    assert model.score(X[4000:], y[4000:]) > 0.58  # well above the 53 % majority class


# ----------------------------------------------------------------------------------------------
# poker hands


@pytest.mark.parametrize(
    ("cards", "hand"),
    [
        ([(1, 1), (1, 10), (1, 11), (1, 12), (1, 13)], 9),
        ([(2, 9), (2, 10), (2, 11), (2, 12), (2, 13)], 8),
        ([(3, 1), (3, 2), (3, 3), (3, 4), (3, 5)], 8),
        ([(1, 7), (2, 7), (3, 7), (4, 7), (1, 2)], 7),
        ([(1, 7), (2, 7), (3, 7), (4, 2), (1, 2)], 6),
        ([(4, 2), (4, 5), (4, 9), (4, 11), (4, 13)], 5),
        ([(1, 10), (2, 11), (3, 12), (4, 13), (1, 1)], 4),
        ([(1, 3), (2, 3), (3, 3), (4, 5), (1, 9)], 3),
        ([(1, 3), (2, 3), (3, 5), (4, 5), (1, 9)], 2),
        ([(1, 3), (2, 3), (3, 6), (4, 5), (1, 9)], 1),
        ([(1, 1), (2, 3), (3, 6), (4, 5), (1, 9)], 0),
        ([(1, 11), (2, 12), (3, 13), (4, 1), (1, 2)], 0),  # no wrap-around straight
    ],
)
def test_poker_hands_are_classed_by_the_rules(cards, hand):
    suits = np.array([[s for s, _ in cards]])
    ranks = np.array([[r for _, r in cards]])
    assert poker_hand_class(suits, ranks).tolist() == [hand]


def test_planted_rare_hands_are_what_they_claim_and_every_class_occurs(tmp_path, allow):
    rng = np.random.default_rng(0)
    for hand in range(4, 10):
        for _ in range(20):
            suits, ranks = _planted_hand(rng, hand)
            assert len(set(zip(suits, ranks))) == 5
            assert poker_hand_class(np.array([suits]), np.array([ranks])).tolist() == [hand]
    write_standin("poker_hand", tmp_path, rows=3000, seed=0)
    assert parse_dataset("poker_hand", tmp_path).schema.target_column.levels == [str(c) for c in range(10)]


# ----------------------------------------------------------------------------------------------
# sizes, the marker and the prepare gate


def test_reduced_sizes_scale_every_file_and_the_fixed_test_tail():
    files, tail = plan_files(get_source("higgs"), 110_000)
    assert [(f.name, f.rows) for f in files] == [("HIGGS.csv.gz", 110_000)] and tail == 5000
    files, tail = plan_files(get_source("poker_hand"), 102_501)
    assert sum(f.rows for f in files) == 102_501 and files[0].rows == 2501 and tail == 0
    full, _ = plan_files(get_source("census_income_kdd"), None)
    assert [f.rows for f in full] == [199_523, 99_762]
    with pytest.raises(StandinRequestError, match="at least"):
        plan_files(get_source("higgs"), 5)


def test_prepare_refuses_stand_ins_unless_allowed(tmp_path, monkeypatch):
    write_standin("forest_cover", tmp_path, rows=400)
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    with pytest.raises(StandinError, match=f"synthetic stand-ins.*{ALLOW_ENV}=1"):
        parse_dataset("forest_cover", tmp_path)
    monkeypatch.setenv(ALLOW_ENV, "1")
    assert parse_dataset("forest_cover", tmp_path).schema.n_rows == 400


def test_a_file_replaced_after_generation_is_refused(tmp_path, allow):
    write_standin("poker_hand", tmp_path, rows=300)
    path = tmp_path / "poker_hand" / "poker-hand-testing.data"
    path.write_bytes(path.read_bytes() + b"1,1,1,2,1,3,1,4,2,9,0\r\n")
    with pytest.raises(StandinError, match="not the file the generator wrote"):
        parse_dataset("poker_hand", tmp_path)


def test_without_a_marker_the_registry_entry_is_used_unchanged(tmp_path):
    source = get_source("higgs")
    (tmp_path / "higgs").mkdir()
    assert source_for_directory(source, tmp_path / "higgs") is source


def test_the_generator_does_not_overwrite_real_data(tmp_path):
    (tmp_path / "higgs").mkdir()
    (tmp_path / "higgs" / "HIGGS.csv.gz").write_bytes(b"real")
    with pytest.raises(StandinRequestError, match="without a stand-in marker"):
        write_standin("higgs", tmp_path, rows=100)
    assert (tmp_path / "higgs" / "HIGGS.csv.gz").read_bytes() == b"real"
    write_standin("higgs", tmp_path, rows=100, force=True)
    assert (tmp_path / "higgs" / MARKER_FILE).is_file()


def test_a_failed_generation_leaves_no_files(tmp_path, monkeypatch):
    from benchmarks.scale import standins

    def broken(rng, n, part):
        if part.file_index == 1:
            raise RuntimeError("disk full")
        return "1,1,1,2,1,3,1,4,2,9,0\r\n" * n

    monkeypatch.setitem(standins.GENERATORS, "poker_hand", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        write_standin("poker_hand", tmp_path, rows=300)
    assert not (tmp_path / "poker_hand").exists()


def test_the_command_line_says_what_is_wrong_in_one_line(tmp_path):
    (tmp_path / "higgs").mkdir()
    (tmp_path / "higgs" / "HIGGS.csv.gz").write_bytes(b"real")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.scale.standins",
            "--dataset",
            "higgs",
            "--rows",
            "100",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,  # where `python -m benchmarks...` finds the package
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "without a stand-in marker" in done.stderr


# ----------------------------------------------------------------------------------------------
# measurement and the benchmark's parameters


def test_a_stage_reports_its_own_peak_memory_and_a_timeout(tmp_path):
    grow = "import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.6)"
    # Measured from a fresh small interpreter: Linux keeps a forked child's ru_maxrss across exec, so a
    # child of this (large) pytest process would report at least pytest's own size.
    driver = (
        "import json, sys; from pathlib import Path; from benchmarks.scale.measure import run_measured; "
        f"r = run_measured([sys.executable, '-c', {grow!r}], log_path=Path({str(tmp_path / 'grow.log')!r})); "
        "print(json.dumps([r.status, r.returncode, r.peak_rss_mb, r.tree_peak_rss_mb]))"
    )
    done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, check=True, cwd=REPO)
    status, returncode, peak_rss_mb, tree_peak_rss_mb = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == "ok" and returncode == 0
    assert 300 < peak_rss_mb < 600
    assert tree_peak_rss_mb > 250  # the sampler saw it too
    slow = run_measured(
        [sys.executable, "-c", "import time; time.sleep(30)"], log_path=tmp_path / "slow.log", timeout_s=1.0
    )
    assert slow.status == "timeout" and slow.wall_s < 10
    failed = run_measured([sys.executable, "-c", "raise SystemExit(3)"], log_path=tmp_path / "f.log")
    assert failed.status == "failed" and failed.returncode == 3


def test_a_running_stage_reports_its_progress(tmp_path):
    heard: list[tuple[float, float]] = []
    run_measured(
        [sys.executable, "-c", "import time; time.sleep(1.5)"],
        log_path=tmp_path / "p.log",
        sample_interval_s=0.05,
        on_progress=lambda wall, peak: heard.append((wall, peak)),
        progress_interval_s=0.3,
    )
    assert len(heard) >= 2
    assert all(b[0] > a[0] and b[1] >= a[1] for a, b in zip(heard, heard[1:], strict=False))
    assert 0 < heard[-1][0] < 1.6 and heard[-1][1] > 0


def test_bench_params_are_a_valid_profile_with_tiny_budgets():
    from tabrepro.config import read_params_file

    base = read_params_file(REPO / "params.yaml")
    raw = bench_params(base, ["higgs", "income"], ["xgboost", "npt", "bishop"])
    params = Params(raw)
    assert params.profile_name == BENCH_PROFILE
    jobs = params.jobs()
    assert {(j.dataset, j.model) for j in jobs} == {
        (d, m) for d in ("higgs", "income") for m in ("xgboost", "npt", "bishop")
    }
    assert all(j.fold == 0 for j in jobs)
    for model in ("xgboost", "npt", "bishop"):
        assert params.n_configs("npt", "higgs", model) == 1
        space = params.search_space("npt", "higgs", model)
        assert space["forced"] == TINY_BUDGETS[model]
    assert "bishop" not in base["papers"]["npt"]["models"]  # the repository's params are not touched


def test_the_table_shows_every_stage():
    records = [
        Record("higgs", "higgs", 11_000, "prepare", None, "ok", 1.5, 2048.0, 1900.0),
        Record("higgs", "higgs", 11_000, "train", "knn", "timeout", 60.0, 4096.0, 4000.0),
    ]
    text = format_table(records)
    assert "| higgs | 11,000 | prepare |  | ok | 1.5 | 2.00 | 1.86 |" in text
    assert "| knn | timeout |" in text


# ----------------------------------------------------------------------------------------------
# a reduced stand-in through the whole pipeline


@pytest.mark.slow
def test_a_reduced_stand_in_goes_through_prepare_split_train_and_tables(tmp_path):
    from benchmarks.scale import bench

    out = tmp_path / "bench.json"
    code = bench.main(
        [
            "--datasets",
            "poker_hand",
            "--models",
            "xgboost,knn,npt",
            "--rows-scale",
            "0.002",
            "--work",
            str(tmp_path / "work"),
            "--json",
            str(out),
            "--stage-timeout",
            "600",
        ]
    )
    assert code == 0
    records = json.loads(out.read_text())["records"]
    assert [(r["stage"], r["model"], r["status"]) for r in records] == [
        ("generate", None, "ok"),
        ("prepare", None, "ok"),
        ("split", None, "ok"),
        ("train", "xgboost", "ok"),
        ("train", "knn", "ok"),
        ("train-config", "npt", "ok"),
        ("select", "npt", "ok"),
    ]
    for record in records:
        assert record["peak_rss_mb"] > 50 and record["wall_s"] > 0
    trained = [r for r in records if r["stage"] in ("train", "select")]
    assert all(r["job"]["n_test"] == 2000 for r in trained)  # the whole (scaled) official test file
    assert all(0 <= r["job"]["metrics"]["test"]["accuracy_pct"] <= 100 for r in trained)
    env = {
        "TABREPRO_DATA_DIR": str(tmp_path / "work" / "data"),
        "TABREPRO_RESULTS_DIR": str(tmp_path / "work" / "results"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tabrepro",
            "--params",
            str(tmp_path / "work" / "params.yaml"),
            "--profile",
            BENCH_PROFILE,
            "tables",
            "npt",
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    table8 = (tmp_path / "work" / "results" / "tables" / "npt" / "table8.md").read_text()
    assert "poker" in table8.lower()
    with pytest.raises(InputError):  # and the stand-in never passes for real data
        parse_dataset("poker_hand", tmp_path / "work" / "data" / "raw")


def _bench_predictions(work: Path, *settings: str) -> dict[str, dict[str, np.ndarray]]:
    """Run BiSHop and NPT through the benchmark on a reduced Poker Hand; their stored outputs."""
    from benchmarks.scale import bench

    argv = ["--datasets", "poker_hand", "--models", "bishop,npt", "--rows-scale", "0.001", "--work", str(work)]
    for setting in settings:
        argv += ["--set", setting]
    assert bench.main([*argv, "--json", str(work / "bench.json")]) == 0
    payload = json.loads((work / "bench.json").read_text())
    assert len(payload["settings"]) == len(settings)  # the record names its overrides
    records = payload["records"]
    assert all(r["status"] == "ok" for r in records), records
    outputs = {}
    for model in ("bishop", "npt"):
        with np.load(work / "results" / "npt" / "poker_hand" / model / "fold0" / "config0" / "predictions.npz") as f:
            outputs[model] = {part: f[part] for part in ("val", "test")}
    return outputs


@pytest.mark.slow
def test_a_reduced_stand_in_predicted_in_small_batches_gives_the_one_batch_predictions(tmp_path):
    """The bounded-batch prediction paths, taken by the workflow's own jobs (train-config, select).

    BiSHop scores rows independently, so 45-row evaluation batches (the last one shorter) must give
    the outputs of one batch over all 1,000 test rows. NPT predicts each row with the others of its batch as context
    (the paper's non-parametric prediction), so its batches cannot equal one batch; there every
    validation and test row must come out exactly once, with a distribution over the classes.
    """
    one = _bench_predictions(tmp_path / "one", "bishop.eval_batch_size=100000", "npt.batch_size=64")
    small = _bench_predictions(tmp_path / "small", "bishop.eval_batch_size=45", "npt.batch_size=64")
    for part in ("val", "test"):
        np.testing.assert_allclose(small["bishop"][part], one["bishop"][part], rtol=1e-5, atol=1e-6)
        assert (small["bishop"][part].argmax(1) == one["bishop"][part].argmax(1)).all()
    assert one["bishop"]["test"].shape[0] == 1000  # the whole (scaled) official test file
    npt_test = small["npt"]["test"]
    assert npt_test.shape == (1000, 10) and np.allclose(npt_test.sum(1), 1, atol=1e-4)
    np.testing.assert_array_equal(npt_test, one["npt"]["test"])  # same plan, same batches: deterministic


def test_stages_import_the_benchmarked_package_from_any_work_directory(tmp_path, monkeypatch):
    import argparse

    import tabrepro
    from benchmarks.scale.bench import Bench

    other = tmp_path / "other"  # another copy of tabrepro, ahead of the installed one
    (other / "tabrepro").mkdir(parents=True)
    (other / "tabrepro" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(other))
    env = Bench(argparse.Namespace(work=str(tmp_path / "work"))).env
    child = subprocess.run(
        [sys.executable, "-c", "import tabrepro; print(tabrepro.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(child.stdout.strip()).resolve() == Path(tabrepro.__file__).resolve()


@pytest.mark.parametrize("model", ["npt", "xgboost"])
def test_every_train_stage_starts_a_fresh_job(tmp_path, model):
    """A state file left by an earlier, stopped benchmark must not make the measured job resume."""
    import argparse

    from benchmarks.scale.bench import PAPER, Bench
    from tabrepro.config import Job

    bench = Bench(argparse.Namespace(work=str(tmp_path / "work"), threads=1, json=None))
    job_dir = bench.layout.job_dir.path(Job(PAPER, "poker_hand", model, 0))
    stale = job_dir / "config0" / "state" / "0123" / "state.pt"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"from a stopped run")
    seen = []

    def run(name, command, model=None, on_progress=None):
        seen.append(any(job_dir.rglob("*")))
        raise KeyboardInterrupt  # enough: the stage would start here

    bench._run = run
    with pytest.raises(KeyboardInterrupt):
        bench.train_stages("poker_hand", 1000, model)
    assert seen == [False]


def _bench_args(tmp_path: Path, resume: bool = False, threads: int = 1) -> list[str]:
    return [
        "--datasets", "poker_hand", "--models", "xgboost,npt", "--threads", str(threads),
        "--work", str(tmp_path / "work"), "--json", str(tmp_path / "run.json"),
    ] + (["--resume"] if resume else [])  # fmt: skip


def _scripted_bench(tmp_path: Path, argv: list[str], outcomes: dict[str, str], calls: list[str]):
    """A Bench whose stages do not run: each returns the status `outcomes` gives its name, after
    a progress report; a stopped NPT job leaves a checkpoint, as the real one does."""
    from benchmarks.scale import bench as bench_module
    from benchmarks.scale.measure import StageResult
    from tabrepro.config import Job

    bench = bench_module.Bench(bench_module.build_parser().parse_args(argv))
    bench.setup()
    state = bench.layout.job_dir.path(Job(bench_module.PAPER, "poker_hand", "npt", 0)) / "state.pt"

    def run(name, command, model=None, on_progress=None):
        calls.append(f"{name} (checkpoint there)" if name.endswith("npt.train-config") and state.is_file() else name)
        status = outcomes.get(name, "ok")
        if on_progress is not None:
            on_progress(3.0, 512.0)
            running = json.loads((tmp_path / "run.json").read_text())["records"][-1]
            assert running["status"] == "running" and running["tree_peak_rss_mb"] >= 512.0
        if name.endswith("npt.train-config") and status != "ok":
            state.parent.mkdir(parents=True, exist_ok=True)
            state.write_bytes(b"a checkpoint")
        return StageResult(tuple(command), status, 0 if status == "ok" else None, 100.0, 2048.0, 1024.0, "")

    bench._run = run
    return bench, state


def test_a_stopped_stage_goes_on_from_its_checkpoint_and_sums_its_parts(tmp_path):
    calls: list[str] = []
    first, state = _scripted_bench(tmp_path, _bench_args(tmp_path), {"poker_hand.npt.train-config": "timeout"}, calls)
    for model in ("xgboost", "npt"):
        first.train_stages("poker_hand", 1000, model)
    first.save()
    assert calls == ["poker_hand.xgboost.train", "poker_hand.npt.train-config"] and state.is_file()

    calls.clear()
    second, _ = _scripted_bench(tmp_path, _bench_args(tmp_path, resume=True), {}, calls)
    second.train_stages("poker_hand", 1000, "xgboost")  # finished: kept, not rerun
    assert calls == [] and state.is_file()  # the stopped job's checkpoint is still there
    second.train_stages("poker_hand", 1000, "npt")
    assert calls == ["poker_hand.npt.train-config (checkpoint there)", "poker_hand.npt.select"]
    saved = json.loads((tmp_path / "run.json").read_text())
    records = {(r["stage"], r["model"]): r for r in saved["records"]}
    training = records[("train-config", "npt")]
    assert training["status"] == "ok" and training["wall_s"] == 200.0 and training["peak_rss_mb"] == 2048.0
    assert [p["status"] for p in training["parts"]] == ["timeout", "ok"]
    assert records[("train", "xgboost")]["parts"] == [] and records[("select", "npt")]["status"] == "ok"
    assert saved["resumed"] == [second.machine] and saved["machine"] == first.machine

    calls.clear()  # without --resume, the same work directory starts every job afresh
    fresh, _ = _scripted_bench(tmp_path, _bench_args(tmp_path), {"poker_hand.npt.train-config": "timeout"}, calls)
    state.write_bytes(b"a checkpoint of the run before")
    fresh.train_stages("poker_hand", 1000, "npt")
    assert calls == ["poker_hand.npt.train-config"]
    assert json.loads((tmp_path / "run.json").read_text())["records"][0]["parts"] == []


def test_each_part_names_the_machine_that_measured_it(tmp_path):
    """A stage first run in a resumed invocation (the run began elsewhere, with other stages) is
    that invocation's part, not the run's first machine's, when a later part goes on with it."""
    calls: list[str] = []
    first, _ = _scripted_bench(tmp_path, _bench_args(tmp_path), {}, calls)
    first.machine = first.first_machine = {**first.machine, "commit": "aaa"}
    first.train_stages("poker_hand", 1000, "xgboost")
    first.save()
    second, _ = _scripted_bench(
        tmp_path, _bench_args(tmp_path, resume=True), {"poker_hand.npt.train-config": "timeout"}, calls
    )
    second.machine = {**second.machine, "commit": "bbb"}
    second.train_stages("poker_hand", 1000, "npt")
    second.save()
    third, _ = _scripted_bench(tmp_path, _bench_args(tmp_path, resume=True), {}, calls)
    third.machine = {**third.machine, "commit": "ccc"}
    third.train_stages("poker_hand", 1000, "npt")
    saved = json.loads((tmp_path / "run.json").read_text())
    training = next(r for r in saved["records"] if (r["stage"], r["model"]) == ("train-config", "npt"))
    assert [(p["commit"], p["status"]) for p in training["parts"]] == [("bbb", "timeout"), ("ccc", "ok")]
    assert training["measured_on"]["commit"] == "ccc" and saved["machine"]["commit"] == "aaa"


def test_a_carried_checkpoint_lets_another_machine_go_on(tmp_path, capsys):
    """--carry keeps the stopped job's files beside the record; a resume on a machine without the
    work directory copies them back before the stage runs, so the job goes on from them."""
    import shutil

    from benchmarks.scale import bench as bench_module

    carry = ["--carry", str(tmp_path / "carry")]
    calls: list[str] = []
    first, state = _scripted_bench(
        tmp_path, _bench_args(tmp_path) + carry, {"poker_hand.npt.train-config": "timeout"}, calls
    )
    first.train_stages("poker_hand", 1000, "npt")
    first.save()
    carried = tmp_path / "carry" / state.relative_to(first.work)
    assert carried.read_bytes() == b"a checkpoint"

    shutil.rmtree(first.work)  # the next part runs on another machine: only the repository travels
    calls.clear()
    second, _ = _scripted_bench(tmp_path, _bench_args(tmp_path, resume=True) + carry, {}, calls)
    assert "1 saved file(s)" in capsys.readouterr().out
    second.train_stages("poker_hand", 1000, "npt")
    assert calls[0] == "poker_hand.npt.train-config (checkpoint there)"
    second.save()  # the job finished: nothing of it is carried any longer
    assert not any((tmp_path / "carry").rglob("*"))

    assert bench_module.main(_bench_args(tmp_path)[:-2] + carry) == 2  # --carry without --json
    assert "--carry needs --json" in capsys.readouterr().err


def test_resume_refuses_a_run_of_other_settings_in_one_line(tmp_path, capsys):
    from benchmarks.scale import bench

    assert bench.main(_bench_args(tmp_path, resume=True)) == 2
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "work").exists()
    calls: list[str] = []
    first, _ = _scripted_bench(tmp_path, _bench_args(tmp_path), {}, calls)
    first.train_stages("poker_hand", 1000, "xgboost")
    before = (tmp_path / "run.json").read_bytes()
    assert bench.main(_bench_args(tmp_path, resume=True, threads=2)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "threads 1, not 2" in err
    assert (tmp_path / "run.json").read_bytes() == before
    (tmp_path / "run.json").write_text(json.dumps({**json.loads(before), "records": [{"stage": "prepare"}]}))
    assert bench.main(_bench_args(tmp_path, resume=True)) == 2
    assert "is not a record of this benchmark" in capsys.readouterr().err


def test_a_bench_setting_must_name_a_benchmarked_model(tmp_path, capsys):
    from benchmarks.scale import bench

    code = bench.main(["--models", "xgboost", "--set", "bishop.eval_batch_size=7", "--work", str(tmp_path)])
    assert code == 2
    assert "bishop.eval_batch_size: model not in --models" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------------------------
# the data path at scale: same results with less memory


def test_load_table_reads_the_same_frame_as_a_whole_file_read(tmp_path):
    import pandas as pd

    from tabrepro.data.table import ColumnSpec, Table, TableSchema, load_table, save_table

    frame = pd.DataFrame(
        {
            "x": [1.5, np.nan, 3.0, -0.0],
            "c": pd.Series(["a", None, "b", "a"], dtype="str"),
            "y": pd.Series(["0", "1", "1", "0"], dtype="str"),
        }
    )
    schema = TableSchema(
        "d",
        "binary",
        "y",
        [
            ColumnSpec("x", "continuous"),
            ColumnSpec("c", "categorical", ["a", "b"]),
            ColumnSpec("y", "categorical", ["0", "1"]),
        ],
        4,
    )
    save_table(Table(frame, schema), tmp_path)
    loaded = load_table(tmp_path)
    pd.testing.assert_frame_equal(loaded.frame, pd.read_parquet(tmp_path / "table.parquet"), check_exact=True)
    assert loaded.schema == schema


@pytest.mark.parametrize(
    "protocol",
    [
        {"kind": "kfold", "n_folds": 5, "val_fraction": 0.2},
        {"kind": "holdout", "train": 0.7, "val": 0.1, "test": 0.2, "max_train_rows": 500},
        {"kind": "fixed_test", "val_fraction": 0.15},
    ],
)
def test_splits_from_label_codes_equal_splits_from_the_labels(protocol):
    from tabrepro import splits

    rng = np.random.default_rng(4)
    labels = rng.choice(
        np.array(["- 50000", "50000+", "b", "10", "9"], dtype=object), 2000, p=[0.5, 0.2, 0.2, 0.05, 0.05]
    )
    folds = range(splits.n_folds(protocol))
    with_codes = [splits.make_split(protocol, 2000, fold=k, seed=7, y=labels, n_fixed_test_rows=300) for k in folds]
    original = splits.class_codes
    try:
        splits.class_codes = lambda y: y  # the labels themselves, as before
        with_labels = [
            splits.make_split(protocol, 2000, fold=k, seed=7, y=labels, n_fixed_test_rows=300) for k in folds
        ]
    finally:
        splits.class_codes = original
    assert [s.sha256 for s in with_codes] == [s.sha256 for s in with_labels]
