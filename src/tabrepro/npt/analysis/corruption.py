"""Does NPT use other datapoints? Corrupt them and see (Alg. 1, Table 2).

For each test row k: within k's evaluation batch, every attribute column (features and target,
values together with their mask bits) is permuted independently across all rows except k, which
keeps each column's marginal distribution but destroys every relation between the other rows'
attributes, and between them and k. Row k itself is left intact; its prediction is kept. The
corrupted predictions of all test rows are then scored like the clean ones.

Table 2 reports the change of the test metric: accuracy change in percentage points for
classification, and for regression the relative RMSE change in percent with the sign chosen so
that negative means worse, like the accuracy drop: (RMSE_clean - RMSE_corrupt) / RMSE_clean x 100.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tabrepro.npt.analysis.common import NPTContext, batch_outputs, target_outputs

__all__ = ["corrupt_batch", "corruption_experiment", "table2_deltas"]


def corrupt_batch(values: Tensor, mask: Tensor, keep: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Copies of one batch with each column permuted independently across all rows but `keep`.

    Mask bits travel with their values, so a hidden target stays hidden wherever it lands.
    """
    n, d = values.shape
    others = torch.cat([torch.arange(keep), torch.arange(keep + 1, n)]).to(values.device)
    keys = torch.rand((others.numel(), d), generator=generator).to(values.device)
    order = others[torch.argsort(keys, dim=0)]  # (n - 1, d): a separate permutation per column
    new_values, new_mask = values.clone(), mask.clone()
    columns = torch.arange(d, device=values.device).expand_as(order)
    new_values[others.unsqueeze(1).expand_as(order), columns] = values[order, columns]
    new_mask[others.unsqueeze(1).expand_as(order), columns] = mask[order, columns]
    return new_values, new_mask


def corruption_experiment(context: NPTContext, *, max_test_rows: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Clean vs corrupted test metrics of one trained NPT, and Table 2's change."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    test_rows = context.test_rows()
    if test_rows.size == 0:
        return {"n_test_rows": 0, "note": "no test rows with a known label"}
    if max_test_rows is not None and test_rows.size > max_test_rows:
        test_rows = np.sort(rng.choice(test_rows, size=max_test_rows, replace=False))
    generator = torch.Generator().manual_seed(seed)
    clean = target_outputs(context)[test_rows]
    corrupted = np.empty_like(clean)
    table = context.table
    for i, row in enumerate(test_rows):
        batch = context.batch_of(int(row))
        position = int(torch.nonzero(batch == int(row))[0, 0])
        values, mask = corrupt_batch(table.inputs[batch], table.input_missing[batch], position, generator)
        corrupted[i] = batch_outputs(context.model, values, mask)[position].cpu().double().numpy()
    clean_metrics = context.score(test_rows, clean)
    corrupt_metrics = context.score(test_rows, corrupted)
    return {
        "task": context.task,
        "n_test_rows": int(test_rows.size),
        "clean": clean_metrics,
        "corrupted": corrupt_metrics,
        "delta": table2_deltas(context.task, clean_metrics, corrupt_metrics),
        "seconds": round(time.perf_counter() - started, 3),
    }


def table2_deltas(task: str, clean: dict[str, float], corrupted: dict[str, float]) -> dict[str, float]:
    """Table 2's numbers (negative = corruption hurt) plus plain differences of every metric."""
    deltas = {f"{name}_change": corrupted[name] - clean[name] for name in clean if name in corrupted}
    if task == "regression":
        rmse = clean["rmse"]
        deltas["delta_rmse_over_rmse_pct"] = 100.0 * (rmse - corrupted["rmse"]) / rmse if rmse > 0 else float("nan")
    else:
        deltas["delta_accuracy_pct"] = corrupted["accuracy_pct"] - clean["accuracy_pct"]
    return deltas
