"""How far a speed change moved BiSHop's results: train on WDBC under two versions of the code and
compare the runs. For changes that keep the mathematics and move only float rounding (a re-associated
product, a different solver start), where `compare_outputs.py`'s bit-for-bit check must fail.

    PYTHONPATH=OLD/src python -m benchmarks.rounding_drift run before.json   # e.g. git archive of the last commit
    python -m benchmarks.rounding_drift run after.json                       # this checkout
    python -m benchmarks.rounding_drift compare before.json after.json

`run` trains the default BiSHopConfig (--epochs, default 8; --threads, default 1) on scikit-learn's WDBC in the
benchmarks' row order (`benchmarks.steps.common.standardised_breast_cancer`), cut 60/20/20 into training,
validation and test rows, and writes the per-epoch losses, the selected epoch, and the test
probabilities, accuracy and ROC AUC. `compare` prints the largest differences; exit status 1 if the
selected epoch or a test metric differs. Training amplifies any rounding difference (Adam's first
steps turn near-zero gradients of either sign into full-size updates), so the yardstick for a
change's drift is the unchanged code with another float-rounding-only setting, e.g.
`--set entmax_solver=bisect` (the same entmax root to float precision).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run(out: Path, epochs: int, threads: int, settings: dict[str, object]) -> None:
    import torch
    from sklearn.metrics import roc_auc_score

    import tabrepro
    from benchmarks.steps.common import standardised_breast_cancer
    from tabrepro.io import write_json
    from tabrepro.models.bishop.config import BiSHopConfig
    from tabrepro.models.bishop.trainer import BiSHopTrainer, TabularTensors

    torch.set_num_threads(threads)
    x, y, n_train = standardised_breast_cancer(0.6)  # standardised on the training rows
    n = len(y)
    n_fit = int(0.8 * n)  # training and validation rows
    empty = torch.zeros((n, 0), dtype=torch.int64)
    part = [slice(0, n_train), slice(n_train, n_fit), slice(n_fit, n)]
    train, val, test = (TabularTensors(empty[s], x[s], y[s]) for s in part)
    config = BiSHopConfig(**{"device": "cpu", "max_epochs": epochs, **settings})
    trainer = BiSHopTrainer(config, "classification", n_numerical=x.shape[1], n_classes=2)
    fit = trainer.fit(train, val)
    probabilities = torch.softmax(trainer.outputs(test), -1)[:, 1].double()
    record = {
        "code": str(Path(tabrepro.__file__).parent),
        "epochs": epochs,
        "threads": threads,
        "settings": settings,
        "history": fit.history,
        "best_epoch": fit.best_epoch,
        "test_accuracy": float(((probabilities > 0.5).long() == test.y).double().mean()),
        "test_auc": float(roc_auc_score(test.y.numpy(), probabilities.numpy())),
        "test_probabilities": probabilities.tolist(),
    }
    write_json(out, record, indent=1, sort_keys=False)
    metrics = f"accuracy {record['test_accuracy']:.4f}, AUC {record['test_auc']:.4f}"
    print(f"{out}: best epoch {record['best_epoch']}, {metrics}")


def compare(a_path: Path, b_path: Path) -> int:
    a, b = (json.loads(p.read_text()) for p in (a_path, b_path))
    for key in sorted(set(a["history"][0]) & set(b["history"][0])):
        if not all(isinstance(r.get(key), float) for r in a["history"] + b["history"]):
            continue
        rel = [abs(x[key] - y[key]) / max(abs(x[key]), 1e-12) for x, y in zip(a["history"], b["history"])]
        print(f"{key}: relative difference, epoch by epoch: " + " ".join(f"{r:.1e}" for r in rel))
    probability_gap = max(abs(p - q) for p, q in zip(a["test_probabilities"], b["test_probabilities"]))
    print(f"test probabilities: largest difference {probability_gap:.2e}")
    same = True
    for key in ("best_epoch", "test_accuracy", "test_auc"):
        print(f"{key}: {a[key]} vs {b[key]}")
        same &= a[key] == b[key]
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="train on WDBC with the tabrepro on PYTHONPATH; write a JSON record")
    p.add_argument("out", type=Path)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="BiSHopConfig fields, e.g. entmax_solver=bisect"
    )
    p = sub.add_parser("compare", help="largest differences between two records")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        from benchmarks.steps.common import parse_overrides  # imports torch: not needed for `compare`

        try:
            settings = parse_overrides(args.set)
        except ValueError as error:
            raise SystemExit(str(error)) from None
        run(args.out, args.epochs, args.threads, settings)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
