"""The data the authors' steps are timed on, made without importing our models.

The driver process must not import tabrepro.models.npt or tabrepro.models.bishop (their import-time settings
could change what the authors' code runs), so the inputs are built here from the neutral layer
(benchmarks.steps.common: torch and scikit-learn only), with the same shapes and values as our
benchmarks use:

* `breast_cancer_train`: BiSHop's benchmark data, benchmarks.steps.bishop.load_data's training
  part (both from benchmarks.steps.common.standardised_breast_cancer; a test checks equality);
* `npt_random_table`: NPT's benchmark shape (rows x continuous features + binary target) with
  the train/validation/test proportions of benchmarks.steps.npt (70/10/20). The cost of a step
  does not depend on the values, so these are random, as in our benchmark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["breast_cancer_train", "npt_random_table"]


def breast_cancer_train() -> tuple[Any, Any]:
    """(x_num float32 [n_train, 30], y int64 [n_train]): the training part of BiSHop's benchmark
    data, benchmarks.steps.bishop.load_data's, from the definition both share."""
    from benchmarks.steps.common import standardised_breast_cancer

    x, y, n_train = standardised_breast_cancer(0.8)
    return x[:n_train], y[:n_train]


def npt_random_table(n_rows: int, n_features: int, seed: int = 0) -> dict[str, Any]:
    """Random continuous features and a binary target that depends on the first feature, with
    the row roles as index arrays: {"x": float32 [n, d], "y": int64 [n], "train"/"val"/"test"}."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    x = torch.randn((n_rows, n_features), generator=generator)
    y = (x[:, 0] + 0.5 * torch.randn(n_rows, generator=generator) > 0).long()
    order = torch.randperm(n_rows, generator=generator)
    n_val, n_test_end = int(0.1 * n_rows), int(0.3 * n_rows)
    return {
        "x": x,
        "y": y,
        "val": order[:n_val],
        "test": order[n_val:n_test_end],
        "train": order[n_test_end:],
    }
