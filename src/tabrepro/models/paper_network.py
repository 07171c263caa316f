"""What NPTModel and BiSHopModel share behind the project's model interface: a paper's own network
(tabrepro.models.npt, tabrepro.models.bishop), trained by its TaskEstimator, one workflow job per configuration
on a GPU.

* A configuration is a set of the network's config fields (its dataclass, `config_class`); the
  seed comes from the job, never from the configuration, and a registered variant (NPT-ISAB, a
  BiSHop ablation) fixes some fields on top (`fixed`), which a search space may not set.
* `FitContext.feature_layout` says which columns form one feature; `FitContext.work_dir` holds the
  resumable state file, so a killed job continues where it stopped and ends with the same weights.
* The network trains with the job's thread count; predictions and weights come from the
  estimator.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabrepro.models.base import TabularModel
from tabrepro.models.rules import SEED, Hyperparameters, dataclass_rules
from tabrepro.nn.session import torch_threads

if TYPE_CHECKING:
    from tabrepro.nn.config import ConfigDictMixin

__all__ = ["PaperNetworkModel"]


class PaperNetworkModel(TabularModel):
    """Base of the adapters of the papers' networks. Subclasses set `config_class`, declare their
    ranges (`_network_hyperparameters`) and implement `_fit` with `_new_estimator` and `_train`."""

    accelerator = "gpu"
    per_config_jobs = True
    config_class: ClassVar[type[ConfigDictMixin]]  # NPTConfig, BiSHopConfig
    fixed: ClassVar[dict[str, Any]] = {}  # fields a registered variant fixes on top of the configuration
    variant_label: ClassVar[str] = "{name}"  # how a fixed field's owner is named in errors

    @classmethod
    def _network_hyperparameters(cls, ranges: dict[str, tuple]) -> Hyperparameters:
        """The config's fields with their annotated types and `ranges`; the seed and a variant's
        fixed fields are owned (a search space naming one is refused, not silently overridden)."""
        owner = cls.variant_label.format(name=cls.name)
        owned = {"seed": SEED, **{key: f"fixed to {value!r} by {owner}" for key, value in cls.fixed.items()}}
        return Hyperparameters(owned=owned, reads=dataclass_rules(cls.config_class, exclude=set(owned), ranges=ranges))

    def _config(self) -> Any:
        values: dict[str, Any] = dict(self.params)
        if "seed" in values:
            raise ValueError(f"{self.name}: 'seed' is set by tabrepro and may not appear in a search space")
        values.update(self.fixed, seed=self.seed)
        return self.config_class.from_dict(self._config_values(values))

    def _config_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """Hook: adjust the merged values before the config is built (YAML lists to tuples, ...)."""
        return values

    def _new_estimator(self, estimator_class: type, config: Any) -> Any:
        """The estimator for this fit; its state file goes to the job's work dir."""
        work_dir = self.context.work_dir
        if work_dir is not None:
            Path(work_dir).mkdir(parents=True, exist_ok=True)
        task = "regression" if self.task == "regression" else "classification"
        n_classes = self.n_fit_classes if self.is_classifier else None
        self._estimator = estimator_class(task, config, n_classes=n_classes, checkpoint_dir=work_dir)
        return self._estimator

    def _train(self, X_train: np.ndarray, y_train: np.ndarray, X_val: Any, y_val: Any, **options: Any) -> Any:
        """Fit the estimator with the job's threads and the fitted layout; returns its fit result."""

        layout = self.context.layout_for(X_train.shape[1])
        with torch_threads(self.n_jobs):
            self._estimator.fit(X_train, y_train, X_val, y_val, layout=layout, **options)
        result = self._estimator.fit_result_
        assert result is not None
        return result

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
