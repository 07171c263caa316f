"""config/README.md, the guide to params.yaml: it names every section, and each of its examples,
added to the repository's params.yaml, passes the same checks a run makes."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from conftest import PARAMS_FILE, REPO, repo_raw_params
from tabrepro.config import Params, ParamsError

GUIDE = REPO / "config" / "README.md"
EXAMPLES = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S)]


def _merged(base: dict, extra: dict) -> dict:
    """`extra` laid over `base`: mappings key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def test_the_guide_names_every_section_of_params_yaml():
    sections = yaml.safe_load(PARAMS_FILE.read_text())
    headings = set(re.findall(r"^\*\*(\w+)\*\*:", GUIDE.read_text(), re.M))
    assert set(sections) <= headings, f"sections the guide does not explain: {sorted(set(sections) - headings)}"
    assert {key for example in EXAMPLES for key in example} == set(sections)


@pytest.mark.parametrize("example", EXAMPLES, ids=[next(iter(e)) for e in EXAMPLES])
def test_each_example_passes_the_checks_of_a_run(example):
    raw = _merged(repo_raw_params(), example)
    profile = next(iter(example["profiles"])) if "profiles" in example else None
    Params(raw, source=str(PARAMS_FILE), profile=profile)


def test_a_misspelt_example_would_be_caught():
    raw = _merged(repo_raw_params(), {"resources": {"training": {"sizin": "plan"}}})
    with pytest.raises(ParamsError, match="sizin"):
        Params(raw, source=str(PARAMS_FILE))
