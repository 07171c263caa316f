"""TabNet (Arik & Pfister, AAAI 2021) through the reference PyTorch package, pytorch-tabnet 4.1.0.

The library's own training loop is used (Adam, ghost batch norm, sparsity regulariser, its
EarlyStopping callback, best weights restored), with what the protocol needs around it:

* Early stopping on the validation target loss: mean NLL (probabilities clipped like the
  evaluation metrics) or MSE on the standardised target; without validation rows the training
  rows are monitored. `patience` counts epochs without a strictly lower loss, as for the MLP.
* Categorical features: with `FitContext.feature_layout` each one-hot group is turned back into
  one integer column (`FeatureLayout.per_feature`: the category, or one extra code for a missing
  entry) and passed as `cat_idxs`/`cat_dims`, so TabNet embeds it (`cat_emb_dim`, default 1)
  and its feature masks select whole features, as in the TabNet paper. `cat_encoding: one_hot`
  keeps the one-hot columns as plain inputs instead.
* Quiet and file-free: verbose 0, the library's end-of-training print and its warnings are
  swallowed, feature importances are not computed, nothing is written to disk or downloaded.
* Seeded: the library seeds its initialisation and shuffling from `seed`; this runs inside
  `tabrepro.nn.session.torch_session`, so the caller's global RNG state and thread count are left
  as they were.

Search-space keys: the TabModel constructor's own names (n_d, n_a, n_steps, gamma,
n_independent, n_shared, momentum, lambda_sparse, mask_type, cat_emb_dim, epsilon, clip_value),
the fit settings batch_size, virtual_batch_size, max_epochs, patience, and:

* lr, weight_decay: Adam's (library defaults 0.02 and 0);
* scheduler_step_size, scheduler_gamma: a per-epoch StepLR when given (none by default);
* cat_encoding: "embedding" (default) or "one_hot".

When n_d is set and n_a is not, n_a = n_d (the TabNet paper's advice; BiSHop's Table A.8 tunes
them as one). Unset fit settings are the library's defaults (batch 1024, virtual batch 128, 100
epochs, patience 10). A batch larger than the training set is cut to it, and a virtual batch that
would leave a one-row ghost batch (BatchNorm cannot train on one row) becomes the whole batch.

The NPT sweep (params.yaml) passes the TabNet paper's per-dataset configurations as the NPT code
ran them: its StepLR settings were inert there (pytorch-tabnet ignores scheduler_params without a
scheduler_fn), and `momentum` is the paper's value handed to PyTorch's BatchNorm unchanged (the
paper follows TensorFlow's convention, where momentum is 1 - PyTorch's).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from tabrepro.evaluation.metrics import NLL_CLIP
from tabrepro.features import FeatureLayout
from tabrepro.models.base import TabularModel
from tabrepro.models.rules import DATA_SHAPE, LOGGING, SEED, Hyperparameters, integer, number, options
from tabrepro.nn.session import torch_session

__all__ = ["TabNetModel"]

# Read by the wrapper, not passed to the TabNet constructor; values are pytorch-tabnet's defaults.
FIT_DEFAULTS: dict[str, Any] = {
    "batch_size": 1024,
    "virtual_batch_size": 128,
    "max_epochs": 100,
    "patience": 10,
    "lr": 0.02,
    "weight_decay": 0.0,
}
CAT_ENCODINGS = ("embedding", "one_hot")


@functools.cache
def _library() -> SimpleNamespace:
    """pytorch-tabnet's estimators and our monitoring metrics, imported on first use (the
    library imports torch, which the registry and every Snakemake start should not pay for)."""
    with warnings.catch_warnings():  # pytorch-tabnet 4.1.0 imports a deprecated scipy.sparse path
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="pytorch_tabnet")
        from pytorch_tabnet.metrics import Metric  # deferred: loads pytorch_tabnet
        from pytorch_tabnet.tab_model import TabNetClassifier, TabNetRegressor  # deferred: loads pytorch_tabnet

    class MonitoredNLL(Metric):
        """Validation NLL over the classes present in training, clipped like the evaluation metric.

        (The library's logloss asks scikit-learn to infer the label set from the validation rows,
        which fails when a training class is absent there.)
        """

        def __init__(self) -> None:
            self._name = "tabrepro_nll"
            self._maximize = False

        def __call__(self, y_true: np.ndarray, y_score: np.ndarray) -> float:
            picked = y_score[np.arange(y_true.shape[0]), np.asarray(y_true, dtype=np.int64)]
            return float(-np.mean(np.log(np.clip(picked, NLL_CLIP, 1.0))))

    class MonitoredMSE(Metric):
        """Validation MSE that reports a diverged (NaN) prediction instead of raising on it."""

        def __init__(self) -> None:
            self._name = "tabrepro_mse"
            self._maximize = False

        def __call__(self, y_true: np.ndarray, y_score: np.ndarray) -> float:
            return float(np.mean((np.asarray(y_score, np.float64) - y_true) ** 2))

    return SimpleNamespace(classifier=TabNetClassifier, regressor=TabNetRegressor, nll=MonitoredNLL, mse=MonitoredMSE)


def _ghost_batch_size(batch_size: int, virtual: int) -> int:
    """A virtual batch size whose ghost batches all have >= 2 rows.

    GBN splits a batch with torch.chunk into ceil(batch / virtual) chunks; the last one can hold
    a single row (batch 13, virtual 4: 4+4+4+1), on which BatchNorm cannot train.
    """
    size = math.ceil(batch_size / math.ceil(batch_size / virtual))
    last = batch_size - size * (math.ceil(batch_size / size) - 1)
    return virtual if last > 1 or batch_size == 1 else batch_size


class TabNetModel(TabularModel):
    """TabNet with early stopping on the validation target loss (see the module docstring)."""

    name = "tabnet"
    cost_family = "tabnet"
    accelerator = "gpu"

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """The TabNet constructor's names (less what the wrapper sets) and the wrapper's own keys."""
        wrapper = "set by the wrapper (use lr, weight_decay, scheduler_step_size, scheduler_gamma)"
        return Hyperparameters(
            library=lambda: {"classification": (_library().classifier,), "regression": (_library().regressor,)},
            owned={
                "seed": SEED,
                "verbose": LOGGING,
                "device_name": "CUDA when present, else CPU",
                "cat_idxs": DATA_SHAPE,
                "cat_dims": DATA_SHAPE,
                "input_dim": DATA_SHAPE,
                "output_dim": DATA_SHAPE,
                "optimizer_fn": wrapper,
                "optimizer_params": wrapper,
                "scheduler_fn": wrapper,
                "scheduler_params": wrapper,
            },
            reads={
                "batch_size": integer(1),
                "virtual_batch_size": integer(1),
                "max_epochs": integer(1),
                "patience": integer(1),
                "lr": number(0.0, None, closed="neither"),
                "weight_decay": number(0.0),
                "scheduler_step_size": integer(1),
                "scheduler_gamma": number(0.0, None, closed="neither"),
                "cat_encoding": options(*CAT_ENCODINGS),
                "mask_type": options("sparsemax", "entmax"),
                "n_d": integer(1),
                "n_a": integer(1),
                "n_steps": integer(1),
            },
        )

    def _settings(self) -> tuple[dict[str, Any], dict[str, Any], str, dict[str, Any]]:
        """(fit settings, StepLR settings, cat encoding, constructor params) from params."""
        merged = dict(self.params)
        encoding = merged.pop("cat_encoding", "embedding")
        if encoding not in CAT_ENCODINGS:
            raise ValueError(f"tabnet: cat_encoding must be one of {CAT_ENCODINGS}, got {encoding!r}")
        fit = {key: merged.pop(key, default) for key, default in FIT_DEFAULTS.items()}
        for key in ("batch_size", "virtual_batch_size", "max_epochs", "patience"):
            fit[key] = int(fit[key])
            if fit[key] < 1:
                raise ValueError(f"tabnet: {key} must be >= 1, got {fit[key]}")
        schedule = {
            key: merged.pop(f"scheduler_{key}") for key in ("step_size", "gamma") if f"scheduler_{key}" in merged
        }
        if schedule and len(schedule) != 2:
            raise ValueError("tabnet: give scheduler_step_size and scheduler_gamma together")
        if "n_d" in merged:
            merged.setdefault("n_a", merged["n_d"])
        return fit, schedule, encoding, merged

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        fit, schedule, encoding, constructor = self._settings()
        self._layout = (
            self.context.layout_for(X_train.shape[1])
            if encoding == "embedding"
            else FeatureLayout.all_continuous(X_train.shape[1])
        )
        batch_size = min(fit["batch_size"], X_train.shape[0])
        virtual = _ghost_batch_size(batch_size, min(fit["virtual_batch_size"], batch_size))
        validated = X_val is not None and y_val is not None
        X_monitor, y_monitor = (X_val, y_val) if X_val is not None and y_val is not None else (X_train, y_train)
        self._fallback: np.ndarray | float | None = None

        import torch  # lazily: the registry (and every Snakemake start) need not load torch

        with torch_session(self.seed, self.n_jobs) as device:
            owned = {
                "seed": self.seed,
                "verbose": 0,
                "device_name": device.type,
                "cat_idxs": list(self._layout.categorical_features),
                "cat_dims": self._layout.embedding_sizes,
                "optimizer_fn": torch.optim.Adam,
                "optimizer_params": {"lr": float(fit["lr"]), "weight_decay": float(fit["weight_decay"])},
                "scheduler_fn": torch.optim.lr_scheduler.StepLR if schedule else None,
                "scheduler_params": dict(schedule),
            }
            library = _library()
            estimator_class = library.classifier if self.is_classifier else library.regressor
            estimator = estimator_class(**self._estimator_kwargs(owned, constructor))
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.filterwarnings("ignore", module="pytorch_tabnet")
                estimator.fit(
                    self._layout.per_feature(X_train),
                    self._library_target(y_train),
                    eval_set=[(self._layout.per_feature(X_monitor), self._library_target(y_monitor))],
                    eval_name=["monitor"],
                    eval_metric=[library.nll if self.is_classifier else library.mse],
                    max_epochs=fit["max_epochs"],
                    patience=fit["patience"],
                    batch_size=batch_size,
                    virtual_batch_size=virtual,
                    drop_last=True,
                    compute_importance=False,
                )
        self._estimator = estimator
        monitored = np.asarray(estimator.history[estimator.early_stopping_metric], dtype=np.float64)
        best = float(getattr(estimator, "best_cost", np.inf))
        if not np.isfinite(best):
            self._fallback = self._training_prior(y_train)
        self.fit_info_.update(
            {
                "epochs": int(monitored.size),
                "best_epoch": int(estimator.best_epoch) + 1 if np.isfinite(best) else 0,
                "best_loss": best if np.isfinite(best) else None,
                "monitor": "validation" if validated else "training",
                "diverged": bool(not np.isfinite(monitored).all()),
                "used_prior": self._fallback is not None,
                "device": device.type,
                "batch_size": batch_size,
                "virtual_batch_size": virtual,
                "n_categorical": len(self._layout.categorical_features),
            }
        )

    def _library_target(self, y: np.ndarray) -> np.ndarray:
        """Class codes for the classifier; an (n, 1) float32 column for the regressor."""
        if self.is_classifier:
            return np.asarray(y, dtype=np.int64)
        return np.asarray(y, dtype=np.float32).reshape(-1, 1)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        if isinstance(self._fallback, np.ndarray):
            return np.tile(self._fallback, (X.shape[0], 1))

        with torch_session(None, self.n_jobs):
            return self._estimator.predict_proba(self._layout.per_feature(X))

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        if self._fallback is not None:
            return np.full(X.shape[0], float(self._fallback))

        with torch_session(None, self.n_jobs):
            return self._estimator.predict(self._layout.per_feature(X)).reshape(-1)

    def save_weights(self, path: Path) -> bool:
        """The restored best epoch's network state dict; False for a constant or prior model."""
        estimator = getattr(self, "_estimator", None)
        if estimator is None or self._fallback is not None or self.fit_info_.get("constant"):
            return False
        from tabrepro.nn.checkpoint import save_state_dict  # deferred: loads torch

        save_state_dict(estimator.network, path)
        return True
