"""The rows both sides of a fidelity case train on: its folds and their targets.

benchmarks.versus.fidelity builds NPT's problem and benchmarks.versus.fidelity_bishop BiSHop's;
both hand it to the same runner.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fold:
    """One fold's rows and its features standardised with the training rows' statistics."""

    x: np.ndarray  # float64 [n, d]
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


@dataclass(frozen=True)
class Problem:
    y: np.ndarray  # int64 class codes
    n_classes: int
    folds: list[Fold]
    rule: str  # how the folds were made, for the record
