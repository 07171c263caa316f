"""The authors' side of a BiSHop fidelity case: their Exp_BiSHop.train run to the end.

    python -m benchmarks.versus.fidelity_bishop_driver SPEC.json

SPEC (written by benchmarks.versus.fidelity) holds their checkout ("repo"), the rows ("x",
"y", "train"/"val"/"test": the harness's split, not theirs), the settings in their option names,
the seed, torch threads and where to write the result. The process builds their Exp_BiSHop with
their bishop.py arguments, hands it the rows as the loaders their `_get_data` would return
(training rows shuffled by a DataLoader, validation and test rows in order, batch 32), and runs
their `train`: per epoch their batch loop (AdamW, gradient-norm clipping 1.0), their validation
loss, ReduceLROnPlateau on it and their EarlyStopping, which saves the best validation-loss
weights and loads them back at the end. It then runs their model once on the test rows and
writes the class probabilities, for the caller to score with our metric code. Their seed only
seeds their own split function, which never runs here; the process seeds torch with the spec's
seed before their model is built, so that a run can be repeated.

Their per-epoch test report (`Exp_BiSHop.test`, through torcheval, stubbed) only prints and logs;
it is replaced by a no-op while training. numpy 2 removed `np.Inf`, which their EarlyStopping
reads; it is put back as `np.inf`. It imports nothing of tabrepro.models.bishop.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.versus.driver import _bishop_args, serve

__all__ = ["main", "train_bishop"]


def _numpy_inf_alias() -> None:
    import numpy

    if "Inf" not in vars(numpy):
        numpy.Inf = numpy.inf  # type: ignore[attr-defined]


def _counting_early_stopping(base: type) -> type:
    """Their EarlyStopping, also noting the epoch (1-based) whose weights it saved last."""

    class Counting(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.calls, self.best_epoch = 0, None

        def __call__(self, val_loss: float, model: Any, path: str) -> None:
            self.calls += 1
            super().__call__(val_loss, model, path)

        def save_checkpoint(self, val_loss: float, model: Any, path: str) -> None:
            super().save_checkpoint(val_loss, model, path)
            self.best_epoch = self.calls
            Counting.last = self

    return Counting


def train_bishop(spec: dict[str, Any]) -> dict[str, Any]:
    """Their BiSHop trained to the end on the spec's rows; test probabilities and the best epoch."""
    import exp.exp_bishop as exp_module
    import torch
    import torch.utils.data as data_utils

    settings, workdir, seed = spec["settings"], Path(spec["workdir"]), int(spec["seed"])
    x = torch.tensor(spec["x"], dtype=torch.float64)
    y = torch.tensor(spec["y"], dtype=torch.long)
    args = _bishop_args(settings, x.shape[1])
    args.train_epochs = int(settings["epochs"])
    args.checkpoints = str(workdir / "checkpoints")
    args.seed = seed
    torch.manual_seed(seed)

    def part(role: str, shuffle: bool) -> tuple[Any, Any]:
        index = torch.tensor(spec[role], dtype=torch.long)
        rows = data_utils.TensorDataset(torch.zeros((len(index), 0), dtype=torch.long), x[index], y[index])
        return data_utils.DataLoader(rows, batch_size=int(settings["batch_size"]), shuffle=shuffle), x[index]

    exp_module.EarlyStopping = _counting_early_stopping(exp_module.EarlyStopping)
    experiment = exp_module.Exp_BiSHop(args, None)
    loaders = {role: part(role, role == "train") for role in ("train", "val", "test")}
    experiment._get_data = lambda: [[None, loader, None, rows, None] for loader, rows in loaders.values()]
    experiment.test = lambda *a, **k: (math.nan, math.nan, math.nan)  # their per-epoch report only
    start = time.perf_counter()
    model, _, _, _ = experiment.train(f"fidelity-seed{seed}")
    seconds = time.perf_counter() - start
    stopping = exp_module.EarlyStopping.last
    test_rows = loaders["test"][1]
    model.eval()
    with torch.no_grad():
        logits = model(torch.zeros((len(test_rows), 0), dtype=torch.long), test_rows.float()).double()
    return {
        "proba_test": torch.softmax(logits, dim=1).tolist(),
        "best_epoch": stopping.best_epoch,
        "steps": stopping.calls,
        "seconds": seconds,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def main(argv: list[str] | None = None) -> int:
    return serve(argv, train_bishop, model="bishop", setup=_numpy_inf_alias)


if __name__ == "__main__":
    sys.exit(main())
