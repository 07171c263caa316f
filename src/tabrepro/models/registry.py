"""Model names (as used in params.yaml and results paths) mapped to their classes.

Adding a model: write one module with a `TabularModel` subclass, then add one line below.
"""

from __future__ import annotations

from typing import Any

from tabrepro.errors import InputError
from tabrepro.models.base import TabularModel
from tabrepro.models.bishop.interface import BiSHopModel, ablation_models
from tabrepro.models.catboost_model import CatBoostModel
from tabrepro.models.ft_transformer import FTTransformerModel
from tabrepro.models.gradient_boosting import GradientBoostingModel
from tabrepro.models.knn import KNNModel
from tabrepro.models.lightgbm_model import LightGBMModel
from tabrepro.models.mlp import MLPModel
from tabrepro.models.npt.interface import NPTISABModel, NPTModel
from tabrepro.models.random_forest import RandomForestModel
from tabrepro.models.resnet import ResNetModel
from tabrepro.models.tabnet import TabNetModel
from tabrepro.models.xgboost_model import XGBoostModel
from tabrepro.tasks import ModelTask

__all__ = ["MODEL_NAMES", "MODEL_REGISTRY", "UnknownModelError", "get_model_class", "create_model"]

MODEL_REGISTRY: dict[str, type[TabularModel]] = {
    RandomForestModel.name: RandomForestModel,
    GradientBoostingModel.name: GradientBoostingModel,
    XGBoostModel.name: XGBoostModel,
    CatBoostModel.name: CatBoostModel,
    LightGBMModel.name: LightGBMModel,
    MLPModel.name: MLPModel,
    KNNModel.name: KNNModel,
    NPTModel.name: NPTModel,
    NPTISABModel.name: NPTISABModel,  # NPT with induced set attention (an extension)
    TabNetModel.name: TabNetModel,
    FTTransformerModel.name: FTTransformerModel,
    ResNetModel.name: ResNetModel,
    BiSHopModel.name: BiSHopModel,
    **ablation_models(),  # BiSHop with one switch fixed (Tables 4.2, 4.3)
}
MODEL_NAMES: tuple[str, ...] = tuple(MODEL_REGISTRY)


class UnknownModelError(InputError, ValueError):
    """A model name that is not in MODEL_REGISTRY."""


def get_model_class(name: str) -> type[TabularModel]:
    """The class registered under `name`."""
    try:
        return MODEL_REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(MODEL_REGISTRY))
        raise UnknownModelError(f"unknown model {name!r}; known models: {known}") from None


def create_model(
    name: str,
    task: ModelTask,
    params: dict[str, Any],
    seed: int,
    n_jobs: int = 1,
    n_classes: int | None = None,
) -> TabularModel:
    """Instantiate a registered model with one configuration."""
    return get_model_class(name)(task, params, seed, n_jobs=n_jobs, n_classes=n_classes)
