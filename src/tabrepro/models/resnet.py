"""ResNet for tabular data (Gorishniy et al. 2021, "Revisiting Deep Learning Models for Tabular
Data", Section 3.2), the network from `rtdl_revisiting_models` trained by `TorchModel`'s loop.

Input: the preprocessed matrix as it is, categorical features one-hot encoded, which is how the
Revisiting-models paper feeds its ResNet. (The Grinsztajn et al. benchmark's ResNet embeds
categorical features instead; that variant is not part of rtdl_revisiting_models.)

Search-space keys: the network's own names, n_blocks, d_block, d_hidden (or
d_hidden_multiplier), dropout1 (hidden dropout) and dropout2 (residual dropout), plus the training
keys of `TorchModel` (lr, weight_decay, batch_size, max_epochs, patience, lr_scheduler,
lr_patience). Defaults are the benchmark's default configuration (8 blocks of width 256, hidden
factor 2, both dropouts 0.2, lr 1e-3, weight decay 1e-7, batch 512, learning-rate schedule on;
at most 300 epochs, patience 40).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabrepro.models.rules import DATA_SHAPE, DROPOUT, TORCH_TRAINING_RULES, Hyperparameters, integer
from tabrepro.models.torch_model import TorchModel
from tabrepro.tasks import TASK_FAMILIES

if TYPE_CHECKING:  # torch is imported when a model is built, not when the registry loads
    import torch

__all__ = ["ResNetModel"]

ARCHITECTURE_DEFAULTS: dict[str, Any] = {
    "n_blocks": 8,
    "d_block": 256,
    "dropout1": 0.2,
    "dropout2": 0.2,
}


class ResNetModel(TorchModel):
    """ResNet on the one-hot matrix, trained by TorchModel's loop."""

    name = "resnet"
    cost_family = "torch_mlp"  # the TorchModel networks share one family

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """rtdl's ResNet keywords and TorchModel's training keys."""

        def library() -> dict[str, tuple[type, ...]]:
            from rtdl_revisiting_models import ResNet  # deferred: loads rtdl_revisiting_models

            return {family: (ResNet,) for family in TASK_FAMILIES}

        return Hyperparameters(
            library=library,
            owned={"d_in": DATA_SHAPE, "d_out": DATA_SHAPE},
            reads={
                **TORCH_TRAINING_RULES,
                "n_blocks": integer(1),
                "d_block": integer(1),
                "dropout1": DROPOUT,
                "dropout2": DROPOUT,
            },
        )

    TRAINING_DEFAULTS: ClassVar[dict[str, Any]] = {
        **TorchModel.TRAINING_DEFAULTS,
        "lr": 1e-3,
        "weight_decay": 1e-7,
        "lr_scheduler": True,
    }

    def _build_network(self, architecture: dict[str, Any], X_train: np.ndarray, d_out: int) -> torch.nn.Module:
        kwargs = {**ARCHITECTURE_DEFAULTS, **architecture}
        if "d_hidden" not in kwargs:
            kwargs.setdefault("d_hidden_multiplier", 2.0)
        else:
            kwargs.setdefault("d_hidden_multiplier", None)
        for key in ("n_blocks", "d_block"):
            kwargs[key] = int(kwargs[key])
        owned = {"d_in": X_train.shape[1], "d_out": d_out}
        # deferred: loads rtdl_revisiting_models; imports torch: only when a network is built
        from rtdl_revisiting_models import ResNet

        return ResNet(**self._estimator_kwargs(owned, kwargs))
