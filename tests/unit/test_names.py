"""Names from params.yaml become parts of paths and shell commands, so one rule checks them all at
validation (the schema's `name`): a hostile or path-like name stops `tabrepro validate` and
Snakemake with one line naming it and exit 2. The rules quote what they hand the shell, and
Snakemake, like the CLI, says on which line params.yaml stops being YAML."""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable

import pytest
import yaml

from conftest import REPO, copy_workflow, snakemake
from tabrepro.cli import main
from tabrepro.config import Params, ParamsError, read_params_file

RAW = read_params_file(REPO / "params.yaml")
HOSTILE = "bc$(touch PWNED)"
BAD_NAMES = [HOSTILE, "../escape", "a/b", "a..b", "-rf", "two words", ""]
# A name the rule keeps although it has every allowed punctuation mark (cf. the OpenML sources).
UNUSUAL_GOOD = "openml_361283_default-of-credit-card-clients.v2"


def _copy_of(mapping: dict, key: str) -> dict:
    return copy.deepcopy(mapping[key])


# Where a name is a key of params.yaml: (the key path as errors spell it, add a key with this name).
PLACES: dict[str, Callable[[dict, str], None]] = {
    "papers": lambda raw, name: raw["papers"].update({name: _copy_of(raw["papers"], "npt")}),
    "papers.npt.datasets": lambda raw, name: raw["papers"]["npt"]["datasets"].update(
        {name: _copy_of(raw["papers"]["npt"]["datasets"], "breast_cancer")}
    ),
    "papers.npt.tables": lambda raw, name: raw["papers"]["npt"]["tables"].update(
        {name: _copy_of(raw["papers"]["npt"]["tables"], "table8")}
    ),
    "profiles": lambda raw, name: raw["profiles"].update({name: _copy_of(raw["profiles"], "quick")}),
    "protocols": lambda raw, name: raw["protocols"].update({name: _copy_of(raw["protocols"], "bishop_holdout")}),
    "search_spaces": lambda raw, name: raw["search_spaces"].update({name: {}}),
}


def with_name(place: str, name: str) -> dict:
    raw = copy.deepcopy(RAW)
    PLACES[place](raw, name)
    return raw


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_name_is_refused_with_one_line_naming_it(place, name):
    Params(with_name(place, UNUSUAL_GOOD))  # the rule itself keeps names like the ones in use
    with pytest.raises(ParamsError) as error:
        Params(with_name(place, name))
    message = str(error.value)
    assert message.startswith(f"params.yaml: at {place}: {name!r} is not a usable name (")
    assert "\n" not in message


def test_the_names_in_use_follow_the_rule():
    """params.yaml's datasets and the registry's sources (used as directory names) pass as they are."""
    from tabrepro.data.registry import load_registry

    schema = yaml.safe_load((REPO / "src/tabrepro/data/params.schema.yaml").read_text())
    rule = re.compile(schema["$defs"]["name"]["pattern"])
    names = list(load_registry()) + [d for paper in RAW["papers"].values() for d in paper["datasets"]]
    assert "openml_361283_default-of-credit-card-clients" in names
    assert [n for n in names if not rule.search(n)] == []
    assert not rule.search("a/../b") and not rule.search(HOSTILE)


def hostile_dataset(raw: dict) -> None:
    """A dataset named to run a command, selected by the default profile."""
    raw["papers"]["npt"]["datasets"][HOSTILE] = _copy_of(raw["papers"]["npt"]["datasets"], "breast_cancer")
    raw["profiles"]["quick"]["papers"]["npt"]["datasets"] = [HOSTILE]


def test_validate_refuses_a_dataset_name_that_is_a_command(tmp_path, monkeypatch, capsys):
    raw = copy.deepcopy(RAW)
    hostile_dataset(raw)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(params), "validate"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"at papers.npt.datasets: {HOSTILE!r} is not a usable name" in lines[0]
    assert not (tmp_path / "PWNED").exists()


def test_snakemake_refuses_a_dataset_name_that_is_a_command(tmp_path):
    work = copy_workflow(tmp_path, hostile_dataset)
    run = snakemake(work, "-n", "--", "all", timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tabrepro: error: params.yaml: at papers.npt.datasets: ")
    assert not (work / "PWNED").exists()


def test_rules_quote_the_paths_they_pass_to_the_shell(tmp_path):
    """A results directory with a space reaches the CLI as one argument."""

    work = copy_workflow(tmp_path, lambda raw: raw["paths"].update(results="my results"))
    target = "my results/npt/breast_cancer/npt/fold0/metrics.json"
    run = snakemake(work, "-n", "--printshellcmds", "--", target, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    select = next(line for line in run.stdout.splitlines() if " select npt breast_cancer npt 0" in line)
    words = shlex.split(select)
    assert words[words.index("--output") + 1] == target


def test_a_yaml_syntax_error_names_where_the_unclosed_part_began(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("profile: quick\nseed: [0\npaths: {}\n")
    expected = r"line 3, column 6 not valid YAML: .*\(while parsing a flow sequence at line 2\)"
    with pytest.raises(ParamsError, match=expected):
        Params.from_file(bad)


def test_snakemake_names_the_line_of_a_yaml_syntax_error(tmp_path):
    work = copy_workflow(tmp_path)
    text = (work / "params.yaml").read_text()
    assert text.startswith("profile: quick\n")
    (work / "params.yaml").write_text(text.replace("profile: quick\n", "profile: quick: again\n", 1))
    run = snakemake(work, "-n", "--", "all", timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("tabrepro: error: params.yaml: line 1, column 15 not valid YAML: mapping values are not")
