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

Two partial implementations sit on top of `TabularModel`:

* `EstimatorModel`: one library estimator with a classifier and a regressor class (the tree,
  boosting and neighbour baselines). A wrapper names its classes, the keyword arguments tabrepro
  owns (seed, threads, verbosity) and any translation of the search space's names; building,
  fitting and predicting are written once here.
* `TorchModel`: a PyTorch network trained by one shared loop (AdamW, shuffled mini-batches, early
  stopping on the validation target loss, best weights restored), on CUDA when present, seeded
  without touching the caller's global RNG state (tabrepro.nn.session.torch_session).

Every model is also a scikit-learn estimator (docs/sklearn.md): `get_params`/`set_params`
follow scikit-learn's protocol, so `clone`, `Pipeline`, `cross_val_score` and the searches work;
the constructor stores its arguments as given, and `fit` resolves them (n_jobs=-1, see
`_arguments_for_fit`). `task="classification"` is the scikit-learn way to classify: any labels,
`classes_` learned in fit. The workflow's tasks ("binary", "multiclass") keep taking class indices
0..n_classes-1 and behave exactly as before.

torch and scikit-learn are imported lazily, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

import numpy as np
from threadpoolctl import threadpool_limits

from tabrepro.features import FeatureLayout
from tabrepro.nn.session import resolve_threads
from tabrepro.tasks import LABELS_TASK, MODEL_TASKS, ModelTask

if TYPE_CHECKING:
    import torch
    from sklearn.exceptions import NotFittedError
    from sklearn.utils import Tags

    from tabrepro.models.hyperparameters import Hyperparameters

__all__ = [
    "TabularModel",
    "EstimatorModel",
    "TorchModel",
    "EarlyStopper",
    "NotFittedError",
    "FitContext",
]

# Feature matrices stay float32 or float64; anything else becomes float64.
_FLOAT_DTYPES = (np.float64, np.float32)


def __getattr__(name: str) -> Any:
    """`NotFittedError` is scikit-learn's own, looked up on first use (PEP 562) so that importing
    this module does not import scikit-learn; `except NotFittedError` thus also catches what
    scikit-learn's `check_is_fitted` raises, and scikit-learn's checks accept ours."""
    if name == "NotFittedError":
        from sklearn.exceptions import NotFittedError

        return NotFittedError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _not_fitted(model: TabularModel) -> Exception:
    from sklearn.exceptions import NotFittedError

    return NotFittedError(f"{model.name} is not fitted; call fit() first")


@dataclass(frozen=True)
class FitContext:
    """What some models need beyond (X, y): optional for every model, ignored by most.

    feature_layout: which columns hold which original feature (the preprocessor's FeatureLayout,
        tabrepro.features); NPT and BiSHop embed a feature, TabNet and FT-Transformer a category,
        not a column. Without it every column is a continuous feature (`layout_for`).
    X_test: the test rows' features, targets never given. NPT's semi-supervised mode puts them
        into its input with the target masked (NPT paper: test rows as semi-supervised input, Table 4).
    work_dir: a directory the model may use for resumable state (checkpoints). It is not a
        declared workflow output, so it survives a killed or requeued job.
    """

    feature_layout: FeatureLayout | None = None
    X_test: np.ndarray | None = None
    work_dir: Path | None = None

    def layout_for(self, n_columns: int) -> FeatureLayout:
        """The feature layout of an n_columns-wide matrix: the given one (which must cover
        exactly those columns), else every column a continuous feature."""
        if self.feature_layout is None:
            return FeatureLayout.all_continuous(n_columns)
        if self.feature_layout.n_columns != n_columns:
            raise ValueError(
                f"the feature layout covers {self.feature_layout.n_columns} columns, the matrix has {n_columns}"
            )
        return self.feature_layout


_NO_CONTEXT = FitContext()
# TabularModel's own constructor arguments; a subclass's further ones are training settings.
_BASE_ARGUMENTS = ("task", "params", "seed", "n_jobs", "n_classes")


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

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        """The search-space names this model accepts; params.yaml is checked against them when it
        is loaded (tabrepro.models.hyperparameters), so a typo cannot be silently ignored."""
        raise NotImplementedError(f"{cls.__name__} does not declare its hyperparameters")

    def __init__(
        self,
        task: ModelTask,
        params: dict[str, Any],
        seed: int,
        n_jobs: int = 1,
        n_classes: int | None = None,
    ) -> None:
        # Stored exactly as given: scikit-learn's clone() rebuilds a model from get_params() and
        # checks that each argument comes back as the same object. What fit derives from them (the
        # thread count of n_jobs=-1, the classes) is resolved in fit.
        self.task = task
        self.params = params
        self.seed = seed
        self.n_jobs = n_jobs
        self.n_classes = n_classes
        self._check_arguments()
        self._train_classes: np.ndarray | None = None  # codes of the classes present in training
        self._constant_proba: np.ndarray | None = None  # single-class training set

    def _check_arguments(self) -> None:
        """Refuse a bad argument when the model is made, so a bad configuration stops a job at
        once; fit repeats the checks (set_params does not check, as scikit-learn asks)."""
        task, n_classes = self.task, self.n_classes
        if task not in MODEL_TASKS:
            raise ValueError(f"unknown task {task!r}; expected one of {', '.join(MODEL_TASKS)}")
        if task in ("regression", LABELS_TASK):
            if n_classes is not None:
                raise ValueError(f"n_classes must be None for {task}")
        else:
            count = 2 if task == "binary" and n_classes is None else n_classes
            if count is None or int(count) < 2:
                raise ValueError(f"{task} needs n_classes >= 2, got {n_classes!r}")
            if task == "binary" and count != 2:
                raise ValueError(f"binary task needs n_classes == 2, got {n_classes}")
        if not isinstance(self.params, Mapping):
            raise TypeError(f"params must be a mapping of hyperparameters, got {self.params!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise TypeError(f"seed must be an integer, got {self.seed!r}")
        resolve_threads(self.n_jobs)

    # ------------------------------------------------------- scikit-learn's estimator protocol
    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The constructor's argument names: the model's parameters in scikit-learn's sense."""
        names = []
        for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(f"{cls.__name__}.__init__ may not take *args or **kwargs")
            names.append(parameter.name)
        return names

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's arguments as stored. No argument is itself an estimator, so `deep`
        changes nothing; `params` is one argument (set it whole: set_params(params={...}))."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **arguments: Any) -> Self:
        """Replace constructor arguments by name; they are checked when the model is fitted."""
        valid = self._get_param_names()
        for name, value in arguments.items():
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for estimator {type(self).__name__}. Valid parameters are: {valid!r}."
                )
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self) -> Tags:
        """Classifier or regressor by `task`, so scikit-learn's is_classifier, scorers and
        cross-validation splitters treat the model as what it is."""
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags

        tags = Tags(estimator_type=None, target_tags=TargetTags(required=True))
        if self.is_classifier:
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=self.task != "binary")
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        """What scikit-learn's check_is_fitted asks: has a fit completed?"""
        return getattr(self, "_fitted", False)

    @contextlib.contextmanager
    def _arguments_for_fit(self) -> Iterator[int]:
        """While the subclass fits: each constructor argument holds its fit-time value.

        Subclass code reads `self.n_jobs` as a thread count (-1 resolved to every core) and
        `self.seed` as an int, and a subclass's own keyword arguments (the MLP's max_epochs and
        patience) give way to a search-space key of the same name. The arguments as given are
        put back when fit returns or raises, so get_params() and clone() never see the change.
        Yields the thread count.
        """
        values: dict[str, Any] = {"n_jobs": resolve_threads(self.n_jobs), "seed": int(self.seed)}
        signature = inspect.signature(type(self).__init__).parameters
        for name in self._get_param_names():
            if name in _BASE_ARGUMENTS:
                continue
            default = signature[name].default  # its type is the setting's type (int for epochs)
            value = self.params.get(name, getattr(self, name))
            values[name] = type(default)(value) if type(default) in (int, float) else value
        given = {name: self.__dict__[name] for name in values}
        self.__dict__.update(values)
        try:
            yield values["n_jobs"]
        finally:
            self.__dict__.update(given)

    # ----------------------------------------------------------------- public interface
    @property
    def is_classifier(self) -> bool:
        return self.task != "regression"

    @property
    def n_fit_classes(self) -> int:
        """Number of classes present in the training rows (what the subclass was fitted on)."""
        if self._train_classes is None:
            raise _not_fitted(self)
        return int(self._train_classes.size)

    @property
    def context(self) -> FitContext:
        """What the latest fit was given beyond (X, y); subclasses read it while fitting."""
        return getattr(self, "_fit_context", _NO_CONTEXT)

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        X_val: np.ndarray | None = None,
        y_val: np.ndarray | None = None,
        *,
        context: FitContext | None = None,
    ) -> Self:
        """Fit on the training rows (X, y); the validation rows are for early stopping and
        selection. scikit-learn calls fit(X, y); the workflow also passes its validation split."""
        from sklearn.utils.validation import check_array, validate_data

        type(self)(**self.get_params(deep=False))  # the constructor's checks, after set_params
        self._fitted = False
        # Sets n_features_in_ (and feature_names_in_ for a DataFrame); float32 stays float32.
        X, y = validate_data(self, X, y, dtype=_FLOAT_DTYPES, y_numeric=not self.is_classifier)
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        if X_val is not None:
            X_val = check_array(X_val, dtype=_FLOAT_DTYPES, ensure_min_samples=0, input_name="X_val")
            if X_val.shape[1] != X.shape[1]:
                raise ValueError(f"X_val has {X_val.shape[1]} features, X has {X.shape[1]}")
        if self.task == LABELS_TASK:
            y, X_val, y_val = self._encode_labels(y, X_val, y_val)
        else:
            if self.is_classifier:
                self.classes_ = np.arange(2 if self.n_classes is None else int(self.n_classes))
            else:
                self.__dict__.pop("classes_", None)
            y = self._check_target(y, X.shape[0], "y")
            if X_val is not None:
                y_val = self._check_target(y_val, X_val.shape[0], "y_val")
        if X_val is not None and X_val.shape[0] == 0:  # an empty validation split is none
            X_val = y_val = None
        self._fit_context = context if context is not None else _NO_CONTEXT
        self.fit_info_: dict[str, Any] = {}  # training-time facts worth logging
        self._constant_proba = None

        if self.is_classifier:
            X_val, y_val = self._prepare_classes(y, X_val, y_val)
            if self._constant_proba is not None:
                self.fit_info_["constant"] = True
                self._fitted = True
                return self
            y = np.searchsorted(self._train_classes, y)
        with self._arguments_for_fit() as n_threads, threadpool_limits(limits=n_threads):
            self._fit(X, y, X_val, y_val)
        self._fitted = True
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Class labels (class indices for the workflow's tasks); values for regression (on the
        standardised scale in the workflow)."""
        if self.is_classifier:
            codes = np.argmax(self.predict_proba(X), axis=1).astype(np.int64)
            return self.classes_[codes] if self.task == LABELS_TASK else codes
        X = self._check_predict_input(X)
        with threadpool_limits(limits=resolve_threads(self.n_jobs)):
            values = np.asarray(self._predict_values(X), dtype=np.float64).reshape(-1)
        return values

    @property
    def predict_proba(self) -> Callable[[np.ndarray], np.ndarray]:
        """(n, len(classes_)) class probabilities; classes absent from training get 0.

        Only classifiers have it: for regression the attribute itself is missing, so that
        hasattr() tells scikit-learn (scorers, checks) whether probabilities exist.
        """
        if not self.is_classifier:
            raise AttributeError("predict_proba is only available for classification")
        return self._class_probabilities

    def _class_probabilities(self, X: np.ndarray) -> np.ndarray:
        X = self._check_predict_input(X)
        if self._constant_proba is not None:
            return np.tile(self._constant_proba, (X.shape[0], 1))
        with threadpool_limits(limits=resolve_threads(self.n_jobs)):
            fitted = np.asarray(self._predict_proba(X), dtype=np.float64)
        # Several libraries compute in float32; rows are renormalised in float64 so that they
        # sum to one within float64 rounding, as the metrics expect.
        fitted /= fitted.sum(axis=1, keepdims=True)
        return self._to_all_classes(fitted)

    def score(self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
        """Accuracy for classification, R² for regression (scikit-learn's default scores)."""
        from sklearn.metrics import accuracy_score, r2_score

        metric = accuracy_score if self.is_classifier else r2_score
        return float(metric(y, self.predict(X), sample_weight=sample_weight))

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
                f"(seed, threads, verbosity or data shape) and may not appear in a search space"
            )
        return {**source, **owned}

    def _training_prior(self, y_train: np.ndarray) -> np.ndarray | float:
        """What a model that learned nothing predicts: class frequencies, or the mean target."""
        if self.is_classifier:
            return np.bincount(y_train, minlength=self.n_fit_classes) / y_train.size
        return float(np.mean(y_train))

    def _check_target(self, y: np.ndarray | None, n_rows: int, name: str) -> np.ndarray:
        values = np.asarray(y).reshape(-1)
        if values.shape[0] != n_rows:
            raise ValueError(f"{name} has {values.shape[0]} rows, expected {n_rows}")
        if self.is_classifier:
            if not np.issubdtype(values.dtype, np.integer):
                if not np.all(np.equal(np.mod(values, 1), 0)):
                    raise ValueError(f"{name} must hold integer class indices")
                values = values.astype(np.int64)
            n_classes = self.classes_.size
            if values.size and (values.min() < 0 or values.max() >= n_classes):
                raise ValueError(f"{name} holds class indices outside [0, {n_classes})")
            return values.astype(np.int64, copy=False)
        values = values.astype(np.float64, copy=False)
        if not np.isfinite(values).all():
            raise ValueError(f"{name} contains non-finite values")
        return values

    def _encode_labels(
        self, y: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """task "classification": learn `classes_` (the sorted distinct training labels) and turn
        labels into their codes. Validation rows whose label never occurs in training are dropped:
        the model could only give them probability 0."""
        from sklearn.utils.multiclass import check_classification_targets

        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if X_val is None:
            return codes, None, None
        y_val = np.asarray(y_val).reshape(-1)
        if y_val.shape[0] != X_val.shape[0]:
            raise ValueError(f"y_val has {y_val.shape[0]} rows, expected {X_val.shape[0]}")
        known = np.isin(y_val, self.classes_)
        return codes, X_val[known], np.searchsorted(self.classes_, y_val[known])

    def _prepare_classes(
        self, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Record the present classes; re-code validation labels and drop rows of absent classes."""
        self._train_classes = np.unique(y_train)
        if self._train_classes.size == 1:
            self._constant_proba = np.zeros(self.classes_.size)
            self._constant_proba[self._train_classes[0]] = 1.0
            return None, None
        if X_val is None or y_val is None:
            return None, None
        keep = np.isin(y_val, self._train_classes)
        if not keep.any():
            return None, None
        return X_val[keep], np.searchsorted(self._train_classes, y_val[keep])

    def _to_all_classes(self, fitted: np.ndarray) -> np.ndarray:
        assert self._train_classes is not None
        if fitted.ndim != 2 or fitted.shape[1] != self._train_classes.size:
            raise RuntimeError(
                f"{self.name} returned probabilities of shape {fitted.shape}, expected (n, {self._train_classes.size})"
            )
        full = np.zeros((fitted.shape[0], self.classes_.size), dtype=np.float64)
        full[:, self._train_classes] = fitted
        return full

    def _check_predict_input(self, X: np.ndarray) -> np.ndarray:
        """X as fit saw it: 2-D, finite, float32/float64, the fitted number of columns."""
        if not self.__sklearn_is_fitted__():
            raise _not_fitted(self)
        from sklearn.utils.validation import validate_data

        return validate_data(self, X, reset=False, dtype=_FLOAT_DTYPES, ensure_min_samples=0)

    def __repr__(self) -> str:
        arguments = ", ".join(f"{key}={value!r}" for key, value in self.get_params(deep=False).items())
        return f"{type(self).__name__}({arguments})"


@dataclass
class EarlyStopper:
    """Best-epoch bookkeeping shared by the deep models' training loops.

    An epoch improves on a strictly lower monitored loss; training stops `patience` epochs after
    the best one, or at once on a non-finite loss (`diverged`).
    """

    patience: int
    best_loss: float = float("inf")
    best_epoch: int = 0
    epochs: int = 0
    diverged: bool = False

    def step(self, epoch: int, loss: float) -> tuple[bool, bool]:
        """Record one epoch's loss; returns (improved: keep these weights, stop: end training)."""
        self.epochs = epoch
        if not np.isfinite(loss):
            self.diverged = True
            return False, True
        if loss < self.best_loss:
            self.best_loss, self.best_epoch = float(loss), epoch
            return True, False
        return False, epoch - self.best_epoch >= self.patience

    def info(self, validated: bool) -> dict[str, Any]:
        """The facts fit_info_ records about training (JSON-ready)."""
        return {
            "epochs": self.epochs,
            "best_epoch": self.best_epoch,
            "best_loss": self.best_loss if np.isfinite(self.best_loss) else None,
            "monitor": "validation" if validated else "training",
            "diverged": self.diverged,
            "used_prior": self.best_epoch == 0,
        }


class EstimatorModel(TabularModel):
    """A model that is one library estimator with a classifier class and a regressor class.

    The tree, boosting and neighbour wrappers all built, fitted and queried their estimator with
    the same lines; those lines live here, and a wrapper states only what differs: its classes,
    the keyword arguments tabrepro owns, and how the search space's names translate.
    """

    @classmethod
    @abstractmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        """(classifier, regressor). Import the library here so that it loads on first fit only.
        A classmethod: the hyperparameter manifest reads the classes' signatures without a model."""

    def _owned_kwargs(self) -> dict[str, Any]:
        """Settings tabrepro owns (seed, threads, verbosity); a search space may not set them."""
        return {}

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        """The search space's parameters in the library's terms; `params` is a copy to edit."""
        return params

    def _fit_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments for the estimator's own `fit`."""
        return {}

    def _new_estimator(self, params: dict[str, Any]) -> Any:
        """An unfitted estimator of the task's class: translated params plus owned settings."""
        classifier, regressor = self._estimator_classes()
        estimator_class = classifier if self.is_classifier else regressor
        return estimator_class(**self._estimator_kwargs(self._owned_kwargs(), params))

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        params = self._translate_params(dict(self.params), X_train)
        self._estimator = self._new_estimator(params).fit(X_train, y_train, **self._fit_kwargs())

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)


# --------------------------------------------------------------------------- deep models
def _rows(inputs: tuple[torch.Tensor | None, ...], rows: Any) -> list[torch.Tensor | None]:
    """The same rows of every network input, passing None inputs through."""
    return [None if t is None else t[rows] for t in inputs]


class TorchModel(TabularModel):
    """A PyTorch network trained by one shared loop; subclasses build the network.

    Training: AdamW over shuffled mini-batches (a generator seeded with `seed`), cross-entropy or
    MSE on the standardised target. After every epoch the validation target loss (mean NLL or
    MSE) is computed; training stops after `patience` epochs without a strictly lower loss, or
    after `max_epochs`, and the best epoch's weights are restored. Without validation rows the
    epoch's mean training loss is monitored instead. `lr_scheduler: true` adds ReduceLROnPlateau
    on the monitored loss (factor 0.2, `lr_patience` epochs, min lr 2e-5: the Grinsztajn et al.
    benchmark's setting). A non-finite loss stops training with the best earlier weights, or with
    the training prior if there are none (`fit_info_["used_prior"]`), as the MLP does.

    Search-space keys named in TRAINING_DEFAULTS configure the loop; all others go to the network.
    """

    accelerator = "gpu"
    TRAINING_DEFAULTS: ClassVar[dict[str, Any]] = {
        "lr": 1e-3,
        "weight_decay": 0.0,
        "batch_size": 512,
        "max_epochs": 300,
        "patience": 40,
        "lr_scheduler": False,
        "lr_patience": 30,
    }
    EVAL_BATCH_SIZE: ClassVar[int] = 4096

    # ----------------------------------------------------------- subclass hooks
    @abstractmethod
    def _build_network(self, architecture: dict[str, Any], X_train: np.ndarray, d_out: int) -> torch.nn.Module:
        """The untrained network; `architecture` holds the non-training search-space keys."""

    def _inputs(self, X: np.ndarray, device: torch.device) -> tuple[torch.Tensor | None, ...]:
        """The network's positional inputs for rows X (default: one float32 matrix); an input
        may be None (e.g. FT-Transformer without continuous features)."""
        import torch

        return (torch.as_tensor(np.asarray(X, dtype=np.float32), device=device),)

    def _parameter_groups(self, network: torch.nn.Module) -> Iterable[Any]:
        """What AdamW optimises (a model may exempt some parameters from weight decay)."""
        return network.parameters()

    # ------------------------------------------------------------- the loop
    def _split_params(self) -> tuple[dict[str, Any], dict[str, Any]]:
        training = dict(self.TRAINING_DEFAULTS)
        architecture: dict[str, Any] = {}
        for key, value in self.params.items():
            (training if key in training else architecture)[key] = value
        for key in ("batch_size", "max_epochs", "patience", "lr_patience"):
            if int(training[key]) < 1:
                raise ValueError(f"{self.name}: {key} must be >= 1, got {training[key]!r}")
            training[key] = int(training[key])
        if float(training["lr"]) <= 0 or float(training["weight_decay"]) < 0:
            raise ValueError(f"{self.name}: lr must be > 0 and weight_decay >= 0")
        return training, architecture

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        import torch

        from tabrepro.nn.session import torch_session

        training, architecture = self._split_params()
        d_out = self.n_fit_classes if self.is_classifier else 1
        self._network: torch.nn.Module | None = None
        self._fallback: np.ndarray | float | None = None
        stopper, best_state = EarlyStopper(training["patience"]), None
        with torch_session(self.seed, self.n_jobs) as device:
            network = self._build_network(architecture, X_train, d_out).to(device)
            inputs, target = self._inputs(X_train, device), self._targets(y_train, device)
            monitor = None
            if X_val is not None and y_val is not None:
                monitor = (self._inputs(X_val, device), self._targets(y_val, device))
            optimizer = torch.optim.AdamW(
                self._parameter_groups(network),
                lr=float(training["lr"]),
                weight_decay=float(training["weight_decay"]),
            )
            scheduler = None
            if training["lr_scheduler"]:
                scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                    optimizer, factor=0.2, patience=training["lr_patience"], min_lr=2e-5
                )
            order = torch.Generator().manual_seed(self.seed)
            batch_size = min(training["batch_size"], X_train.shape[0])
            for epoch in range(1, training["max_epochs"] + 1):
                loss = self._train_epoch(network, optimizer, inputs, target, batch_size, order)
                if monitor is not None and np.isfinite(loss):
                    loss = self._loss_of(network, *monitor)
                improved, stop = stopper.step(epoch, loss)
                if improved:
                    best_state = {k: v.detach().clone() for k, v in network.state_dict().items()}
                if stop:
                    break
                if scheduler is not None:
                    scheduler.step(loss)
        if best_state is None:
            self._fallback = self._training_prior(y_train)
        else:
            network.load_state_dict(best_state)
        self._network, self._device = network.eval(), device
        self.fit_info_.update({**stopper.info(monitor is not None), "device": device.type})

    def _targets(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        import torch

        dtype = torch.long if self.is_classifier else torch.float32
        return torch.as_tensor(np.asarray(y), dtype=dtype, device=device)

    def _loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        if self.is_classifier:
            return F.cross_entropy(output, target)
        return F.mse_loss(output[:, 0], target)

    def _train_epoch(
        self,
        network: torch.nn.Module,
        optimizer: Any,
        inputs: tuple,
        target: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
    ) -> float:
        """One pass over shuffled mini-batches; returns the mean training loss."""
        import torch

        network.train()
        n_rows = target.shape[0]
        order = torch.randperm(n_rows, generator=generator).to(target.device)
        total = torch.zeros((), dtype=torch.float64, device=target.device)  # no sync per batch
        seen = 0
        for start in range(0, n_rows, batch_size):
            rows = order[start : start + batch_size]
            if rows.numel() == 1 and n_rows > 1:
                continue  # BatchNorm cannot normalise a single row
            optimizer.zero_grad(set_to_none=True)
            loss = self._loss(network(*_rows(inputs, rows)), target[rows])
            loss.backward()
            optimizer.step()
            total += loss.detach().double() * rows.numel()
            seen += rows.numel()
        return float(total) / max(seen, 1)

    def _outputs(self, network: torch.nn.Module, inputs: tuple) -> torch.Tensor:
        """Network outputs for all rows, in evaluation mode and in batches."""
        import torch

        network.eval()
        n_rows = next(t.shape[0] for t in inputs if t is not None)
        with torch.no_grad():
            parts = [
                network(*_rows(inputs, slice(start, start + self.EVAL_BATCH_SIZE)))
                for start in range(0, n_rows, self.EVAL_BATCH_SIZE)
            ]
        return torch.cat(parts)

    def _loss_of(self, network: torch.nn.Module, inputs: tuple, target: torch.Tensor) -> float:
        return float(self._loss(self._outputs(network, inputs), target))

    def _predicted_outputs(self, X: np.ndarray) -> np.ndarray:
        from tabrepro.nn.session import torch_session

        assert self._network is not None
        with torch_session(None, self.n_jobs):
            outputs = self._outputs(self._network, self._inputs(X, self._device))
        return outputs.double().cpu().numpy()

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        if isinstance(self._fallback, np.ndarray):
            return np.tile(self._fallback, (X.shape[0], 1))
        logits = self._predicted_outputs(X)
        logits -= logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        return proba / proba.sum(axis=1, keepdims=True)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        if self._fallback is not None:
            return np.full(X.shape[0], float(self._fallback))
        return self._predicted_outputs(X)[:, 0]

    def save_weights(self, path: Path) -> bool:
        """The best epoch's state dict; False for a constant or prior-only model."""
        network = getattr(self, "_network", None)
        if network is None or self._fallback is not None or self.fit_info_.get("constant"):
            return False
        from tabrepro.nn.checkpoint import save_state_dict

        save_state_dict(network, path)
        return True
