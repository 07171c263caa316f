"""Every registered model on tiny binary, multiclass and regression problems."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tabrepro.models.base import NotFittedError, TabularModel
from tabrepro.models.mlp import MLPModel
from tabrepro.models.registry import (
    MODEL_REGISTRY,
    UnknownModelError,
    create_model,
    get_model_class,
)

# Small configurations so each fit takes a fraction of a second.
SMALL_PARAMS: dict[str, dict] = {
    "random_forest": {"n_estimators": 10, "max_features": "all", "criterion": "entropy"},
    "gradient_boosting": {"n_estimators": 10, "max_depth": 3, "learning_rate": 0.1},
    "xgboost": {"n_estimators": 10, "max_depth": 3, "learning_rate": 0.1},
    "catboost": {"n_estimators": 10, "max_depth": 3, "learning_rate": 0.1},
    "lightgbm": {"n_estimators": 10, "max_depth": 3, "learning_rate": 0.1, "min_child_samples": 5},
    "mlp": {"hidden_layer_sizes": (16,), "batch_size": 32, "learning_rate_init": 0.01, "max_epochs": 25},
    "knn": {"n_neighbors": 5, "weights": "distance"},
}
TASKS = ("binary", "multiclass", "regression")


def _problem(task: str) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(42)
    X = rng.normal(size=(150, 5)).astype(np.float32)
    if task == "binary":
        y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    elif task == "multiclass":
        y = np.digitize(X[:, 0], [-0.6, 0.6]).astype(np.int64)
    else:
        y = (2.0 * X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=150)).astype(np.float64)
    return X[:100], y[:100], X[100:125], y[100:125], X[125:], y[125:]


def _params(name: str, task: str) -> dict:
    params = dict(SMALL_PARAMS[name])
    if name == "random_forest" and task == "regression":
        params["criterion"] = "squared_error"
    return params


def test_registry_covers_the_cpu_baselines() -> None:
    # Deep models (NPT, TabNet, ...) are registered too; they have test files of their own.
    assert set(SMALL_PARAMS) <= set(MODEL_REGISTRY)
    for name, cls in MODEL_REGISTRY.items():
        assert issubclass(cls, TabularModel) and cls.name == name
        assert get_model_class(name) is cls
    for name in SMALL_PARAMS:
        assert MODEL_REGISTRY[name].accelerator == "cpu"


def test_unknown_model_error_lists_known_models() -> None:
    with pytest.raises(UnknownModelError, match="unknown model .svm.; known models: ") as error:
        get_model_class("svm")
    assert all(name in str(error.value) for name in MODEL_REGISTRY)
    assert issubclass(UnknownModelError, ValueError)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("name", sorted(SMALL_PARAMS))
def test_fit_predict_shapes_and_determinism(
    name: str, task: str, capfd: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # any stray training files (catboost_info) would land here
    X_train, y_train, X_val, y_val, X_test, y_test = _problem(task)
    n_classes = 3 if task == "multiclass" else None

    def fitted() -> TabularModel:
        model = create_model(name, task, _params(name, task), seed=3, n_classes=n_classes)
        return model.fit(X_train, y_train, X_val, y_val)

    first, second = fitted(), fitted()
    if task == "regression":
        pred = first.predict(X_test)
        assert pred.shape == (25,) and pred.dtype == np.float64 and np.isfinite(pred).all()
        np.testing.assert_array_equal(pred, second.predict(X_test))
        assert np.corrcoef(pred, y_test)[0, 1] > 0.5  # learned something
        with pytest.raises(AttributeError):
            first.predict_proba(X_test)
    else:
        proba = first.predict_proba(X_test)
        assert proba.shape == (25, 3 if task == "multiclass" else 2)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
        np.testing.assert_array_equal(proba, second.predict_proba(X_test))
        pred = first.predict(X_test)
        np.testing.assert_array_equal(pred, proba.argmax(axis=1))
        assert (pred == y_test).mean() > 0.6
    captured = capfd.readouterr()
    assert captured.out == "", f"{name} printed to stdout"
    assert list(tmp_path.iterdir()) == [], f"{name} wrote files"


@pytest.mark.parametrize("name", sorted(SMALL_PARAMS))
def test_class_missing_from_training_rows(name: str) -> None:
    X_train, y_train, X_val, y_val, X_test, _ = _problem("multiclass")
    # Four classes in the schema; class 3 never occurs, class 1 is removed from training only.
    keep = y_train != 1
    model = create_model(name, "multiclass", _params(name, "multiclass"), seed=0, n_classes=4)
    model.fit(X_train[keep], y_train[keep], X_val, y_val)
    proba = model.predict_proba(X_test)
    assert proba.shape == (25, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    assert (proba[:, [1, 3]] == 0).all()
    assert set(model.predict(X_test)) <= {0, 2}


def test_single_class_training_set_gives_constant_model() -> None:
    X_train, _, X_val, y_val, X_test, _ = _problem("binary")
    model = create_model("xgboost", "binary", SMALL_PARAMS["xgboost"], seed=0)
    model.fit(X_train, np.ones(100, dtype=np.int64), X_val, y_val)
    np.testing.assert_array_equal(model.predict_proba(X_test), np.tile([0.0, 1.0], (25, 1)))
    assert model.fit_info_ == {"constant": True}


def test_different_seeds_change_a_random_model() -> None:
    X_train, y_train, X_val, y_val, X_test, _ = _problem("regression")
    preds = [
        create_model("random_forest", "regression", {"n_estimators": 5}, seed=s).fit(X_train, y_train).predict(X_test)
        for s in (0, 1)
    ]
    assert not np.array_equal(*preds)


def test_interface_errors() -> None:
    with pytest.raises(ValueError, match="task"):
        create_model("knn", "ranking", {}, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_classes"):
        create_model("knn", "multiclass", {}, seed=0)
    with pytest.raises(ValueError, match="n_classes"):
        create_model("knn", "binary", {}, seed=0, n_classes=3)
    with pytest.raises(ValueError, match="n_jobs"):
        create_model("knn", "regression", {}, seed=0, n_jobs=0)
    # -1 (every core) is kept as given, as scikit-learn's clone requires; it is resolved at fit time.
    assert create_model("knn", "regression", {}, seed=0, n_jobs=-1).n_jobs == -1
    X_train, y_train, *_ = _problem("binary")
    model = create_model("random_forest", "binary", {"random_state": 5}, seed=0)
    with pytest.raises(ValueError, match="random_state"):
        model.fit(X_train, y_train)
    with pytest.raises(NotFittedError):
        create_model("knn", "binary", {}, seed=0).predict(X_train)
    fitted = create_model("knn", "binary", {}, seed=0).fit(X_train, y_train)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(X_train[:, :3])
    with pytest.raises(ValueError, match="class indices"):
        create_model("knn", "binary", {}, seed=0).fit(X_train, y_train + 1)


# (model, search-space params, task) -> what the library estimator must have been given
# (None: not given at all, so the library's default applies)
TRANSLATIONS = [
    ("catboost", {"bagging_temperature": 0.5}, "binary", {"bootstrap_type": "Bayesian"}),
    ("catboost", {"learning_rate": 0.1}, "binary", {"bootstrap_type": None}),  # CatBoost's own
    ("catboost", {}, "regression", {"random_seed": 4, "thread_count": 2, "allow_writing_files": False}),
    ("lightgbm", {"subsample": 0.5}, "binary", {"subsample": 0.5, "subsample_freq": 1}),
    ("lightgbm", {"subsample": 1.0}, "binary", {"subsample_freq": 0}),
    ("lightgbm", {}, "regression", {"random_state": 4, "n_jobs": 2, "deterministic": True}),
    ("xgboost", {}, "binary", {"tree_method": "hist", "random_state": 4, "n_jobs": 2}),
    ("xgboost", {"tree_method": "exact"}, "regression", {"tree_method": "exact"}),
    ("random_forest", {"max_features": "all"}, "binary", {"max_features": 1.0, "random_state": 4}),
    ("random_forest", {"max_features": "sqrt"}, "regression", {"max_features": "sqrt", "n_jobs": 2}),
    ("gradient_boosting", {}, "binary", {"random_state": 4}),
    ("knn", {"n_neighbors": 7}, "regression", {"n_neighbors": 7, "n_jobs": 2}),
]


@pytest.mark.parametrize(("name", "params", "task", "expected"), TRANSLATIONS)
def test_search_space_translations_and_owned_settings_reach_the_estimator(
    name: str, params: dict, task: str, expected: dict
) -> None:
    X_train, y_train, *_ = _problem(task)
    small = {k: v for k, v in _params(name, task).items() if k not in params}
    model = create_model(name, task, {**small, **params}, seed=4, n_jobs=2)
    given = model.fit(X_train, y_train)._estimator.get_params()
    assert {key: given.get(key) for key in expected} == expected
    assert model.params == {**small, **params}  # the configuration itself is never edited


@pytest.mark.parametrize(
    ("name", "owned"),
    [
        ("catboost", "random_seed"),
        ("catboost", "thread_count"),
        ("lightgbm", "deterministic"),
        ("xgboost", "n_jobs"),
        ("gradient_boosting", "random_state"),
        ("knn", "n_jobs"),
        ("mlp", "max_iter"),
        ("random_forest", "verbose"),
    ],
)
def test_owned_settings_cannot_come_from_a_search_space(name: str, owned: str) -> None:
    X_train, y_train, *_ = _problem("binary")
    model = create_model(name, "binary", {**SMALL_PARAMS[name], owned: 1}, seed=0)
    with pytest.raises(ValueError, match=f"{owned}.*set by tabrepro"):
        model.fit(X_train, y_train)


def test_knn_caps_neighbours_at_training_rows() -> None:
    X_train, y_train, *_ = _problem("regression")
    model = create_model("knn", "regression", {"n_neighbors": 1000}, seed=0).fit(X_train[:30], y_train[:30])
    assert model.fit_info_["n_neighbors"] == 30


def test_mlp_early_stopping_restores_best_epoch() -> None:
    X_train, y_train, X_val, y_val, X_test, _ = _problem("regression")
    params = {"hidden_layer_sizes": (64, 64), "batch_size": 16, "learning_rate_init": 0.05}
    model = MLPModel("regression", params, seed=0, max_epochs=200, patience=5)
    model.fit(X_train, y_train, X_val, y_val)
    info = model.fit_info_
    assert info["monitor"] == "validation" and not info["diverged"]
    assert info["epochs"] - info["best_epoch"] == 5  # stopped by patience, not by max_epochs
    val_mse = float(np.mean((model.predict(X_val) - y_val) ** 2))
    assert val_mse == pytest.approx(info["best_loss"], rel=1e-5)  # the best weights are in place


def test_mlp_schedule_and_epoch_overrides_from_params() -> None:
    X_train, y_train, X_val, y_val, *_ = _problem("binary")
    params = {
        "solver": "sgd",
        "learning_rate": "invscaling",
        "learning_rate_init": 0.1,
        "max_epochs": 3,
        "patience": 2,
        "hidden_layer_sizes": [8],
    }
    model = create_model("mlp", "binary", params, seed=0).fit(X_train, y_train, X_val, y_val)
    assert model.fit_info_["epochs"] <= 3
    optimizer_lr = model._estimator._optimizer.learning_rate
    assert optimizer_lr < 0.1  # invscaling decayed the rate across partial_fit calls
    with pytest.raises(ValueError, match="early_stopping"):
        create_model("mlp", "binary", {"early_stopping": True}, seed=0).fit(X_train, y_train)


def test_mlp_divergence_restores_the_last_finite_epoch() -> None:
    X_train, y_train, X_val, y_val, X_test, _ = _problem("regression")
    params = {"solver": "sgd", "learning_rate_init": 1e6, "momentum": 0.0, "hidden_layer_sizes": (8,), "max_epochs": 5}
    model = create_model("mlp", "regression", params, seed=0).fit(X_train, y_train, X_val, y_val)
    assert model.fit_info_["diverged"] and not model.fit_info_["used_prior"]
    assert model.fit_info_["best_epoch"] < model.fit_info_["epochs"]
    assert np.isfinite(model.predict(X_test)).all()


@pytest.mark.parametrize("task", ["regression", "multiclass"])
def test_mlp_divergence_in_first_epoch_falls_back_to_the_prior(task: str, monkeypatch) -> None:
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    def explode(self, X, y, **kwargs):
        raise ValueError("Solver produced non-finite parameter weights.")

    monkeypatch.setattr(MLPRegressor, "partial_fit", explode)
    monkeypatch.setattr(MLPClassifier, "partial_fit", explode)
    X_train, y_train, X_val, y_val, X_test, _ = _problem(task)
    n_classes = 3 if task == "multiclass" else None
    model = create_model("mlp", task, {}, seed=0, n_classes=n_classes).fit(X_train, y_train, X_val, y_val)
    assert model.fit_info_["used_prior"]
    if task == "regression":
        np.testing.assert_allclose(model.predict(X_test), np.mean(y_train))
    else:
        prior = np.bincount(y_train, minlength=3) / y_train.size
        np.testing.assert_allclose(model.predict_proba(X_test), np.tile(prior, (25, 1)))


def test_mlp_other_training_errors_propagate(monkeypatch) -> None:
    from sklearn.neural_network import MLPRegressor

    def broken(self, X, y, **kwargs):
        raise ValueError("unrelated failure")

    monkeypatch.setattr(MLPRegressor, "partial_fit", broken)
    with pytest.raises(ValueError, match="unrelated failure"):
        create_model("mlp", "regression", {}, seed=0).fit(*_problem("regression")[:4])
