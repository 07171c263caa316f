"""BiSHop (Xu 2024, "Modern Hopfield Model for Deep Tabular Learning"): α-entmax with learnable
α, piecewise-linear encoding, the BiSHop network, a resumable training loop and a
scikit-learn-style adapter (see estimator.py).

The names below load on first use, so `tabrepro.bishop.config` (needed by the model registry,
hence by every Snakemake start) does not import torch.
"""

from importlib import import_module
from typing import Any

_HOMES = {
    # The entmax functions live in tabrepro.bishop.entmax (the submodule's name would shadow them).
    "BiSHopConfig": "config",
    "AlphaEntmax": "entmax",
    "BiSHopEstimator": "estimator",
    "BiSHopNetwork": "model",
    "PiecewiseLinearEncoding": "ple",
    "BiSHopTrainer": "trainer",
    "BiSHopFitResult": "trainer",
    "TabularTensors": "trainer",
}
__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tabrepro.bishop' has no attribute {name!r}")
    return getattr(import_module(f"tabrepro.bishop.{_HOMES[name]}"), name)
