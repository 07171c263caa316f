"""Non-Parametric Transformer behind the project's model interface (tabrepro.models.npt does the work).

A configuration is a set of `NPTConfig` fields (params.yaml: search_spaces.*.npt); each variant
of the paper's small-data sweep is one configuration and one workflow job (`per_config_jobs`),
because a variant trains for thousands of steps on a GPU.

What the interface adds to NPTEstimator:
* the attributes come from `FitContext.feature_layout` (a one-hot group is one attribute);
  without it every column is treated as one continuous attribute;
* semi-supervised mode puts `FitContext.X_test` into the input with targets hidden;
* `FitContext.work_dir` holds the resumable state file, so a killed job continues where it
  stopped and ends with the same weights;
* the seed comes from the job, never from the configuration.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tabrepro.models.npt.config import CHECKPOINT_FORMAT, NPTConfig
from tabrepro.models.paper_network import PaperNetworkModel
from tabrepro.models.rules import Hyperparameters

__all__ = ["NPTModel", "NPTISABModel"]

log = logging.getLogger(__name__)


class NPTModel(PaperNetworkModel):
    name: ClassVar[str] = "npt"
    cost_family: ClassVar[str] = "npt"
    config_class = NPTConfig
    checkpoint_format = CHECKPOINT_FORMAT

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """NPTConfig's fields with their annotated types; ranges as NPTConfig.validate checks them."""
        unit, positive = (0.0, 1.0, "both"), (1, None, "both")
        ranges = {
            **{
                name: positive
                for name in (
                    "embed_dim",
                    "n_layers",
                    "n_inducing",
                    "n_heads",
                    "rff_expansion",
                    "max_steps",
                    "batch_size",
                    "lookahead_k",
                    "eval_every_epochs",
                    "checkpoint_every_steps",
                    "n_cycles",
                )
            },
            **{name: (0.0, 1.0, "left") for name in ("attention_dropout", "hidden_dropout", "embedding_dropout")},
            **{
                name: unit
                for name in (
                    "p_feature",
                    "p_target",
                    "p_randomise",
                    "flat_fraction",
                    "warmup_fraction",
                    "feature_loss_weight",
                )
            },
            "lookahead_alpha": (0.0, 1.0, "right"),
            "lr": (0.0, None, "neither"),
        }
        return cls._network_hyperparameters(ranges)

    def _config_values(self, values: dict[str, Any]) -> dict[str, Any]:
        if isinstance(values.get("lamb_betas"), list):  # YAML has no tuples
            values["lamb_betas"] = tuple(values["lamb_betas"])
        return values

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        from tabrepro.models.npt.estimator import NPTEstimator  # lazily: the registry need not load torch

        config = self._config()
        X_test = self.context.X_test if config.semi_supervised else None
        self._new_estimator(NPTEstimator, config)

        report_every = max(1, config.max_steps // 20)

        def progress(step: int, record: dict[str, float]) -> None:
            if step % report_every == 0 or step == config.max_steps:
                log.info(
                    "npt step %d/%d loss %.4f target %.4f lr %.2e",
                    step,
                    config.max_steps,
                    record["loss"],
                    record.get("target_loss", float("nan")),
                    record.get("lr", 0.0),
                )

        result = self._train(X_train, y_train, X_val, y_val, X_test=X_test, progress=progress)
        if result.resumed_from is not None:
            log.info("npt resumed from step %d (state file in %s)", result.resumed_from, self.context.work_dir)
        self.fit_info_.update(
            {
                "steps": result.steps,
                "best_step": result.best_step,
                "best_val_loss": result.best_val_loss,
                "resumed_from": result.resumed_from,
                "diverged": result.diverged,
                "device": str(self._estimator.trainer_.device),
            }
        )

    def save_weights(self, path: Path) -> bool:
        """The selected weights only (a state dict of tensors, loadable with weights_only=True)."""
        from tabrepro.nn.checkpoint import save_state_dict  # deferred: loads torch

        trainer = self._estimator.trainer_
        assert trainer is not None and trainer.model is not None
        save_state_dict(trainer.model, path)
        return True


class NPTISABModel(NPTModel):
    """NPT whose attention between datapoints is the Set Transformer's induced set attention
    (datapoint_attention="isab", `n_inducing` learned points): O(n m) per ABD block instead of
    O(n^2), for tables too large for NPT's full batch. An extension, not in the NPT paper."""

    name: ClassVar[str] = "npt_isab"
    # cost_family: NPT's; its n x n attention term overstates ISAB's n x m, so requests err large
    fixed: ClassVar[dict[str, Any]] = {"datapoint_attention": "isab"}
