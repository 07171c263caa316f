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

Two partial implementations sit on top of `TabularModel`: `EstimatorModel`
(tabrepro.models.estimator: one library estimator, the tree, boosting and neighbour baselines)
and `TorchModel` (tabrepro.models.torch_model: a PyTorch network trained by one shared loop).

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

import numpy as np
from threadpoolctl import threadpool_limits

from tabrepro.features import FeatureLayout
from tabrepro.nn.session import resolve_threads
from tabrepro.tasks import LABELS_TASK, MODEL_TASKS, ModelTask

if TYPE_CHECKING:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils import Tags

    from tabrepro.models.rules import Hyperparameters

__all__ = [
    "TabularModel",
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
        from sklearn.exceptions import NotFittedError  # deferred: loads sklearn

        return NotFittedError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _not_fitted(model: TabularModel) -> Exception:
    from sklearn.exceptions import NotFittedError  # deferred: loads sklearn

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
    # The layout of its trainer's resumable state file, if it writes one: a part of the state's key.
    checkpoint_format: ClassVar[int | None] = None
    # The cost-model family that prices its jobs (tabrepro.costmodel: one fit's work terms and
    # their calibrated weights); a registered variant (a subclass) inherits its base's.
    cost_family: ClassVar[str]

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
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags  # deferred: loads sklearn

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
        from sklearn.utils.validation import check_array, validate_data  # deferred: loads sklearn

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
            assert self._train_classes is not None  # _prepare_classes set it
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
        from sklearn.metrics import accuracy_score, r2_score  # deferred: loads sklearn

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
        from sklearn.utils.multiclass import check_classification_targets  # deferred: loads sklearn

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
        from sklearn.utils.validation import validate_data  # deferred: loads sklearn

        return validate_data(self, X, reset=False, dtype=_FLOAT_DTYPES, ensure_min_samples=0)

    def __repr__(self) -> str:
        arguments = ", ".join(f"{key}={value!r}" for key, value in self.get_params(deep=False).items())
        return f"{type(self).__name__}({arguments})"
