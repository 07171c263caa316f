"""`tabrepro record`: snapshot a run into the committed records and regenerate what is built
from them (the README's scorecard summary, docs/results/records.md, the audit table in
docs/reproduction.md, and where the repository has its plan page, the shipped cost calibration
and docs/results/plan.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabrepro.cli.common import AddCommand, load_params
from tabrepro.errors import InputError
from tabrepro.plan import PLAN_PAGE, README_BEGIN, write_calibration
from tabrepro.plan import update_readme as update_plan_block


def _plan_page(root: Path) -> Path | None:
    """The repository's generated plan page, when it has one (a checkout of tabrepro does)."""

    page = root / PLAN_PAGE
    return page if page.is_file() and README_BEGIN in page.read_text(encoding="utf-8") else None


def cmd_record(args: argparse.Namespace) -> None:
    """Snapshot a run (with NAME), then regenerate the README's summary and plan blocks, the
    records page and the audit table."""
    from tabrepro.reporting.audit import AUDIT_DOC, AUDIT_FILE, update_audit  # deferred: loads pandas, scipy

    # deferred: loads pandas, scipy
    from tabrepro.reporting.records import RECORDS_DIR, RESULTS_PAGE, restore, snapshot, update_pages

    if args.rejudge and (args.check or args.restore):
        raise InputError("record --rejudge cannot be combined with --check or --restore")
    if args.seal and (args.check or args.restore or args.rejudge or not args.name):
        raise InputError("record --seal needs the record's NAME and no --check, --restore or --rejudge")
    root = Path(args.readme).parent  # the repository whose docs/ the README sits beside
    audit = {"doc": root / AUDIT_DOC, "audit_file": root / AUDIT_FILE, "records_dir": root / RECORDS_DIR}
    if args.check:
        from tabrepro.reporting.records import check_manifest, read_records, rejudge  # deferred: loads pandas, scipy

        problems = update_audit(**audit, check=True)
        checks = [check_manifest(directory) for directory, _ in read_records(audit["records_dir"])]
        unsound = {c.directory for c in checks if c.missing_manifest or c.inputs}
        # A record whose inputs changed gets no advice to rejudge: that would judge the changed results.
        stale_cards = [p for p in rejudge(args.params, audit["records_dir"], check=True) if p.parents[2] not in unsound]
        if stale_cards:
            names = ", ".join(sorted({str(path.parent.parent.parent) for path in stale_cards}))
            problems.insert(0, f"stale scorecards in {names}; run `tabrepro record --rejudge` to judge them again")
        if not update_pages(args.readme, audit["records_dir"], check=True):
            stale = f"{args.readme} or {root / RESULTS_PAGE}: a records block is stale"
            problems.insert(0, f"{stale}; run `tabrepro record` to regenerate it")
        plan_page = _plan_page(root)
        if plan_page and not write_calibration(audit["records_dir"].parent, args.params, check=True):
            problems.insert(0, "the shipped cost calibration is stale; run `tabrepro record` to regenerate it")
        elif plan_page and not update_plan_block(plan_page, check=True, params_file=args.params):
            problems.insert(0, f"{plan_page}: the plan block is stale; run `tabrepro record` to regenerate it")
        problems[:0] = [line for c in checks for line in c.problems()]
        if problems:
            raise InputError("record --check: " + "; ".join(problems))
        current = f"{args.readme}, {root / RESULTS_PAGE}, every record's scorecard: current"
        current += "; every record's files match its manifest"
        print(f"{current}; {audit['doc']}: every differing cell has a cause")
        return
    if args.rejudge:
        from tabrepro.reporting.records import rejudge  # deferred: loads pandas, scipy

        for path in rejudge(args.params, audit["records_dir"]):
            print(path)
    if args.seal:
        from tabrepro.reporting.records import seal  # deferred: loads pandas, scipy

        print(f"{seal(args.name, audit['records_dir'])}: written from the record's files as they are")
        return
    if args.restore:
        if not args.name:
            raise InputError("record --restore needs the record's NAME")
        summary = restore(load_params(args), args.name, records_dir=audit["records_dir"])
        reasons: dict[str, int] = {}
        for _, reason in summary.skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
        print(f"{args.name}: {len(summary.restored)} result(s) restored into the run")
        for reason, count in sorted(reasons.items()):
            print(f"  {count} left alone: {reason}")
        return
    if args.name:
        target = snapshot(
            load_params(args), args.name, records_dir=audit["records_dir"], workflow_wall_time_s=args.wall_time
        )
        print(f"{target}: recorded")
    update_pages(args.readme, audit["records_dir"])
    plan_page = _plan_page(root)
    if plan_page:  # the compute plan is calibrated on the records
        write_calibration(audit["records_dir"].parent, args.params)
        update_plan_block(plan_page, params_file=args.params)
    for problem in update_audit(**audit, check=False):
        print(f"tabrepro record: warning: {problem}", file=sys.stderr)
    print(f"{args.readme}, {root / RESULTS_PAGE} and {audit['doc']} regenerated from the records")


def register(add: AddCommand) -> None:
    """The `record` subcommand and its options."""
    p = add(
        "record",
        cmd_record,
        "copy the profile's run outputs (metrics.json with provenance, fetch "
        "records, tables, scorecard) into records/runs/NAME; regenerate the README's summary, "
        "docs/results/records.md and docs/reproduction.md's table of differing cells (causes from docs/audit.yaml)",
    )
    p.add_argument("name", nargs="?", help="record name (e.g. quick, reproduce); omit to only regenerate the docs")
    p.add_argument("--wall-time", type=float, help="the workflow's wall time in seconds, to record beside it")
    p.add_argument("--readme", type=Path, default=Path("README.md"), help="README to update (default: README.md)")
    p.add_argument(
        "--check",
        action="store_true",
        help="only check that both, and every record's scorecard, are current, that every record's files "
        "match its manifest, and that every differing cell of every record has a cause",
    )
    p.add_argument(
        "--rejudge",
        action="store_true",
        help="judge every record's results again with the current verdict rules and reference numbers "
        "(rewrites each record's scorecard and tables and their manifest entries, never its results; a "
        "record whose results differ from its manifest is refused), then regenerate the docs",
    )
    p.add_argument(
        "--seal",
        action="store_true",
        help="write record NAME's manifest (the sha256 of each of its files) from its files as they are: "
        "only for a record that has none and whose files are known to be a run's (`record NAME` and "
        "`--rejudge` keep manifests current themselves)",
    )
    p.add_argument(
        "--restore",
        action="store_true",
        help="put record NAME's results back into the active profile's run (same job, parameters and "
        "split only; never overwriting), to continue a long run in a fresh clone",
    )
