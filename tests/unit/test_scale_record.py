"""docs/results/scale.md's full-size table is generated from the committed scale-bench runs."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.scale import record
from tabrepro.readme_blocks import replace_block

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(ROOT.glob(record.BLOCK.runs_glob))


def _run(tmp_path: Path, name: str, records: list[dict], rows_scale: float = 1.0, settings=None) -> Path:
    machine = {"cpu": "Some CPU", "isa": "AVX2", "cores": 2, "memory_mb": 24576, "commit": "b" * 40}
    payload = {"rows_scale": rows_scale, "threads": 1, "stage_timeout_s": 60.0, "machine": machine}
    if settings is not None:
        payload["settings"] = settings
    path = tmp_path / name
    path.write_text(json.dumps({**payload, "records": records}))
    return path


def _stage(dataset, stage, model=None, status="ok", wall=10.0, peak_mb=1024.0):
    return {
        "dataset": dataset,
        "rows": 1000,
        "stage": stage,
        "model": model,
        "status": status,
        "wall_s": wall,
        "peak_rss_mb": peak_mb,
        "tree_peak_rss_mb": peak_mb / 2,
    }


def test_the_scale_page_is_generated_from_the_committed_runs():
    assert RUNS, f"no committed scale-bench run matches {record.BLOCK.runs_glob}"
    block = record.render_block(RUNS, ROOT)
    assert replace_block(ROOT / record.BLOCK.page, block, record.BEGIN, record.END, check=True), (
        f"{record.BLOCK.page}'s scale block is stale: python -m benchmarks.scale.record"
    )


def test_stage_by_dataset_cells_say_time_memory_and_what_did_not_finish(tmp_path):
    first = _run(
        tmp_path,
        "a.json",
        [
            _stage("higgs", "generate"),
            _stage("higgs", "prepare", wall=100.0, peak_mb=2048.0),
            _stage("higgs", "train-config", "npt", status="timeout", wall=60.0, peak_mb=20 * 1024.0),
            _stage("higgs", "train-config", "bishop", status="running", wall=30.0),
        ],
    )
    second = _run(
        tmp_path,
        "b.json",
        [_stage("income", "prepare", wall=5.0), _stage("income", "train", "knn")],
        settings=["npt.recompute_blocks=true"],
    )
    block = record.render_block([first, second], tmp_path)
    lines = block.splitlines()
    assert lines[0] == record.BEGIN and lines[-1] == record.END
    assert "| stage | higgs (1,000 rows) | income (1,000 rows) |" in block
    assert "| prepare | 100 s, 2.0 GiB | 5 s, 1.0 GiB |" in block
    assert "| npt train-config | timeout after 60 s, 20.0 GiB (over 16 GiB) | not run |" in block
    assert "| knn train | not run | 10 s, 1.0 GiB |" in block
    assert "| bishop train-config | stopped after 30 s, 1.0 GiB | not run |" in block
    assert "| generate |" not in block and "Some CPU (AVX2)" in block and "bbbbbbbbbbbb" in block
    assert "with `npt.recompute_blocks=true`" in block and block.count(", with `") == 1  # a run's --set overrides


def test_a_reduced_run_is_refused_and_a_readme_without_markers_named(tmp_path, capsys):
    reduced = _run(tmp_path, "small.json", [_stage("higgs", "prepare")], rows_scale=0.01)
    readme = tmp_path / "README.md"
    readme.write_text(f"{record.BEGIN}\n{record.END}\n")
    assert record.main([str(reduced), "--page", str(readme)]) == 2
    assert "not a full-size run" in capsys.readouterr().err
    full = _run(tmp_path, "full.json", [_stage("higgs", "prepare")])
    assert record.main([str(full), "--page", str(readme), "--check"]) == 1  # stale, unchanged
    assert record.main([str(full), "--page", str(readme)]) == 0
    assert record.main([str(full), "--page", str(readme), "--check"]) == 0
    readme.write_text("no markers\n")
    assert record.main([str(full), "--page", str(readme)]) == 2
    assert "needs exactly one" in capsys.readouterr().err


def test_a_stage_measured_in_parts_says_so_and_names_each_later_part(tmp_path):
    parts = [
        {"status": "running", "wall_s": 9000.0, "peak_rss_mb": 0.0, "tree_peak_rss_mb": 6000.0, "commit": "b" * 40},
        {"status": "ok", "wall_s": 3000.0, "peak_rss_mb": 7000.0, "tree_peak_rss_mb": 6500.0, "commit": "c" * 40},
    ]
    stage = {**_stage("higgs", "train-config", "npt", wall=12000.0, peak_mb=7000.0), "parts": parts}
    path = _run(tmp_path, "parts.json", [stage])
    payload = json.loads(path.read_text())
    later = {"cpu": "Other CPU", "isa": "AVX-512", "cores": 2, "memory_mb": 24576, "commit": "c" * 40}
    path.write_text(json.dumps({**payload, "resumed": [later]}))
    block = record.render_block([path], tmp_path)
    assert "| npt train-config | 12,000 s, 6.8 GiB, in 2 parts |" in block
    assert "; resumed with tabrepro cccccccccccc on Other CPU (AVX-512)" in block
