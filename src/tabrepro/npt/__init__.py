"""Non-Parametric Transformer (Kossen et al., NeurIPS 2021): model, masking, optimisation,
training loop with exact resume, and a scikit-learn-style adapter (see estimator.py).

The names below load on first use, so `tabrepro.npt.config` (needed by the model registry, hence
by every Snakemake start) does not import torch.
"""

from importlib import import_module
from typing import Any

_HOMES = {
    "NPTConfig": "config",
    "TEST": "masking",
    "TRAIN": "masking",
    "VAL": "masking",
    "NPTTable": "masking",
    "NPTNetwork": "model",
    "NPTFitResult": "trainer",
    "NPTTrainer": "trainer",
    "NPTEstimator": "estimator",
}
__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tabrepro.npt' has no attribute {name!r}")
    return getattr(import_module(f"tabrepro.npt.{_HOMES[name]}"), name)
