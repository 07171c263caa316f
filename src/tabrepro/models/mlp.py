"""Multi-layer perceptron (scikit-learn MLPClassifier/MLPRegressor) with early stopping on OUR
validation split.

scikit-learn's own `early_stopping=True` (what the NPT code used) carves a random 10% out of the
training rows and stops on validation accuracy/R². The protocol here asks for early stopping on the
validation target loss of the shared split, so training runs one epoch per `partial_fit` call and
after each epoch we score the validation rows (mean NLL for classification, MSE on the standardised
target for regression). Training stops after `patience` epochs without a strictly lower loss, or
after `max_epochs`, and the weights of the best epoch are restored.

Learning-rate schedules: `learning_rate` (constant / invscaling / adaptive) has the meaning
scikit-learn gives it, and `partial_fit` keeps that meaning: the schedule's state (samples seen,
the training-loss plateau counter) lives on the estimator and carries over from call to call. As in
scikit-learn, it only acts with `solver: sgd`; with the default solver, adam (as in the NPT
baselines, which left `solver` unset), the schedule parameter has no effect.

Determinism: the per-epoch shuffle comes from a generator seeded with `seed` (scikit-learn would
reuse the same permutation in every partial_fit call), and the first epoch's draw also seeds the
weight initialisation.

Divergence: if an epoch produces non-finite weights or a non-finite validation loss, training
stops and the best earlier epoch is restored; if there is none, the model predicts the training
prior (class frequencies, or the mean) and `fit_info_["used_prior"]` is True, so a search simply
scores that configuration badly instead of crashing. `fit_info_` also records the epochs run, the
best epoch and its loss, and what was monitored (validation or, without validation rows, training
loss).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tabrepro.evaluation.metrics import NLL_CLIP
from tabrepro.models.early_stopping import EarlyStopper
from tabrepro.models.estimator import EstimatorModel
from tabrepro.models.rules import LOGGING, SEED, Hyperparameters, estimator_library, integer, options
from tabrepro.tasks import ModelTask

if TYPE_CHECKING:
    from sklearn.neural_network import MLPClassifier, MLPRegressor

DEFAULT_MAX_EPOCHS = 200
DEFAULT_PATIENCE = 20
_TRAINING_KEYS = ("max_epochs", "patience")  # read by the wrapper, not by scikit-learn


class MLPModel(EstimatorModel):
    name = "mlp"
    cost_family = "mlp"

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """scikit-learn's names, less those this epoch-by-epoch loop sets or never uses, plus its
        own max_epochs / patience; `solver` is limited to the ones partial_fit supports."""
        loop = "training runs one partial_fit per epoch with tabrepro's early stopping (use max_epochs/patience)"
        return Hyperparameters(
            library=estimator_library(cls),
            owned={
                "random_state": SEED,
                "verbose": LOGGING,
                "shuffle": "always on (a seeded shuffle per epoch)",
                "warm_start": loop,
                "max_iter": loop,
                "early_stopping": loop,
                "validation_fraction": loop,
                "max_fun": "only used by solver lbfgs, which partial_fit does not support",
            },
            reads={"max_epochs": integer(1), "patience": integer(1), "solver": options("adam", "sgd")},
        )

    def __init__(
        self,
        task: ModelTask,
        params: dict[str, Any],
        seed: int,
        n_jobs: int = 1,
        n_classes: int | None = None,
        *,
        max_epochs: int = DEFAULT_MAX_EPOCHS,
        patience: int = DEFAULT_PATIENCE,
    ) -> None:
        super().__init__(task, params, seed, n_jobs, n_classes)
        self._fallback: np.ndarray | float | None = None  # set when training diverged at once
        # Stored as given (scikit-learn's clone needs that). A search-space key with the same name
        # overrides them while fitting (TabularModel._arguments_for_fit).
        self.max_epochs = max_epochs
        self.patience = patience
        used = [int(params.get(key, value)) for key, value in (("max_epochs", max_epochs), ("patience", patience))]
        if min(used) < 1:
            raise ValueError(f"mlp: max_epochs and patience must be >= 1, got {used[0]}, {used[1]}")

    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        estimator = self._new_estimator(self._translate_params(dict(self.params), X_train))
        classes = np.arange(self.n_fit_classes) if self.is_classifier else None
        rng = np.random.default_rng(self.seed)
        stopper, best_weights = EarlyStopper(self.patience), None

        for epoch in range(1, self.max_epochs + 1):
            estimator.random_state = int(rng.integers(2**31 - 1))
            try:
                with np.errstate(all="ignore"):
                    if classes is not None:
                        estimator.partial_fit(X_train, y_train, classes=classes)
                    else:
                        estimator.partial_fit(X_train, y_train)
                    loss = self._monitored_loss(estimator, X_val, y_val)
            except ValueError as error:
                if "non-finite" not in str(error):
                    raise
                loss = np.nan
            improved, stop = stopper.step(epoch, loss)
            if improved:
                best_weights = (
                    [w.copy() for w in estimator.coefs_],
                    [b.copy() for b in estimator.intercepts_],
                )
            if stop:
                break

        self._fallback = None
        if best_weights is None:
            self._fallback = self._training_prior(y_train)
        else:
            estimator.coefs_, estimator.intercepts_ = best_weights
        self._estimator = estimator
        self.fit_info_.update(stopper.info(X_val is not None))

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from sklearn.neural_network import MLPClassifier, MLPRegressor  # deferred: loads sklearn

        return MLPClassifier, MLPRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {
            "random_state": self.seed,
            "shuffle": True,
            "early_stopping": False,
            "warm_start": False,
            "max_iter": self.max_epochs,
            "verbose": False,
        }

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        n_train = X_train.shape[0]
        params = {k: v for k, v in params.items() if k not in _TRAINING_KEYS}
        if "hidden_layer_sizes" in params:
            sizes = params["hidden_layer_sizes"]
            # numpy's stubs narrow a scalar to np.generic, which they give no __int__
            params["hidden_layer_sizes"] = (int(sizes),) if np.isscalar(sizes) else tuple(int(s) for s in sizes)  # type: ignore[arg-type]
        # scikit-learn clips an oversized batch too, but warns on every epoch.
        if isinstance(params.get("batch_size"), (int, np.integer)):
            params["batch_size"] = max(1, min(int(params["batch_size"]), n_train))
        return params

    @staticmethod
    def _monitored_loss(
        estimator: MLPClassifier | MLPRegressor, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> float:
        """Validation target loss when there is a validation split, else the training loss."""
        if X_val is None or y_val is None:
            return float(estimator.loss_)
        if hasattr(estimator, "predict_proba"):  # MLPClassifier
            proba = estimator.predict_proba(X_val)
            picked = np.clip(proba[np.arange(y_val.size), y_val], NLL_CLIP, 1.0)
            return float(-np.mean(np.log(picked)))
        residual = estimator.predict(X_val).astype(np.float64) - y_val
        return float(np.mean(residual**2))

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        if isinstance(self._fallback, np.ndarray):
            return np.tile(self._fallback, (X.shape[0], 1))
        return super()._predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        if self._fallback is not None:
            return np.full(X.shape[0], float(self._fallback))
        return super()._predict_values(X)
