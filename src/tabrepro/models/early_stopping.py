"""Best-epoch bookkeeping shared by the deep models' training loops (TorchModel's, the MLP's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["EarlyStopper"]


@dataclass
class EarlyStopper:
    """Best-epoch bookkeeping shared by the deep models' training loops.

    An epoch improves on a strictly lower monitored loss; training stops `patience` epochs after
    the best one, or at once on a non-finite loss (`diverged`).
    """

    patience: int
    best_loss: float = float("inf")
    best_epoch: int = 0
    epochs: int = 0
    diverged: bool = False

    def step(self, epoch: int, loss: float) -> tuple[bool, bool]:
        """Record one epoch's loss; returns (improved: keep these weights, stop: end training)."""
        self.epochs = epoch
        if not np.isfinite(loss):
            self.diverged = True
            return False, True
        if loss < self.best_loss:
            self.best_loss, self.best_epoch = float(loss), epoch
            return True, False
        return False, epoch - self.best_epoch >= self.patience

    def info(self, validated: bool) -> dict[str, Any]:
        """The facts fit_info_ records about training (JSON-ready)."""
        return {
            "epochs": self.epochs,
            "best_epoch": self.best_epoch,
            "best_loss": self.best_loss if np.isfinite(self.best_loss) else None,
            "monitor": "validation" if validated else "training",
            "diverged": self.diverged,
            "used_prior": self.best_epoch == 0,
        }
