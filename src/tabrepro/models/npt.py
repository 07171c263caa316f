"""Non-Parametric Transformer behind the project's model interface (tabrepro.npt does the work).

A configuration is a set of `NPTConfig` fields (params.yaml: search_spaces.*.npt); each variant
of the paper's small-data sweep is one configuration and one workflow job (`per_config_jobs`),
because a variant trains for thousands of steps on a GPU.

What the interface adds to NPTEstimator:
* the attribute layout comes from `FitContext.feature_groups` (a one-hot group is one attribute);
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

from tabrepro.models.base import TabularModel
from tabrepro.models.hyperparameters import SEED, Hyperparameters, dataclass_rules
from tabrepro.npt.config import NPTConfig

__all__ = ["NPTModel"]

log = logging.getLogger(__name__)


class NPTModel(TabularModel):
    name: ClassVar[str] = "npt"
    accelerator = "gpu"
    per_config_jobs = True

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
        return Hyperparameters(owned={"seed": SEED}, reads=dataclass_rules(NPTConfig, exclude={"seed"}, ranges=ranges))

    def _config(self) -> NPTConfig:
        values: dict[str, Any] = dict(self.params)
        if "seed" in values:
            raise ValueError("npt: 'seed' is set by tabrepro and may not appear in a search space")
        values["seed"] = self.seed
        if isinstance(values.get("lamb_betas"), list):
            values["lamb_betas"] = tuple(values["lamb_betas"])
        return NPTConfig.from_dict(values)

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        import torch  # lazily: the registry (and every Snakemake start) need not load torch

        from tabrepro.npt.estimator import NPTEstimator

        config = self._config()
        groups = self.context.feature_groups or tuple(("continuous", 1) for _ in range(X_train.shape[1]))
        X_test = self.context.X_test if config.semi_supervised else None
        work_dir = self.context.work_dir
        if work_dir is not None:
            Path(work_dir).mkdir(parents=True, exist_ok=True)
        task = "regression" if self.task == "regression" else "classification"
        n_classes = self.n_fit_classes if self.is_classifier else None
        self._estimator = NPTEstimator(task, config, n_classes=n_classes, checkpoint_dir=work_dir)

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

        previous_threads = torch.get_num_threads()
        torch.set_num_threads(self.n_jobs)
        try:
            self._estimator.fit(X_train, y_train, X_val, y_val, attributes=groups, X_test=X_test, progress=progress)
        finally:
            torch.set_num_threads(previous_threads)
        result = self._estimator.fit_result_
        assert result is not None
        if result.resumed_from is not None:
            log.info("npt resumed from step %d (state file in %s)", result.resumed_from, work_dir)
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

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)

    def save_weights(self, path: Path) -> bool:
        """The selected weights only (a state dict of tensors, loadable with weights_only=True)."""
        from tabrepro.npt.trainer import atomic_save

        trainer = self._estimator.trainer_
        assert trainer is not None and trainer.model is not None
        atomic_save({k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}, Path(path))
        return True
