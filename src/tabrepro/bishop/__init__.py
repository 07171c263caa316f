"""BiSHop (Xu 2024, "Modern Hopfield Model for Deep Tabular Learning"): α-entmax with learnable
α, piecewise-linear encoding, the BiSHop network, a resumable training loop and a
scikit-learn-style adapter (see estimator.py). Spec: /work/shared/spec/bishop.md.

Importing this package imports torch.
"""

from tabrepro.bishop.config import BiSHopConfig
from tabrepro.bishop.entmax import AlphaEntmax, entmax, entmax_bisect
from tabrepro.bishop.estimator import BiSHopEstimator
from tabrepro.bishop.model import BiSHopModel
from tabrepro.bishop.ple import PiecewiseLinearEncoding
from tabrepro.bishop.trainer import BiSHopTrainer, FitResult, TabularTensors

__all__ = ["BiSHopConfig", "BiSHopModel", "BiSHopTrainer", "BiSHopEstimator", "FitResult",
           "TabularTensors", "AlphaEntmax", "entmax", "entmax_bisect", "PiecewiseLinearEncoding"]
