"""The one interface every model implements, scikit-learn style.

Models receive preprocessed matrices (see tabrepro.preprocessing): class indices in
[0, n_classes) for classification, a standardised target for regression. The base class owns
everything that must behave the same for every model:

* input checks, and `n_jobs` applied to BLAS/OpenMP thread pools during fit and predict;
* classes missing from the training rows: subclasses only ever see the classes that are present,
  re-coded 0..k-1, and `predict_proba` maps their columns back into all `n_classes` columns (an
  absent class gets probability 0). Validation rows of an absent class are dropped before the
  subclass sees them: every model gives them probability 0, so they add the same constant to any
  validation loss and cannot change which epoch is best;
* a training set with a single class yields a constant model (most libraries refuse to fit one);
* classification `predict` is the arg-max of `predict_proba`, so the two always agree.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import numpy as np
from threadpoolctl import threadpool_limits

__all__ = ["Task", "TASKS", "TabularModel", "NotFittedError", "FitContext"]

Task = Literal["binary", "multiclass", "regression"]
TASKS: tuple[str, ...] = ("binary", "multiclass", "regression")


class NotFittedError(RuntimeError):
    """predict/predict_proba called before fit."""


@dataclass(frozen=True)
class FitContext:
    """What some models need beyond (X, y): optional for every model, ignored by most.

    feature_groups: (kind, n_columns) per original feature in column order, kind "continuous" or
        "categorical" (a one-hot group); NPT and BiSHop embed a feature, not a column.
    X_test: the test rows' features, targets never given. NPT's semi-supervised mode puts them
        into its input with the target masked (npt.md, "Semi-supervision").
    work_dir: a directory the model may use for resumable state (checkpoints). It is not a
        declared workflow output, so it survives a killed or requeued job.
    """

    feature_groups: tuple[tuple[str, int], ...] | None = None
    X_test: np.ndarray | None = None
    work_dir: Path | None = None


def _resolve_n_jobs(n_jobs: int) -> int:
    """-1 means every core; anything else must be a positive thread count."""
    if n_jobs == -1:
        return os.cpu_count() or 1
    if not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive integer or -1, got {n_jobs!r}")
    return int(n_jobs)


def _as_matrix(X: np.ndarray, name: str) -> np.ndarray:
    matrix = np.asarray(X)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {matrix.shape}")
    if not np.issubdtype(matrix.dtype, np.floating):
        matrix = matrix.astype(np.float64)
    return matrix


class TabularModel(ABC):
    """A tabular model with a fixed configuration, seed and thread budget.

    `params` are the model's hyperparameters as sampled by tabrepro.tuning; they are passed to the
    underlying library after the model-specific translations documented in each module.
    """

    name: ClassVar[str]
    # Where its jobs run: "gpu" models get a GPU in the Slurm profile (CUDA when present, CPU
    # otherwise); "cpu" models ask for CPUs and memory only.
    accelerator: ClassVar[Literal["cpu", "gpu"]] = "cpu"
    # True: one workflow job per configuration (each is long, e.g. an NPT variant), then a
    # selection job; False: one job per fold loops over the configurations.
    per_config_jobs: ClassVar[bool] = False

    def __init__(
        self,
        task: Task,
        params: dict[str, Any],
        seed: int,
        n_jobs: int = 1,
        n_classes: int | None = None,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
        if task == "regression":
            if n_classes is not None:
                raise ValueError("n_classes must be None for regression")
        else:
            if task == "binary" and n_classes is None:
                n_classes = 2
            if n_classes is None or int(n_classes) < 2:
                raise ValueError(f"{task} needs n_classes >= 2, got {n_classes!r}")
            if task == "binary" and n_classes != 2:
                raise ValueError(f"binary task needs n_classes == 2, got {n_classes}")
        self.task: Task = task
        self.params: dict[str, Any] = dict(params)
        self.seed = int(seed)
        self.n_jobs = _resolve_n_jobs(n_jobs)
        self.n_classes = None if n_classes is None else int(n_classes)
        # Filled by fit: training-time facts worth logging (e.g. the MLP's best epoch).
        self.fit_info_: dict[str, Any] = {}
        self.context: FitContext = FitContext()
        self._n_features: int | None = None
        self._train_classes: np.ndarray | None = None  # original indices of the present classes
        self._constant_proba: np.ndarray | None = None  # single-class training set

    # ----------------------------------------------------------------- public interface
    @property
    def is_classifier(self) -> bool:
        return self.task != "regression"

    @property
    def n_fit_classes(self) -> int:
        """Number of classes present in the training rows (what the subclass was fitted on)."""
        if self._train_classes is None:
            raise NotFittedError(f"{self.name} is not fitted")
        return int(self._train_classes.size)

    def fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None = None,
        y_val: np.ndarray | None = None,
        *,
        context: FitContext | None = None,
    ) -> Self:
        """Fit on the training rows; the validation rows are for early stopping and selection."""
        X_train = _as_matrix(X_train, "X_train")
        if X_train.shape[0] == 0:
            raise ValueError("X_train has no rows")
        y_train = self._check_target(y_train, X_train.shape[0], "y_train")
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        if X_val is not None:
            X_val = _as_matrix(X_val, "X_val")
            if X_val.shape[1] != X_train.shape[1]:
                raise ValueError(
                    f"X_val has {X_val.shape[1]} features, X_train has {X_train.shape[1]}"
                )
            y_val = self._check_target(y_val, X_val.shape[0], "y_val")
            if X_val.shape[0] == 0:  # an empty validation split is no validation split
                X_val = y_val = None
        self._n_features = X_train.shape[1]
        self.context = context if context is not None else FitContext()
        self.fit_info_ = {}
        self._constant_proba = None

        if self.is_classifier:
            X_val, y_val = self._prepare_classes(y_train, X_val, y_val)
            if self._constant_proba is not None:
                self.fit_info_["constant"] = True
                return self
            y_train = np.searchsorted(self._train_classes, y_train)
        with threadpool_limits(limits=self.n_jobs):
            self._fit(X_train, y_train, X_val, y_val)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Class indices for classification; standardised-scale values for regression."""
        if self.is_classifier:
            return np.argmax(self.predict_proba(X), axis=1).astype(np.int64)
        X = self._check_predict_input(X)
        with threadpool_limits(limits=self.n_jobs):
            values = np.asarray(self._predict_values(X), dtype=np.float64).reshape(-1)
        return values

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(n, n_classes) class probabilities; classes absent from training get probability 0."""
        if not self.is_classifier:
            raise AttributeError("predict_proba is only available for classification")
        X = self._check_predict_input(X)
        if self._constant_proba is not None:
            return np.tile(self._constant_proba, (X.shape[0], 1))
        with threadpool_limits(limits=self.n_jobs):
            fitted = np.asarray(self._predict_proba(X), dtype=np.float64)
        # Several libraries compute in float32; rows are renormalised in float64 so that they
        # sum to one within float64 rounding, as the metrics expect.
        fitted /= fitted.sum(axis=1, keepdims=True)
        return self._to_all_classes(fitted)

    # --------------------------------------------------------------- subclass hooks
    @abstractmethod
    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        """Fit the underlying estimator.

        Classification labels (train and validation) are codes 0..n_fit_classes-1 of the classes
        present in training; regression targets are standardised floats.
        """

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(n, n_fit_classes) probabilities over the classes present in training."""
        raise NotImplementedError(f"{self.name} does not implement classification")

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        """(n,) regression predictions on the standardised scale."""
        raise NotImplementedError(f"{self.name} does not implement regression")

    def save_weights(self, path: Path) -> bool:
        """Write the fitted weights (a small, versionable artefact); False if the model has none.

        Deep models override this; tree and neighbour models keep nothing worth versioning.
        """
        return False

    # ------------------------------------------------------------------- helpers
    def _estimator_kwargs(self, owned: dict[str, Any], params: dict[str, Any] | None = None) -> dict:
        """Hyperparameters plus the settings the wrapper owns (seed, threads, verbosity).

        A hyperparameter that tries to set an owned key is an error rather than a silent override,
        so a search space cannot quietly change seeding or threading.
        """
        source = self.params if params is None else params
        clashes = sorted(set(source) & set(owned))
        if clashes:
            raise ValueError(
                f"{self.name}: parameter(s) {', '.join(clashes)} are set by tabrepro "
                f"(seed/threads/verbosity) and may not appear in a search space"
            )
        return {**source, **owned}

    def _check_target(self, y: np.ndarray | None, n_rows: int, name: str) -> np.ndarray:
        values = np.asarray(y).reshape(-1)
        if values.shape[0] != n_rows:
            raise ValueError(f"{name} has {values.shape[0]} rows, expected {n_rows}")
        if self.is_classifier:
            if not np.issubdtype(values.dtype, np.integer):
                if not np.all(np.equal(np.mod(values, 1), 0)):
                    raise ValueError(f"{name} must hold integer class indices")
                values = values.astype(np.int64)
            assert self.n_classes is not None
            if values.size and (values.min() < 0 or values.max() >= self.n_classes):
                raise ValueError(f"{name} holds class indices outside [0, {self.n_classes})")
            return values.astype(np.int64, copy=False)
        values = values.astype(np.float64, copy=False)
        if not np.isfinite(values).all():
            raise ValueError(f"{name} contains non-finite values")
        return values

    def _prepare_classes(
        self, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Record the present classes; re-code validation labels and drop rows of absent classes."""
        assert self.n_classes is not None
        self._train_classes = np.unique(y_train)
        if self._train_classes.size == 1:
            self._constant_proba = np.zeros(self.n_classes)
            self._constant_proba[self._train_classes[0]] = 1.0
            return None, None
        if X_val is None or y_val is None:
            return None, None
        keep = np.isin(y_val, self._train_classes)
        if not keep.any():
            return None, None
        return X_val[keep], np.searchsorted(self._train_classes, y_val[keep])

    def _to_all_classes(self, fitted: np.ndarray) -> np.ndarray:
        assert self._train_classes is not None and self.n_classes is not None
        if fitted.ndim != 2 or fitted.shape[1] != self._train_classes.size:
            raise RuntimeError(
                f"{self.name} returned probabilities of shape {fitted.shape}, "
                f"expected (n, {self._train_classes.size})"
            )
        full = np.zeros((fitted.shape[0], self.n_classes), dtype=np.float64)
        full[:, self._train_classes] = fitted
        return full

    def _check_predict_input(self, X: np.ndarray) -> np.ndarray:
        if self._n_features is None:
            raise NotFittedError(f"{self.name} is not fitted; call fit() first")
        matrix = _as_matrix(X, "X")
        if matrix.shape[1] != self._n_features:
            raise ValueError(f"X has {matrix.shape[1]} features, the model was fitted on {self._n_features}")
        return matrix

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(task={self.task!r}, params={self.params!r}, "
            f"seed={self.seed}, n_jobs={self.n_jobs}, n_classes={self.n_classes})"
        )
