"""scripts/split_seed_choice.py: the authors' split rule, the doc block, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import REPO, load_script


@pytest.fixture(scope="module")
def script():
    return load_script("split_seed_choice")


@pytest.mark.parametrize("n_rows", [2584, 1055, 10])
def test_the_split_is_the_one_random_split_draws_under_the_seed(script, n_rows):
    train, val, test = script.authors_split(n_rows, 143)
    assert (len(train), len(val)) == (int(0.7 * n_rows), int(0.2 * n_rows))
    assert sorted(np.concatenate([train, val, test]).tolist()) == list(range(n_rows))
    sizes = [len(train), len(val), len(test)]
    parts = torch.utils.data.random_split(range(n_rows), sizes, generator=torch.Generator().manual_seed(143))
    assert [list(part.indices) for part in parts] == [train.tolist(), val.tolist(), test.tolist()]
    assert script.authors_split(n_rows, 66)[2].tolist() != test.tolist()


def test_the_audit_page_holds_the_block_rendered_from_the_committed_record(script):
    argv = ["--out", str(REPO / "records/selection_bias/split_seeds.json"), "--doc", str(REPO / "docs/reproduction.md")]
    assert script.main([*argv, "--check"]) == 0, "run `python scripts/split_seed_choice.py --doc` to regenerate it"


def test_the_authors_seeds_are_ranked_among_the_sweep_of_seeds():
    record = json.loads((REPO / "records/selection_bias/split_seeds.json").read_text())
    case = record["datasets"]["seismic_bumps"]
    sweep = [case["scores"][str(seed)] for seed in range(case["over_seeds"]["n"])]
    shipped = case["authors_seeds"]["config/seis.yaml"]
    assert shipped["rank"] == 1 + sum(score > shipped["test_auc"] for score in sweep)
    assert min(sweep) <= shipped["test_auc"] <= max(sweep)


def test_an_unknown_dataset_is_named_and_nothing_is_written(script, tmp_path, capsys):
    out = tmp_path / "seeds.json"
    assert script.main(["--dataset", "no_such_dataset", "--out", str(out)]) == 2
    assert "no_such_dataset" in capsys.readouterr().err and not out.exists()


def test_fewer_than_two_seeds_is_refused(script, tmp_path):
    out = tmp_path / "seeds.json"
    with pytest.raises(SystemExit) as stop:
        script.main(["--dataset", "qsar", "--seeds", "1", "--out", str(out)])
    assert stop.value.code == 2 and not out.exists()
