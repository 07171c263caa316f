"""Run records: a snapshot regenerates its scorecard, and the pages built from the records (the
README's summary, docs/results/records.md) are never stale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from tabrepro.cli import main
from tabrepro.reporting.records import (
    README_BEGIN,
    README_END,
    RECORDS_DIR,
    RESULTS_PAGE,
    SUMMARY_BEGIN,
    SUMMARY_END,
    RecordError,
    read_records,
    render_block,
    render_summary,
    restore,
    snapshot,
    update_pages,
)


def test_the_records_pages_are_current():
    """Fails when a record changed (or was added) without regenerating the README's summary and
    the records page."""
    assert update_pages(REPO / "README.md", REPO / RECORDS_DIR, check=True), (
        f"README.md's summary or {RESULTS_PAGE} differs from {RECORDS_DIR}: run `tabrepro record --check` "
        "to see, and `tabrepro record` to regenerate them"
    )


def test_every_records_scorecard_is_current():
    """Fails when a record's scorecard is not what its results give under today's verdict rules,
    reference numbers and implementation checks (records/fidelity)."""
    from tabrepro.reporting.records import rejudge

    stale = rejudge(REPO / "params.yaml", REPO / RECORDS_DIR, check=True)
    assert not stale, f"stale scorecards: {[str(p) for p in stale]}; run `tabrepro record --rejudge`"


def test_rejudge_rewrites_a_stale_scorecard_and_check_names_it(tmp_path):
    import shutil

    from tabrepro.reporting.records import rejudge

    records = tmp_path / "runs"
    shutil.copytree(REPO / RECORDS_DIR / "bishop_cpu", records / "bishop_cpu")
    card = records / "bishop_cpu/results/scorecard/scorecard.md"
    judged = card.read_text()
    card.write_text(judged.replace("differs", "reproduced"))
    assert rejudge(REPO / "params.yaml", records, check=True) == [card]
    assert card.read_text() != judged  # check writes nothing
    rejudge(REPO / "params.yaml", records)
    assert card.read_text() == judged
    assert rejudge(REPO / "params.yaml", records, check=True) == []


class _FakeParams:
    """The few Params accessors a snapshot reads, over a hand-made results tree."""

    profile_name = "tiny"
    papers = ["npt"]

    def __init__(self, root: Path) -> None:
        self.results_dir = root / "results"

    def jobs(self):
        from tabrepro.config import Job

        return [
            Job("npt", "breast_cancer", "knn", 0),
            Job("npt", "breast_cancer", "knn", 1),
            Job("npt", "boston", "knn", 0),
        ]

    @property
    def layout(self):
        from tabrepro.layout import RunLayout

        return RunLayout(self.results_dir.parent / "data", self.results_dir, self.results_dir.parent / "logs")

    def job_dir(self, job):
        return self.layout.job_dir.path(job)

    def tables_dir(self, paper):
        return self.results_dir / "tables" / paper

    def raw_dir(self):
        return self.results_dir.parent / "data" / "raw"

    def selected_datasets(self, paper):
        return ["breast_cancer"]

    def source_of(self, paper, dataset):
        return "breast_cancer"


def _write(path: Path, payload) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))


def test_snapshot_copies_the_run_and_renders_counts(tmp_path):
    params = _FakeParams(tmp_path / "run")
    provenance = {"git_commit": "a" * 40, "cpu": {"model": "Test CPU", "isa_level": "AVX2"}}
    _write(params.job_dir(params.jobs()[0]) / "metrics.json", {"wall_time_s": 2.5, "provenance": provenance})
    _write(params.tables_dir("npt") / "table10.md", "| t |")
    summary = {
        "papers": {
            "npt": {
                "all": {
                    "own": {
                        "reproduced": 1,
                        "differs": 0,
                        "inconclusive": 0,
                        "not_comparable": 0,
                        "not_run": 1,
                        "cells": 2,
                    },
                    "quoted": {"cells": 0},
                }
            }
        },
        "unobtainable": {"npt": {"boston": "no network"}},
    }
    for name, payload in (("scorecard.md", "# card"), ("scorecard.csv", "a,b"), ("summary.json", summary)):
        _write(params.results_dir / "scorecard" / name, payload)

    target = snapshot(params, "tiny", records_dir=tmp_path / "records", workflow_wall_time_s=75)

    from tabrepro.reporting.records import check_manifest

    assert check_manifest(target).ok  # written with the record: every file's sha256
    assert (target / "results/npt/breast_cancer/knn/fold0/metrics.json").is_file()
    assert not (target / "results/npt/breast_cancer/knn/fold1").exists()  # that job never ran
    assert (target / "results/tables/npt/table10.md").read_text() == "| t |"
    record = json.loads((target / "record.json").read_text())
    assert record["results"] == 1 and record["jobs"] == 3 and record["hardware"] == ["Test CPU (AVX2)"]
    assert record["unobtainable_jobs"] == 1  # boston's job; breast cancer fold 1 simply did not run
    block = render_block(read_records(tmp_path / "records"), tmp_path)
    assert "1 of 3 jobs' results (1 more on datasets not obtainable here; 1 not run)" in block
    assert "| npt | all | own | 1 | 0 | 0 | 0 | 0 | 0 | 1 | 2 |" in block and "1 min 15 s" in block
    assert "npt/boston" in block and block.startswith(README_BEGIN) and block.endswith(README_END)

    summary_block = render_summary(read_records(tmp_path / "records"), tmp_path)
    assert "| `tiny` | 1 of 3 | npt | paper's protocol | 1 | 0 | 0 | 0 | 0 | 0 | 1 | 2 |" in summary_block
    assert f"({RESULTS_PAGE.as_posix()})" in summary_block

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{SUMMARY_BEGIN}\nold\n{SUMMARY_END}\noutro\n")
    page = tmp_path / RESULTS_PAGE
    page.parent.mkdir(parents=True)
    page.write_text(f"# records\n{README_BEGIN}\nold\n{README_END}\n")
    assert not update_pages(readme, tmp_path / "records", check=True)
    assert update_pages(readme, tmp_path / "records")
    assert "| `tiny` |" in readme.read_text() and readme.read_text().startswith("intro\n")
    assert "| npt | all | own |" in page.read_text() and "(../../records/tiny/results/scorecard/" in page.read_text()
    assert update_pages(readme, tmp_path / "records", check=True)


def test_snapshot_refuses_a_run_without_scorecard(tmp_path):
    params = _FakeParams(tmp_path / "run")
    with pytest.raises(RecordError, match="scorecard"):
        snapshot(params, "tiny", records_dir=tmp_path / "records")
    assert not (tmp_path / "records" / "tiny").exists()


def test_snapshot_refuses_to_replace_another_profiles_record(tmp_path):
    params = _FakeParams(tmp_path / "run")
    for name in ("scorecard.md", "scorecard.csv", "summary.json"):
        _write(params.results_dir / "scorecard" / name, {} if name.endswith(".json") else "x")
    kept = tmp_path / "records" / "tiny" / "record.json"
    _write(kept, {"name": "tiny", "profile": "reproduce", "results": 65})
    with pytest.raises(RecordError, match=r"holds profile 'reproduce', not the active 'tiny'.*--profile reproduce"):
        snapshot(params, "tiny", records_dir=tmp_path / "records")
    assert json.loads(kept.read_text())["results"] == 65  # the other profile's record is untouched
    assert [p.name for p in kept.parent.parent.iterdir()] == ["tiny"]  # and no staging left behind
    kept.write_text(json.dumps({"profile": "tiny"}))
    assert snapshot(params, "tiny", records_dir=tmp_path / "records") == kept.parent  # its own profile: replaced


@pytest.mark.parametrize("name", ["../victim", "a/b", "..", "-x", ".hidden", ""])
def test_a_record_name_that_is_not_one_path_component_is_refused_before_anything_is_touched(tmp_path, name):
    """snapshot replaces records_dir/NAME wholesale: a name that climbs out must never get there."""
    params = _FakeParams(tmp_path / "run")
    for file in ("scorecard.md", "scorecard.csv", "summary.json"):
        _write(params.results_dir / "scorecard" / file, {} if file.endswith(".json") else "x")
    victim = tmp_path / "victim" / "keep.txt"
    _write(victim, "x")
    records = tmp_path / "records"
    for call in (snapshot, restore):
        with pytest.raises(RecordError, match="record name"):
            call(params, name, records_dir=records)
    assert victim.read_text() == "x" and not records.exists()


def test_a_bad_record_name_is_one_line_and_exit_2_on_the_cli(capsys):
    assert main(["record", "../../etc", "--restore"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "tabrepro record: error: record name '../../etc': use letters, digits, '_' and '-' (64 at most), "
        "starting with a letter or digit"
    ]


def test_record_check_through_the_cli(capsys):
    assert main(["record", "--check", "--readme", str(REPO / "README.md")]) == 0
    assert "current" in capsys.readouterr().out


def test_record_check_fails_naming_a_differing_cell_without_a_cause(tmp_path, capsys):
    """The CLI's --check covers the audit too: a record whose differing cell has no cause is exit 2."""
    import csv
    from dataclasses import fields

    from tabrepro.reporting.audit import AUDIT_BEGIN, AUDIT_END
    from tabrepro.reporting.scorecard import ScoreCell

    record = tmp_path / RECORDS_DIR / "tiny"
    (record / "results" / "scorecard").mkdir(parents=True)
    (record / "record.json").write_text(json.dumps({"name": "tiny", "profile": "quick", "git_commits": [],
                                                    "hardware": [], "jobs": 1, "results": 1,
                                                    "job_wall_time_s": 1.0}))  # fmt: skip
    row = dict.fromkeys((f.name for f in fields(ScoreCell)), "")
    row.update(paper="npt", table="table9", column="breast_cancer", model="tabnet", method="TabNet", metric="nll",
               ours_mean=0.1, n=10, n_expected=10, delta=-0.1, ci_low=-0.2, ci_high=-0.05, verdict_class="differs",
               verdict="differs (ours lower)", count_group="own")  # fmt: skip
    with (record / "results" / "scorecard" / "scorecard.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, list(row))
        writer.writeheader()
        writer.writerow(row)
    summary = {"papers": {}, "unobtainable": {}}
    (record / "results" / "scorecard" / "summary.json").write_text(json.dumps(summary))
    (tmp_path / RESULTS_PAGE).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "docs" / "reproduction.md").write_text(f"# x\n{AUDIT_BEGIN}\n{AUDIT_END}\n\n## Partial\n")
    (tmp_path / "docs" / "audit.yaml").write_text(
        "causes:\n  partial-record: {kind: partial run, summary: some folds, section: partial}\ncells: []\n"
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{SUMMARY_BEGIN}\n{SUMMARY_END}\n")
    (tmp_path / RESULTS_PAGE).write_text(f"# records\n{README_BEGIN}\n{README_END}\n")
    assert main(["record", "--readme", str(readme)]) == 0
    assert main(["record", "--check", "--readme", str(readme)]) == 2
    assert "npt/table9/breast_cancer/tabnet/nll differs" in capsys.readouterr().err


class _RestoreParams(_FakeParams):
    """_FakeParams with the job digest and split manifests a restore checks."""

    digest = "d" * 16

    def jobs(self):
        from tabrepro.config import Job

        return [Job("npt", "breast_cancer", "knn", k) for k in range(4)]

    def job_digest(self, job):
        return self.digest


def test_restore_puts_back_only_the_same_job_on_the_same_split(tmp_path):
    from tabrepro.config import Job
    from tabrepro.reporting.records import restore, write_manifest

    records = tmp_path / "records"
    params = _RestoreParams(tmp_path / "run")
    recorded_in = _RestoreParams(records / "long")  # the record is laid out like a run

    def record(fold: int, **changes) -> dict:
        result = {"params_digest": params.digest, "split": {"sha256": f"split{fold}"}, "metrics": {"fold": fold}}
        result.update(changes)
        _write(recorded_in.layout.job_metrics.path(Job("npt", "breast_cancer", "knn", fold)), result)
        return result

    kept = record(0)
    record(1, params_digest="0" * 16)  # recorded under other parameters
    record(2, split={"sha256": "another split"})
    record(3)
    _write(recorded_in.results_dir / "npt/breast_cancer/rf/fold0/metrics.json", {"params_digest": params.digest})
    existing = params.layout.job_metrics.path(Job("npt", "breast_cancer", "knn", 3))
    _write(existing, {"metrics": "this run's own"})
    write_manifest(records / "long")  # as `tabrepro record` writes it

    with pytest.raises(RecordError, match="no such record"):
        restore(params, "long", records_dir=tmp_path / "elsewhere")
    early = restore(params, "long", records_dir=records)  # no split on disk yet: nothing comes back
    assert (
        early.restored == []
        and ("npt/breast_cancer/knn/fold0/metrics.json", "no split on disk yet (make the splits first)")
        in early.skipped
    )

    manifest = params.layout.split_manifest.path(paper="npt", dataset="breast_cancer")
    _write(manifest, {"folds": [{"fold": k, "sha256": f"split{k}"} for k in range(4)]})
    summary = restore(params, "long", records_dir=records)
    target = params.layout.job_metrics.path(Job("npt", "breast_cancer", "knn", 0))
    assert summary.restored == [target]
    assert json.loads(target.read_text()) == kept
    reasons = dict(summary.skipped)
    assert reasons["npt/breast_cancer/knn/fold1/metrics.json"].startswith("its parameters changed")
    assert reasons["npt/breast_cancer/knn/fold2/metrics.json"] == "its split differs from the one on disk"
    assert reasons["npt/breast_cancer/knn/fold3/metrics.json"] == "already in the run"
    assert reasons["npt/breast_cancer/rf/fold0/metrics.json"] == "not a job of profile 'tiny'"
    assert json.loads(existing.read_text()) == {"metrics": "this run's own"}
    assert not params.layout.job_metrics.path(Job("npt", "breast_cancer", "knn", 1)).exists()


def test_the_resumable_state_of_an_unfinished_job_travels_with_the_record(tmp_path):
    from tabrepro.config import Job
    from tabrepro.reporting.records import restore

    params = _RestoreParams(tmp_path / "run")
    finished, running = Job("npt", "breast_cancer", "knn", 0), Job("npt", "breast_cancer", "knn", 1)
    _write(params.layout.job_metrics.path(finished), {"params_digest": params.digest, "split": {"sha256": "s0"}})
    repeat = params.job_dir(running) / "config2/state/0123abcd/repeat1/repeat.json"
    _write(repeat, {"repeat": 1, "test": {"auroc": 0.9}})
    _write(repeat.with_name("test_outputs.npy"), "the repeat's test outputs")
    _write(params.job_dir(running) / "config2/state/0123abcd/repeat2/state.pt", "a checkpoint, not recorded")
    _write(params.job_dir(finished) / "config0/state/feed/repeat1/repeat.json", {"repeat": 1, "test": {}})
    score = params.job_dir(running) / "state/tuning/5eed5eed5eed/config7.json"
    _write(score, {"index": 7, "config": {}, "metrics": {"auroc": 0.8}})
    _write(params.job_dir(running) / "state/tuning/5eed5eed5eed/config7/pieces.npz", "model state, not recorded")
    _write(params.job_dir(running) / "state/finished.json", {"fold": 1})
    _write(params.job_dir(running) / "state/finished_predictions.npz", "the finished fold's test rows")
    _write(params.job_dir(finished) / "state/tuning/5eed5eed5eed/config0.json", {"index": 0})
    for name in ("scorecard.md", "scorecard.csv"):
        _write(params.results_dir / "scorecard" / name, "x")
    _write(params.results_dir / "scorecard/summary.json", {"papers": {}})

    target = snapshot(params, "long", records_dir=tmp_path / "records")
    copied = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if "state" in p.parts and p.is_file())
    assert copied == [
        "results/npt/breast_cancer/knn/fold1/config2/state/0123abcd/repeat1/repeat.json",
        "results/npt/breast_cancer/knn/fold1/config2/state/0123abcd/repeat1/test_outputs.npy",
        "results/npt/breast_cancer/knn/fold1/state/finished.json",
        "results/npt/breast_cancer/knn/fold1/state/finished_predictions.npz",
        "results/npt/breast_cancer/knn/fold1/state/tuning/5eed5eed5eed/config7.json",
    ]
    assert json.loads((target / "record.json").read_text())["state_files_of_unfinished_jobs"] == 5

    fresh = _RestoreParams(tmp_path / "fresh")
    summary = restore(fresh, "long", records_dir=tmp_path / "records")
    placed = fresh.job_dir(running) / "config2/state/0123abcd/repeat1/repeat.json"
    assert placed in summary.restored and json.loads(placed.read_text()) == {"repeat": 1, "test": {"auroc": 0.9}}
    assert json.loads((fresh.job_dir(running) / "state/tuning/5eed5eed5eed/config7.json").read_text())["index"] == 7
    assert (fresh.job_dir(running) / "state/finished.json").is_file() and len(summary.restored) == 5
    assert (fresh.job_dir(running) / "state/finished_predictions.npz").read_text() == "the finished fold's test rows"
    placed.write_text('{"repeat": 1, "test": {"auroc": 0.5}}')  # the run's own file is never overwritten
    restore(fresh, "long", records_dir=tmp_path / "records")
    assert json.loads(placed.read_text())["test"]["auroc"] == 0.5


def test_a_record_keeps_the_jobs_test_predictions_up_to_its_cap_and_restores_them(tmp_path, monkeypatch):
    """Each result's test predictions travel with it while the record's cap allows (records are
    committed to git); a file past the cap is named in record.json with the reason."""
    from tabrepro.config import Job
    from tabrepro.reporting import records

    params = _RestoreParams(tmp_path / "run")
    jobs = [Job("npt", "breast_cancer", "knn", k) for k in range(4)]
    sizes = {0: 600, 1: 500, 2: None, 3: 300}  # fold 2: a job run before predictions were written
    for job in jobs:
        metrics = params.layout.job_metrics.path(job)
        _write(metrics, {"params_digest": params.digest, "split": {"sha256": f"split{job.fold}"}})
        if sizes[job.fold] is not None:
            _write(params.layout.job_test_predictions.path(job), str(job.fold) * sizes[job.fold])
    for name in ("scorecard.md", "scorecard.csv"):
        _write(params.results_dir / "scorecard" / name, "x")
    _write(params.results_dir / "scorecard/summary.json", {"papers": {}})
    monkeypatch.setattr(records, "PREDICTIONS_CAP_BYTES", 1000)

    target = snapshot(params, "capped", records_dir=tmp_path / "records")
    kept = sorted(p.relative_to(target / "results").parent.name for p in target.rglob("test_predictions.npz"))
    assert kept == ["fold0", "fold3"]  # fold 1 would pass the cap; fold 3 still fits
    summary = json.loads((target / "record.json").read_text())["test_predictions"]
    assert summary["kept"] == 2 and summary["bytes"] == 900 and summary["cap_bytes"] == 1000
    assert summary["results_without"] == 1  # fold 2
    (left_out, reason), *others = summary["left_out"].items()
    assert left_out == "npt/breast_cancer/knn/fold1/test_predictions.npz" and others == []
    assert reason.startswith("500 bytes would pass the record's cap of 1000 bytes of test predictions")

    fresh = _RestoreParams(tmp_path / "fresh")
    _write(
        fresh.layout.split_manifest.path(paper="npt", dataset="breast_cancer"),
        {"folds": [{"fold": k, "sha256": f"split{k}"} for k in range(4)]},
    )
    restored = records.restore(fresh, "capped", records_dir=tmp_path / "records")
    assert len(restored.restored) == 4  # the results
    assert fresh.layout.job_test_predictions.path(jobs[3]).read_text() == "3" * 300
    assert not fresh.layout.job_test_predictions.path(jobs[1]).exists()  # left out of the record
