"""Non-Parametric Transformer (Kossen et al., NeurIPS 2021): model, masking, optimisation,
training loop with exact resume, and a scikit-learn-style adapter (see estimator.py).

The names below load on first use (tabrepro.lazy), so `tabrepro.models.npt.config` (needed by the model registry, hence
by every Snakemake start) does not import torch.
"""

from tabrepro.lazy import lazy_attributes

__all__, __getattr__ = lazy_attributes(
    __name__,
    config=("NPTConfig",),
    masking=("TEST", "TRAIN", "VAL", "NPTTable"),
    model=("NPTNetwork",),
    trainer=("NPTFitResult", "NPTTrainer"),
    estimator=("NPTEstimator",),
)
