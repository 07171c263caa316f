"""BiSHop behind the project's model interface (tabrepro.models.bishop does the work).

A configuration is a set of `BiSHopConfig` fields (params.yaml: search_spaces.bishop_*.bishop,
Table A.4). Each configuration is one workflow job (`per_config_jobs`); BiSHop's protocol then
retrains the configuration chosen on validation with two further seeds (protocol `repeats`).

The ablations of Tables 4.2 and 4.3 are the same model with one switch fixed. Each is registered
under its own name (`ABLATIONS`) so that it gets its own jobs, results and table rows.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tabrepro.models.bishop.config import CHECKPOINT_FORMAT, POSITIVE_FIELDS, BiSHopConfig
from tabrepro.models.paper_network import PaperNetworkModel
from tabrepro.models.rules import Hyperparameters

__all__ = ["ABLATIONS", "BiSHopModel", "ablation_models"]

log = logging.getLogger(__name__)

# Ablation model name -> the BiSHopConfig switches it fixes (Table 4.2: components; 4.3: the
# attention normaliser). Labels for the tables live in params.yaml. `bishop_default` fixes none:
# the section 4.1 default configuration, the reference column of both tables (section 4.2),
# apart from Fig. 4.1's tuned `bishop`.
ABLATIONS: dict[str, dict[str, Any]] = {
    "bishop_default": {},
    "bishop_onehot_categorical": {"categorical_encoding": "onehot"},
    "bishop_raw_numerical": {"numerical_encoding": "raw"},
    "bishop_no_patching": {"patch_size": 1},
    "bishop_no_decoder": {"decoder": False},
    "bishop_mlp_block": {"block": "mlp"},
    "bishop_dense_hopfield": {"attention": "hopfield"},
    "bishop_attention": {"attention": "attention"},
}


class BiSHopModel(PaperNetworkModel):
    name: ClassVar[str] = "bishop"
    cost_family: ClassVar[str] = "bishop"  # its ablations (ablation_models) inherit it
    config_class = BiSHopConfig
    checkpoint_format = CHECKPOINT_FORMAT
    variant_label = "this ablation"  # an ablation fixes switches on top of the configuration

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """BiSHopConfig's fields with their annotated types; ranges as BiSHopConfig.validate checks
        them. An ablation's fixed switch is refused: the ablation would override it silently."""
        positive = (1, None, "both")
        ranges = {
            **dict.fromkeys(POSITIVE_FIELDS, positive),
            "dropout": (0.0, 1.0, "left"),
            "head_dropout": (0.0, 1.0, "left"),
            "alpha_init": (1.0, 2.0, "neither"),
            "beta": (0.0, None, "neither"),
            "lr": (0.0, None, "neither"),
            "lr_factor": (0.0, 1.0, "neither"),
            "lr_patience": (0, None, "both"),
            "grad_clip_norm": (0.0, None, "neither"),
            "shared_embed_dim": (0, None, "both"),
            "batches_per_epoch": positive,
        }
        return cls._network_hyperparameters(ranges)

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        from tabrepro.models.bishop.estimator import BiSHopEstimator  # lazily: the registry need not load torch

        self._new_estimator(BiSHopEstimator, self._config())
        result = self._train(X_train, y_train, X_val, y_val)
        if result.resumed_from is not None:
            work_dir = self.context.work_dir
            log.info("%s resumed from epoch %d (state file in %s)", self.name, result.resumed_from, work_dir)
        self.fit_info_.update(
            {"epochs": result.epochs, "best_epoch": result.best_epoch, "resumed_from": result.resumed_from}
        )

    def save_weights(self, path: Path) -> bool:
        self._estimator.save_weights(path)
        return True


def _ablation_class(name: str, switches: dict) -> type[BiSHopModel]:
    """A module-level class (so a fitted ablation pickles like any other model)."""
    class_name = f"BiSHop_{name}"
    cls = type(
        class_name,
        (BiSHopModel,),
        {
            "name": name,
            "fixed": dict(switches),
            "__doc__": f"BiSHop with {switches}.",
            "__module__": __name__,
            "__qualname__": class_name,
        },
    )
    globals()[class_name] = cls
    return cls


_ABLATION_CLASSES = {name: _ablation_class(name, switches) for name, switches in ABLATIONS.items()}


def ablation_models() -> dict[str, type[BiSHopModel]]:
    """One BiSHopModel subclass per ablation, named as in ABLATIONS."""
    return dict(_ABLATION_CLASSES)
