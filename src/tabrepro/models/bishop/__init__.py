"""BiSHop (Xu 2024, "Modern Hopfield Model for Deep Tabular Learning"): α-entmax with learnable
α, piecewise-linear encoding, the BiSHop network, a resumable training loop and a
scikit-learn-style adapter (see estimator.py).

The names below load on first use (tabrepro.lazy), so `tabrepro.models.bishop.config` (needed by the model registry,
hence by every Snakemake start) does not import torch.
"""

from tabrepro.lazy import lazy_attributes

# The entmax functions live in tabrepro.models.bishop.entmax (the submodule's name would shadow them).
__all__, __getattr__ = lazy_attributes(
    __name__,
    config=("BiSHopConfig",),
    entmax=("AlphaEntmax",),
    estimator=("BiSHopEstimator",),
    model=("BiSHopNetwork",),
    ple=("PiecewiseLinearEncoding",),
    trainer=("BiSHopTrainer", "BiSHopFitResult", "TabularTensors"),
)
