"""The reproduction audit: every `differs` cell of a committed record has a cause, and no cause is stale."""

from __future__ import annotations

import csv
import json
from dataclasses import fields
from pathlib import Path

import pytest

from conftest import REPO
from tabrepro.reporting.audit import (
    AUDIT_BEGIN,
    AUDIT_END,
    AuditError,
    check_coverage,
    heading_anchors,
    load_audit,
    update_audit,
)
from tabrepro.reporting.records import read_records
from tabrepro.reporting.scorecard import ScoreCell

FIELDS = tuple(f.name for f in fields(ScoreCell))  # the scorecard.csv columns

AUDIT_YAML = """
causes:
  partial-record: {kind: partial run, summary: only some folds, section: partial}
  folds: {kind: protocol difference, summary: the authors' folds overlap, section: the-authors-folds}
cells:
  - {paper: npt, table: table8, dataset: breast_cancer, metric: accuracy_pct, cause: folds}
"""
DOC = f"# Audit\n\n{AUDIT_BEGIN}\n{AUDIT_END}\n\n## The authors' folds\n\n## Partial\n"


def _cell(model: str, verdict_class: str, n: float = 10.0, metric: str = "accuracy_pct") -> dict[str, object]:
    row = dict.fromkeys(FIELDS, "")
    row.update(
        paper="npt",
        table="table8",
        metric=metric,
        column="breast_cancer",
        method=model.upper(),
        model=model,
        ours_mean=97.2,
        ours_se=0.6,
        n=n,
        n_expected=10,
        paper_value=94.73,
        paper_text="94.73 ± 0.89 (SE)",
        margin_text="±1",
        delta=2.47,
        ci_low=0.2 if verdict_class == "differs" else -1.0,
        ci_high=4.7,
        count_group="own",
        verdict_class=verdict_class,
        verdict=verdict_class,
    )
    return row


def _record(root: Path, name: str, cells: list[dict[str, object]]) -> None:
    directory = root / name
    (directory / "results" / "scorecard").mkdir(parents=True)
    (directory / "record.json").write_text(json.dumps({"name": name, "profile": "quick"}))
    with (directory / "results" / "scorecard" / "scorecard.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS)
        writer.writeheader()
        writer.writerows(cells)


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "audit.yaml").write_text(AUDIT_YAML)
    (tmp_path / "reproduction.md").write_text(DOC)
    return tmp_path


def _update(workspace: Path, check: bool = False) -> list[str]:
    return update_audit(workspace / "reproduction.md", workspace / "audit.yaml", workspace / "records", check=check)


def test_committed_records_are_fully_audited():
    """Fails when a record has a `differs` cell without a cause, a cause is stale, or the doc is not regenerated."""
    problems = update_audit(
        REPO / "docs" / "reproduction.md", REPO / "docs" / "audit.yaml", REPO / "records" / "runs", check=True
    )
    assert problems == [], "\n".join(problems)


def test_a_covered_cell_is_listed_with_its_cause_and_the_block_then_checks_clean(workspace):
    _record(workspace / "records", "quick", [_cell("mlp", "differs"), _cell("knn", "reproduced")])
    assert _update(workspace) == []
    text = (workspace / "reproduction.md").read_text()
    assert "| npt table8 | breast_cancer | MLP | accuracy_pct | 97.20 ± 0.60 (10/10)" in text
    assert "protocol difference: the authors' folds overlap ([why](#the-authors-folds))" in text
    assert "KNN" not in text  # reproduced cells are not audited
    assert _update(workspace, check=True) == []


def test_an_uncovered_cell_and_a_stale_rule_are_both_reported(workspace):
    _record(workspace / "records", "quick", [_cell("tabnet", "differs", metric="nll")])
    problems = _update(workspace, check=True)
    assert any("npt/table8/breast_cancer/tabnet/nll differs" in p for p in problems)
    assert any("cells[0]" in p and "matches no `differs` cell" in p for p in problems)
    assert any("audit block is stale" in p for p in problems)
    assert "**no cause recorded**" not in (workspace / "reproduction.md").read_text()  # check never writes


def test_a_partial_cell_takes_the_partial_cause_without_a_rule(workspace):
    _record(workspace / "records", "quick", [_cell("mlp", "differs"), _cell("npt", "differs", n=2.0)])
    assert _update(workspace) == []
    assert (
        "(2/10) | 94.73 ± 0.89 (SE) | ±1 | +2.47 [+0.2, +4.7] | own | partial run: only some folds"
        in (workspace / "reproduction.md").read_text()
    )


def test_a_cause_must_name_a_heading_of_the_document(workspace):
    (workspace / "audit.yaml").write_text(AUDIT_YAML.replace("section: the-authors-folds", "section: nowhere"))
    _record(workspace / "records", "quick", [_cell("mlp", "differs")])
    assert any("'nowhere' is not a heading anchor" in p for p in _update(workspace))


@pytest.mark.parametrize(
    "text, message",
    [
        ("causes: {}\ncells: []\nextra: 1\n", "exactly the keys"),
        (AUDIT_YAML.replace("kind: protocol difference", "kind: bad luck"), "'bad luck' is not one of"),
        (AUDIT_YAML.replace("cause: folds", "cause: nope"), "'nope' is not defined"),
        (AUDIT_YAML.replace("metric: accuracy_pct,", "metrc: accuracy_pct,"), "takes only"),
        (AUDIT_YAML.replace("partial-record", "partial"), "partial-record"),
        ("causes: [", "cannot read the audit"),
    ],
)
def test_a_malformed_audit_file_is_one_clear_error(tmp_path, text, message):
    (tmp_path / "audit.yaml").write_text(text)
    with pytest.raises(AuditError, match=message):
        load_audit(tmp_path / "audit.yaml")


def test_heading_anchors_follow_githubs_rule():
    anchors = heading_anchors("# A title\n### NPT breast cancer: TabNet's NLL\nnot a heading\n")
    assert anchors == {"a-title", "npt-breast-cancer-tabnets-nll"}


def test_coverage_reads_every_record(workspace):
    _record(workspace / "records", "a", [_cell("mlp", "differs")])
    _record(workspace / "records", "b", [_cell("catboost", "differs", metric="nll")])
    problems = check_coverage(load_audit(workspace / "audit.yaml"), read_records(workspace / "records"), DOC)
    assert problems == [
        "record 'b': npt/table8/breast_cancer/catboost/nll differs (differs) but no rule of "
        "docs/audit.yaml gives its cause"
    ]
