"""FT-Transformer (Gorishniy et al. 2021, "Revisiting Deep Learning Models for Tabular Data",
Section 3.3), the network from `rtdl_revisiting_models` trained by `TorchModel`'s loop.

Features become tokens: a continuous feature through a linear embedding, a categorical feature
through an embedding table. With `FitContext.feature_layout` each one-hot group is turned back
into one integer code (`FeatureLayout.embedding_codes`: the category, or one extra code for a
missing entry) and embedded with cardinality n_categories + 1, as the paper does; without a
layout every column is a continuous token.

Search-space keys: the backbone's own names, n_blocks, d_block, attention_n_heads,
attention_dropout, ffn_d_hidden (or ffn_d_hidden_multiplier), ffn_dropout, residual_dropout,
ffn_activation, plus the training keys of `TorchModel`. `d_block` must be a multiple of the head
count, so a sampled width is rounded to the nearest multiple (recorded in `fit_info_`); a
search space can then use the benchmark's plain integer range. Defaults are the library's and the
paper's default configuration (3 blocks, d_block 192, 8 heads, attention dropout 0.2, FFN factor
4/3 with ReGLU, FFN dropout 0.1, lr 1e-4, weight decay 1e-5); weight decay spares embeddings,
normalisation layers and biases, as in the paper. Training: batch 512, at most 300 epochs,
patience 40 (the Grinsztajn et al. benchmark's settings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabrepro.models.rules import DATA_SHAPE, DROPOUT, TORCH_TRAINING_RULES, Hyperparameters, integer
from tabrepro.models.torch_model import TorchModel
from tabrepro.tasks import TASK_FAMILIES

if TYPE_CHECKING:  # torch is imported when a model is built, not when the registry loads
    import torch

__all__ = ["FTTransformerModel"]


def architecture_defaults() -> dict[str, Any]:
    """rtdl's default FT-Transformer (3 blocks); imported here because rtdl imports torch."""
    from rtdl_revisiting_models import FTTransformer  # deferred: loads rtdl_revisiting_models

    return {key: value for key, value in FTTransformer.get_default_kwargs(n_blocks=3).items() if key != "_is_default"}


class FTTransformerModel(TorchModel):
    """FT-Transformer with embedded categorical features, trained by TorchModel's loop."""

    name = "ft_transformer"
    cost_family = "torch_mlp"  # the TorchModel networks share one family

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """rtdl's FTTransformer and backbone keywords, and TorchModel's training keys."""

        def library() -> dict[str, tuple[type, ...]]:
            # deferred: loads rtdl_revisiting_models
            from rtdl_revisiting_models import FTTransformer, FTTransformerBackbone

            return {family: (FTTransformer, FTTransformerBackbone) for family in TASK_FAMILIES}

        return Hyperparameters(
            library=library,
            owned={
                "n_cont_features": DATA_SHAPE,
                "cat_cardinalities": DATA_SHAPE,
                "d_out": DATA_SHAPE,
                "n_tokens": DATA_SHAPE,
            },
            reads={
                **TORCH_TRAINING_RULES,
                "n_blocks": integer(1),
                "d_block": integer(1),
                "attention_n_heads": integer(1),
                "attention_dropout": DROPOUT,
                "ffn_dropout": DROPOUT,
                "residual_dropout": DROPOUT,
            },
        )

    TRAINING_DEFAULTS: ClassVar[dict[str, Any]] = {
        **TorchModel.TRAINING_DEFAULTS,
        "lr": 1e-4,
        "weight_decay": 1e-5,
    }

    def _build_network(self, architecture: dict[str, Any], X_train: np.ndarray, d_out: int) -> torch.nn.Module:
        self._layout = self.context.layout_for(X_train.shape[1])
        kwargs = {**architecture_defaults(), **architecture}
        if "ffn_d_hidden" in architecture and "ffn_d_hidden_multiplier" not in architecture:
            kwargs["ffn_d_hidden_multiplier"] = None
        heads = int(kwargs["attention_n_heads"])
        d_block = max(heads, heads * round(int(kwargs["d_block"]) / heads))
        kwargs.update(n_blocks=int(kwargs["n_blocks"]), attention_n_heads=heads, d_block=d_block)
        self.fit_info_["d_block"] = d_block
        owned = {
            "n_cont_features": int(self._layout.continuous_columns.size),
            "cat_cardinalities": self._layout.embedding_sizes,
            "d_out": d_out,
        }
        from rtdl_revisiting_models import FTTransformer  # deferred: loads rtdl_revisiting_models

        return FTTransformer(**self._estimator_kwargs(owned, kwargs))

    def _inputs(self, X: np.ndarray, device: torch.device) -> tuple[torch.Tensor | None, ...]:
        import torch  # deferred: loads torch

        columns = self._layout.continuous_columns
        x_cont = None
        if columns.size:
            x_cont = torch.as_tensor(np.asarray(X[:, columns], dtype=np.float32), device=device)
        x_cat = None
        if self._layout.categorical_features:
            x_cat = torch.as_tensor(self._layout.embedding_codes(X), device=device)
        return x_cont, x_cat

    def _parameter_groups(self, network: torch.nn.Module) -> list[dict[str, Any]]:
        from rtdl_revisiting_models import FTTransformer  # deferred: loads rtdl_revisiting_models; imports torch

        assert isinstance(network, FTTransformer)  # as _network built it
        return network.make_parameter_groups()
