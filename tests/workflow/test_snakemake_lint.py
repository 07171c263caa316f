"""tests/snakemake_lint.py (run by `make lint`) reads Snakemake's lint report and fails on any lint
it does not keep on purpose."""

from __future__ import annotations

from snakemake_lint import ALLOWED, parse_lints, unexpected

REPORT = """\
Lints for snakefile /repo/workflow/rules/analysis.smk:
    * Mixed rules and functions in same snakefile.:
      Small one-liner functions used only once should be defined as lambda
      expressions.

Lints for rule train (line 7, /repo/workflow/rules/train.smk):
    * Specify a conda environment or container for each rule.:
      This way, the used software for each specific step is documented.
    * Shell command directly uses variable CLI from outside of the rule:
      It is recommended to pass all files as input and output.

Lints for rule availability (line 18, /repo/workflow/rules/data.smk):
    * No log directive defined:
      Without a log directive, all output will be printed to the terminal.
"""


def test_every_lint_of_the_report_is_read_with_its_rule_or_file():
    assert parse_lints(REPORT) == [
        ("snakefile /repo/workflow/rules/analysis.smk", "Mixed rules and functions in same snakefile."),
        ("rule train", "Specify a conda environment or container for each rule."),
        ("rule train", "Shell command directly uses variable CLI from outside of the rule"),
        ("rule availability", "No log directive defined"),
    ]
    assert parse_lints("Congratulations, your workflow is in a good condition!") == []


def test_only_the_lints_kept_on_purpose_pass():
    assert unexpected(parse_lints(REPORT)) == [
        ("snakefile /repo/workflow/rules/analysis.smk", "Mixed rules and functions in same snakefile."),
        ("rule availability", "No log directive defined"),
    ]
    assert all(len(reason) > 40 for reason in ALLOWED.values())  # each says why
