"""BiSHop behind the model interface: registry entries, ablation switches, a fit on tiny data."""

from __future__ import annotations

import numpy as np
import pytest

from tabrepro.features import FeatureLayout
from tabrepro.models.base import FitContext
from tabrepro.models.bishop.interface import ABLATIONS
from tabrepro.models.registry import get_model_class

TINY = dict(
    d_model=16,
    n_heads=2,
    ffn_dim=32,
    embed_dim=8,
    patch_size=4,
    n_pooling=3,
    n_levels=2,
    merge_factor=2,
    n_decoded=8,
    head_hidden=[1.0],
    batch_size=32,
    onednn_linear=False,
    device="cpu",
    max_epochs=3,
    lr=1e-3,
)


def tiny_data(task: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    colour = rng.integers(0, 3, 200)
    X = np.column_stack([rng.normal(size=(200, 3)), np.eye(3)[colour]]).astype(np.float32)
    signal = X[:, 0] + (colour == 1)
    y = (signal > 0.5).astype(int) if task == "binary" else signal
    groups = (("continuous", 1),) * 3 + (("categorical", 3),)
    return X, y, groups


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_bishop_fits_through_the_interface_and_saves_weights(task, tmp_path):
    X, y, groups = tiny_data(task)
    model = get_model_class("bishop")(task, TINY, seed=3, n_classes=2 if task == "binary" else None)
    model.fit(
        X[:150],
        y[:150],
        X[150:],
        y[150:],
        context=FitContext(feature_layout=FeatureLayout.from_groups(groups), work_dir=tmp_path / "state"),
    )
    out = model.predict_proba(X[150:]) if task == "binary" else model.predict(X[150:])
    assert out.shape[0] == 50 and np.isfinite(out).all()
    assert model.save_weights(tmp_path / "weights.pt") and (tmp_path / "weights.pt").stat().st_size > 0
    assert model.fit_info_["epochs"] == 3


def test_every_ablation_is_registered_and_fixes_its_switch():
    for name, switches in ABLATIONS.items():
        cls = get_model_class(name)
        model = cls("binary", TINY, seed=0)
        config = model._config()
        assert cls.name == name and cls.per_config_jobs and cls.accelerator == "gpu"
        assert all(getattr(config, key) == value for key, value in switches.items())
    with pytest.raises(ValueError, match="seed"):
        get_model_class("bishop")("binary", {**TINY, "seed": 1}, seed=0)._config()
