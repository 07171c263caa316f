"""Non-Parametric Transformer (Kossen et al., NeurIPS 2021): model, masking, optimisation,
training loop with exact resume, and a scikit-learn-style adapter (see estimator.py).

Importing this package imports torch.
"""

from tabrepro.npt.config import Attribute, NPTConfig, categorical, continuous
from tabrepro.npt.masking import TEST, TRAIN, VAL, NPTTable
from tabrepro.npt.model import NPTModel
from tabrepro.npt.trainer import FitResult, NPTTrainer

__all__ = ["Attribute", "NPTConfig", "categorical", "continuous", "NPTTable", "TRAIN", "VAL",
           "TEST", "NPTModel", "NPTTrainer", "FitResult"]
