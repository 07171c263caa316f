"""The deep baselines (TabNet, FT-Transformer, ResNet) on tiny problems, on the CPU, in seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tabrepro.features import FeatureLayout
from tabrepro.models.base import FitContext, TabularModel
from tabrepro.models.ft_transformer import FTTransformerModel
from tabrepro.models.resnet import ResNetModel
from tabrepro.models.tabnet import TabNetModel, _ghost_batch_size

MODELS: dict[str, type[TabularModel]] = {
    "tabnet": TabNetModel,
    "ft_transformer": FTTransformerModel,
    "resnet": ResNetModel,
}
# Small enough that one fit takes well under a second on one CPU thread.
SMALL_PARAMS: dict[str, dict] = {
    "tabnet": {"n_d": 8, "n_steps": 2, "batch_size": 64, "virtual_batch_size": 32, "max_epochs": 20, "patience": 20},
    "ft_transformer": {
        "n_blocks": 1,
        "d_block": 16,
        "attention_n_heads": 4,
        "lr": 3e-3,
        "batch_size": 64,
        "max_epochs": 25,
        "patience": 25,
    },
    "resnet": {"n_blocks": 1, "d_block": 32, "lr": 3e-3, "batch_size": 64, "max_epochs": 25, "patience": 25},
}
TASKS = ("binary", "multiclass", "regression")
# Two continuous features, a 3-level categorical one-hot group, one more continuous feature.
GROUPS = (("continuous", 1), ("continuous", 1), ("categorical", 3), ("continuous", 1))
CONTEXT = FitContext(feature_layout=FeatureLayout.from_groups(GROUPS))


def _problem(task: str) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    n = 300
    numeric = rng.normal(size=(n, 3)).astype(np.float32)
    level = rng.integers(0, 3, size=n)
    X = np.hstack([numeric[:, :2], np.eye(3, dtype=np.float32)[level], numeric[:, 2:]])
    X[-5:, 2:5] = 0.0  # test rows whose level was never seen in training
    if task == "binary":
        y = (numeric[:, 0] + 0.5 * numeric[:, 1] + 1.5 * (level == 1) > 0.5).astype(np.int64)
    elif task == "multiclass":
        y = np.digitize(numeric[:, 0] + (level == 2), [-0.5, 0.7]).astype(np.int64)
    else:
        y = 2.0 * numeric[:, 0] - numeric[:, 1] + (level == 1) + 0.1 * rng.normal(size=n)
    return X[:200], y[:200], X[200:250], y[200:250], X[250:], y[250:]


def _model(name: str, task: str, seed: int = 3, **overrides) -> TabularModel:
    n_classes = 3 if task == "multiclass" else None
    return MODELS[name](task, {**SMALL_PARAMS[name], **overrides}, seed=seed, n_classes=n_classes)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_fit_predict_learns_is_deterministic_quiet_and_saves_weights(
    name: str, task: str, capfd: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # anything the library writes to the working directory lands here
    X_train, y_train, X_val, y_val, X_test, y_test = _problem(task)
    threads, rng_state = torch.get_num_threads(), torch.random.get_rng_state()

    first = _model(name, task).fit(X_train, y_train, X_val, y_val, context=CONTEXT)
    second = _model(name, task).fit(X_train, y_train, X_val, y_val, context=CONTEXT)

    assert torch.get_num_threads() == threads  # thread budget restored
    assert torch.equal(torch.random.get_rng_state(), rng_state)  # caller's RNG untouched
    info = first.fit_info_
    assert info["monitor"] == "validation" and info["device"] == "cpu"
    assert not info["diverged"] and not info["used_prior"]
    if task == "regression":
        pred = first.predict(X_test)
        assert pred.shape == (50,) and pred.dtype == np.float64 and np.isfinite(pred).all()
        np.testing.assert_array_equal(pred, second.predict(X_test))
        # beats the trivial baseline (predicting the mean) by a wide margin
        assert np.mean((pred - y_test) ** 2) < 0.5 * np.var(y_test)
    else:
        proba = first.predict_proba(X_test)
        assert proba.shape == (50, 3 if task == "multiclass" else 2)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
        np.testing.assert_array_equal(proba, second.predict_proba(X_test))
        majority = np.bincount(y_test).max() / y_test.size
        assert (first.predict(X_test) == y_test).mean() > majority + 0.1

    assert capfd.readouterr().out == "", f"{name} printed to stdout"
    assert list(work.iterdir()) == [], f"{name} wrote files into the working directory"

    weights = tmp_path / "out" / "weights.pt"
    assert first.save_weights(weights) and weights.is_file()
    state = torch.load(weights, weights_only=True)
    assert state and all(isinstance(v, torch.Tensor) for v in state.values())
    assert not list(weights.parent.glob(".*tmp*"))  # written atomically, no leftovers


@pytest.mark.parametrize("name", sorted(MODELS))
def test_early_stopping_stops_on_validation_loss_and_keeps_the_best_epoch(name: str) -> None:
    X_train, y_train, X_val, y_val, *_ = _problem("regression")
    fast = {"tabnet": {"lr": 0.05}, "ft_transformer": {"lr": 2e-2}, "resnet": {"lr": 2e-2}}[name]
    model = _model(name, "regression", max_epochs=150, patience=3, **fast)
    model.fit(X_train[:80], y_train[:80], X_val, y_val, context=CONTEXT)
    info = model.fit_info_
    assert info["epochs"] < 150  # stopped by patience, not by max_epochs
    assert info["epochs"] - info["best_epoch"] == 3
    val_mse = float(np.mean((model.predict(X_val) - y_val) ** 2))
    assert val_mse == pytest.approx(info["best_loss"], rel=1e-4)  # the best weights are in place


@pytest.mark.parametrize("name", sorted(MODELS))
def test_without_validation_rows_the_training_loss_is_monitored(name: str) -> None:
    X_train, y_train, *_ = _problem("binary")
    model = _model(name, "binary", max_epochs=3).fit(X_train, y_train, context=CONTEXT)
    assert model.fit_info_["monitor"] == "training" and model.fit_info_["epochs"] == 3


@pytest.mark.parametrize("name", sorted(MODELS))
def test_class_missing_from_training_rows(name: str) -> None:
    X_train, y_train, X_val, y_val, X_test, _ = _problem("multiclass")
    keep = y_train != 1  # four classes in the schema; 3 never occurs, 1 is absent from training
    model = MODELS[name]("multiclass", {**SMALL_PARAMS[name], "max_epochs": 3}, seed=0, n_classes=4)
    model.fit(X_train[keep], y_train[keep], X_val, y_val, context=CONTEXT)
    proba = model.predict_proba(X_test)
    assert proba.shape == (50, 4) and (proba[:, [1, 3]] == 0).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)


def test_categorical_groups_are_embedded_as_one_feature() -> None:
    X_train, y_train, X_val, y_val, X_test, _ = _problem("binary")
    ft = _model("ft_transformer", "binary", d_block=30, attention_n_heads=8, max_epochs=2)
    ft.fit(X_train, y_train, X_val, y_val, context=CONTEXT)
    network = ft._network
    assert network.cat_embeddings is not None and len(network.cat_embeddings.embeddings) == 1
    assert network.cat_embeddings.embeddings[0].num_embeddings == 4  # 3 levels + "no level"
    assert network.cont_embeddings.weight.shape[0] == 3
    assert ft.fit_info_["d_block"] == 32  # rounded to a multiple of the 8 heads

    tabnet = _model("tabnet", "binary", max_epochs=2).fit(X_train, y_train, X_val, y_val, context=CONTEXT)
    assert tabnet._estimator.cat_idxs == [2] and tabnet._estimator.cat_dims == [4]
    assert np.isfinite(tabnet.predict_proba(X_test)).all()  # unseen level: the extra code
    one_hot = _model("tabnet", "binary", max_epochs=2, cat_encoding="one_hot")
    one_hot.fit(X_train, y_train, context=CONTEXT)
    assert one_hot._estimator.cat_idxs == [] and one_hot.fit_info_["n_categorical"] == 0

    plain = _model("ft_transformer", "binary", max_epochs=1).fit(X_train, y_train)
    assert plain._network.cat_embeddings is None  # no feature groups: every column continuous


def test_feature_layout_codes_and_checks() -> None:
    layout = FeatureLayout.from_groups((("categorical", 2), ("continuous", 1)))
    X = np.array([[1, 0, 0.5], [0, 1, -1.0], [0, 0, 2.0]], dtype=np.float32)
    np.testing.assert_array_equal(layout.embedding_codes(X), [[0], [1], [2]])
    assert layout.embedding_sizes == [3] and layout.categorical_features == (0,)
    np.testing.assert_array_equal(layout.per_feature(X), [[0, 0.5], [1, -1.0], [2, 2.0]])
    assert FitContext().layout_for(4).categorical_features == ()
    with pytest.raises(ValueError, match="cover"):
        FitContext(feature_layout=FeatureLayout.from_groups((("categorical", 2),))).layout_for(3)
    with pytest.raises(ValueError, match="one column"):
        FeatureLayout.from_groups((("continuous", 2),))


@pytest.mark.parametrize(
    ("name", "key"), [("tabnet", "seed"), ("tabnet", "device_name"), ("ft_transformer", "d_out"), ("resnet", "d_in")]
)
def test_settings_owned_by_the_wrapper_cannot_be_searched(name: str, key: str) -> None:
    X_train, y_train, *_ = _problem("binary")
    model = MODELS[name]("binary", {**SMALL_PARAMS[name], key: 1}, seed=0)
    with pytest.raises(ValueError, match=key):
        model.fit(X_train, y_train, context=CONTEXT)


def test_tabnet_settings_translation() -> None:
    higgs = TabNetModel(
        "binary",
        {"n_d": 96, "n_a": 32, "n_steps": 8, "lr": 0.025, "batch_size": 8192, "virtual_batch_size": 256},
        seed=0,
    )
    fit, schedule, encoding, constructor = higgs._settings()
    assert constructor == {"n_d": 96, "n_a": 32, "n_steps": 8}
    assert fit == {
        "batch_size": 8192,
        "virtual_batch_size": 256,
        "max_epochs": 100,
        "patience": 10,
        "lr": 0.025,
        "weight_decay": 0.0,
    }  # unset: library defaults
    assert schedule == {} and encoding == "embedding"
    tied = TabNetModel("binary", {"n_d": 24, "scheduler_step_size": 10, "scheduler_gamma": 0.95}, seed=0)
    _, schedule, _, constructor = tied._settings()
    assert constructor == {"n_d": 24, "n_a": 24} and schedule == {"step_size": 10, "gamma": 0.95}
    with pytest.raises(ValueError, match="cat_encoding"):
        TabNetModel("binary", {"cat_encoding": "ordinal"}, seed=0)._settings()
    with pytest.raises(ValueError, match="together"):
        TabNetModel("binary", {"scheduler_gamma": 0.9}, seed=0)._settings()
    X_train, y_train, *_ = _problem("binary")
    decayed = _model("tabnet", "binary", max_epochs=3, scheduler_step_size=1, scheduler_gamma=0.5)
    decayed.fit(X_train, y_train, context=CONTEXT)
    assert decayed._estimator._optimizer.param_groups[0]["lr"] == pytest.approx(0.02 * 0.5**3)
    assert _ghost_batch_size(128, 64) == 64
    assert _ghost_batch_size(13, 4) == 13  # 4+4+4+1 would leave a one-row ghost batch
    assert _ghost_batch_size(200, 128) == 128  # two chunks of 100


def test_divergence_falls_back_to_the_training_prior(tmp_path: Path) -> None:
    X_train, y_train, X_val, y_val, X_test, _ = _problem("regression")
    model = _model("resnet", "regression", lr=1e12, max_epochs=5)
    model.fit(X_train, y_train, X_val, y_val, context=CONTEXT)
    info = model.fit_info_
    assert info["diverged"] and info["used_prior"] and info["best_loss"] is None
    np.testing.assert_allclose(model.predict(X_test), np.mean(y_train))
    assert not model.save_weights(tmp_path / "weights.pt")
    assert not (tmp_path / "weights.pt").exists()


def test_class_flags() -> None:
    for name, cls in MODELS.items():
        assert cls.name == name and cls.accelerator == "gpu" and not cls.per_config_jobs
