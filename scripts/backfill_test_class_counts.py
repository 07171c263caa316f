"""Add the test rows' class counts to a run record's holdout results that predate them.

The scorecard's sampling SE of an AUROC (Hanley–McNeil) needs the test set's class counts, which
`tabrepro train` records in each result's `split` block. For a record made before that, this
script cuts the recorded split again from the prepared data (same seed, same protocol), checks that
its sha256 is the one the result recorded, counts the test rows per class and writes them in,
marked as counted afterwards. A split that does not match is left alone and named.

    TABREPRO_DATA_DIR=DATA python scripts/backfill_test_class_counts.py reproduce \\
        --protocol bishop=bishop_holdout_text

DATA must hold the prepared tables of the record's datasets (`tabrepro fetch` and `prepare`);
`--protocol PAPER=NAME` names the protocol the record's jobs of that paper ran under, where
params.yaml's has changed since.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from tabrepro.config import DEFAULT_PARAMS_FILE, Params
from tabrepro.data.table import load_table
from tabrepro.errors import InputError
from tabrepro.io import write_json
from tabrepro.reporting.records import RECORDS_DIR
from tabrepro.seeding import derive_seed
from tabrepro.splits import class_codes, make_split

SOURCE_NOTE = "counted afterwards from the recorded split (sha256 checked) by scripts/backfill_test_class_counts.py"


def _protocols(items: Sequence[str]) -> dict[str, str]:
    found = {}
    for item in items:
        paper, sep, name = item.partition("=")
        if not sep or not paper or not name:
            raise InputError(f"--protocol {item!r}: expected PAPER=PROTOCOL")
        found[paper] = name
    return found


def counts_for(params: Params, result: Mapping, protocol_name: str | None) -> dict[str, int]:
    """The test rows per encoded class of the result's split, after checking the split's sha256."""
    paper, dataset, fold = result["paper"], result["dataset"], int(result["fold"])
    protocol = params.raw["protocols"][protocol_name] if protocol_name else params.protocol(paper, dataset)
    table = load_table(params.processed_dir(result["source"]))
    labels = table.frame[table.schema.target].astype(str).to_numpy()
    seed = derive_seed(params.seed, paper, dataset, "split")
    split = make_split(protocol, table.schema.n_rows, fold=fold, seed=seed, y=labels,
                       n_fixed_test_rows=table.schema.n_fixed_test_rows)  # fmt: skip
    if split.sha256 != result["split"]["sha256"]:
        raise InputError(
            f"{paper}/{dataset} fold {fold}: the split cut again has sha256 {split.sha256[:12]}, the result "
            f"recorded {result['split']['sha256'][:12]}; pass the protocol it ran under with --protocol"
        )
    codes = class_codes(labels)[split.test]
    values, counts = np.unique(codes, return_counts=True)
    return {str(int(v)): int(n) for v, n in zip(values, counts, strict=True)}


def backfill(params: Params, record_dir: Path, protocols: Mapping[str, str]) -> list[Path]:
    """Write the counts into every classification result of one split that lacks them."""
    changed = []
    for path in sorted((record_dir / "results").glob("*/*/*/fold*/metrics.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        split = result.get("split") or {}
        kind = params.raw["protocols"].get(split.get("protocol"), {}).get("kind")
        if result.get("task") == "regression" or "test_class_counts" in split or kind in (None, "kfold"):
            continue
        split["test_class_counts"] = counts_for(params, result, protocols.get(result["paper"]))
        split["test_class_counts_source"] = SOURCE_NOTE
        write_json(path, result)
        changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record", help="the record's name under records/runs")
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS_FILE)
    parser.add_argument("--protocol", action="append", default=[], help="PAPER=PROTOCOL the record ran under")
    parser.add_argument("--records-dir", type=Path, default=RECORDS_DIR)
    args = parser.parse_args(argv)
    try:
        record_dir = args.records_dir / args.record
        profile = json.loads((record_dir / "record.json").read_text(encoding="utf-8"))["profile"]
        params = Params.from_file(args.params, profile=profile)
        for path in backfill(params, record_dir, _protocols(args.protocol)):
            print(path)
    except (InputError, OSError, KeyError, json.JSONDecodeError) as error:
        print(f"backfill_test_class_counts: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
