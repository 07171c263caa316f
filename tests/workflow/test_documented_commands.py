"""Every `snakemake ...` command that the docs, comments and messages show works as written.

The commands are read out of the files, so a new one is covered without touching this test. Each
runs with `-n` in a scratch copy of the workflow whose profiles all run one small job list (a dry
run checks the command line and its targets, not the size of a profile), and Snakemake's own
argument parser must take the workflow's target rules (`all`, `tables`) as targets: an option
taking several values (`--config`, `--forcerun`, `--until`) swallows a target written after it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, SNAKEMAKE, copy_workflow

# Where commands are documented: comments, Markdown, the Makefile's recipes, messages and docstrings.
DOC_GLOBS = (
    "Snakefile",
    "README.md",
    "docs/*.md",
    "Makefile",
    "workflow/**/*.smk",
    "workflow/**/*.yaml",
    "slurm/*.yaml",
    "src/tabrepro/**/*.py",
)
# A code span: `snakemake ...` (Markdown's may wrap onto the next line).
INLINE = re.compile(r"`(snakemake\b[^`]*)`")
# A whole line (code block, comment or recipe) that is a command, up to its comment or aligned note.
LINE = re.compile(r"^[#\s]*(?:\$\(BIN\)/)?(snakemake\b.*?)(?:\s{2,}|\s#|$)")
ASSIGNMENT = re.compile(r"^([A-Z]+)=(\S+)$")
MAKE_VARIABLE = re.compile(r"^(\w+)\s*[?:]?=\s*(\S+)\s*$")
# A template, not a command: "..." leaves arguments to the reader.
TEMPLATE = "..."
# One capital letter stands for a value the reader picks (`--cores N`, `profile=P`).
PLACEHOLDERS = ((re.compile(r"--cores [A-Z]\b"), "--cores 1"), (re.compile(r"\bprofile=[A-Z]\b"), "profile=quick"))
SMALL_SELECTION = {
    "npt": {"datasets": ["breast_cancer"], "models": ["xgboost", "npt"]},
    "bishop": {"datasets": [], "models": []},
}


@dataclass(frozen=True)
class Command:
    where: str  # file:line of its first appearance
    text: str  # as documented, shell variables of its code block filled in


def _make_values() -> dict[str, str]:
    """The Makefile's variables with a plain value; `$(shell ...)` ones (CORES) get one core."""
    values = {"CORES": "1"}
    for line in (REPO / "Makefile").read_text().splitlines():
        if (match := MAKE_VARIABLE.match(line)) and "$(" not in match.group(2):
            values.setdefault(match.group(1), match.group(2))
    return values


def _fill(text: str, variables: dict[str, str]) -> str:
    text = " ".join(text.split())
    text = re.sub(r"\$\(BIN\)/", "", text)
    text = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), m.group(0)), text)
    text = re.sub(r"\$([A-Z]+)\b", lambda m: variables.get(m.group(1), m.group(0)), text)
    for pattern, value in PLACEHOLDERS:
        text = pattern.sub(value, text)
    return text


def _commands_in(path: Path, make_values: dict[str, str]) -> list[tuple[int, str]]:
    """(line number, command) of every documented command in one file."""
    text = path.read_text()
    found = [(text.count("\n", 0, m.start()) + 1, _fill(m.group(1), make_values)) for m in INLINE.finditer(text)]
    if path.suffix == ".py":
        return found  # code there is not a command; its messages and docstrings use code spans
    variables = dict(make_values)  # `T=...` lines of a code block name what its commands use
    in_code = path.suffix != ".md"
    for number, line in enumerate(text.splitlines(), 1):
        if path.suffix == ".md" and line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            continue
        if match := ASSIGNMENT.match(line.strip()):
            variables[match.group(1)] = match.group(2)
        elif (match := LINE.match(line)) and "`" not in match.group(1):
            found.append((number, _fill(match.group(1), variables)))
    return found


def documented_commands() -> list[Command]:
    make_values = _make_values()
    files = sorted({path.resolve() for pattern in DOC_GLOBS for path in REPO.glob(pattern)})
    commands: dict[str, Command] = {}
    for path in files:
        for number, text in _commands_in(path, make_values):
            if TEMPLATE not in text:
                commands.setdefault(text, Command(f"{path.relative_to(REPO)}:{number}", text))
    return sorted(commands.values(), key=lambda c: (c.where.split(":")[0], int(c.where.split(":")[1])))


COMMANDS = documented_commands()
TARGET_RULES = re.findall(r"^rule (\w+):", (REPO / "Snakefile").read_text(), re.M)


def test_the_commands_are_found_where_they_are_documented():
    texts = {c.text for c in COMMANDS}
    places = {c.where.split(":")[0] for c in COMMANDS}
    assert "snakemake --cores 2 all" in texts  # the Snakefile's header
    assert any(t.startswith("snakemake --profile slurm") for t in texts)  # docs/cluster.md, the Slurm profile
    assert {"Snakefile", "README.md", "docs/cluster.md", "docs/dvc.md", "Makefile"} <= places
    assert TARGET_RULES[:2] == ["all", "tables"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_target_rules_in_a_documented_command_are_its_targets(command):
    from snakemake.cli import get_argument_parser

    if "$(" in command.text:
        pytest.skip("its arguments come from a command substitution")
    args = get_argument_parser().parse_args(shlex.split(command.text)[1:])
    swallowed = [rule for rule in TARGET_RULES if rule in shlex.split(command.text) and rule not in args.targets]
    assert not swallowed, f"{command.where}: {command.text!r} takes {swallowed} as an option's value; write `-- all`"


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory) -> Path:
    """The workflow, its Slurm profile (and ./slurm link) and params.yaml with small profiles."""

    def small_profiles(raw: dict) -> None:
        for profile in raw["profiles"].values():
            profile.update(papers=SMALL_SELECTION, folds=[0], max_configs=1)
            profile.pop("not_run", None)
        raw.pop("feature_sparsity", None)

    work = copy_workflow(tmp_path_factory.mktemp("documented"), small_profiles, with_profiles=True)
    (work / "slurm").symlink_to("workflow/profiles/slurm")
    return work


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_documented_command_dry_runs(command, workflow_copy):
    if "--lint" in command.text.split():
        pytest.skip("its exit status reports the lints it finds (tests/workflow/test_snakemake_lint.py runs it)")
    dry_run = re.sub(r"^snakemake\b", shlex.quote(str(SNAKEMAKE)) + " -n", command.text)
    run = subprocess.run(
        ["bash", "-c", dry_run],
        cwd=workflow_copy,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{os.environ['PATH']}"},
        timeout=300,
    )
    assert run.returncode == 0, f"{command.where}: {command.text!r} exits {run.returncode}:\n{run.stderr[-2000:]}"
