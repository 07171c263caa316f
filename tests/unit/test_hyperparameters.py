"""Every registered model declares the hyperparameters it accepts, and the declarations are true:
the manifest matches the installed libraries, the names a wrapper reads are really consumed, the
declared ranges agree with the models' own validation, and typos and wrong values are refused."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from tabrepro.config import _did_you_mean
from tabrepro.models import hyperparameters as hp
from tabrepro.models.bishop.config import BiSHopConfig
from tabrepro.models.estimator import EstimatorModel
from tabrepro.models.hyperparameters import accepted, check_params
from tabrepro.models.library_log import repeats
from tabrepro.models.npt.config import NPTConfig
from tabrepro.models.registry import MODEL_NAMES, MODEL_REGISTRY, create_model
from tabrepro.models.rules import FAMILIES, TORCH_TRAINING_RULES, Accept, rule_admits
from tabrepro.models.torch_model import TorchModel

# A valid value for every name a wrapper reads itself (not a library keyword), small enough to fit
# in a moment on 60 rows.
WRAPPER_VALUES = {
    "max_epochs": 2,
    "patience": 1,
    "batch_size": 16,
    "virtual_batch_size": 8,
    "lr": 0.01,
    "weight_decay": 0.0,
    "lr_scheduler": True,
    "lr_patience": 1,
    "scheduler_step_size": 1,
    "scheduler_gamma": 0.9,
    "cat_encoding": "one_hot",
    "solver": "adam",
}
LIBRARY_MODELS = [m for m in MODEL_NAMES if MODEL_REGISTRY[m].declared_hyperparameters().library is not None]


def _data(task: str) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = (X[:, 0] > 0).astype(np.int64) if task == "binary" else X[:, 0] + 0.1 * rng.normal(size=60)
    return X[:45], y[:45], X[45:], y[45:]


def test_manifest_matches_the_installed_libraries():
    """Regenerating hyperparameters.json from the installed libraries gives the committed file, so a
    version bump that adds, removes or retypes a parameter cannot go unnoticed."""
    assert hp._dump(hp.build_manifest()) == hp.MANIFEST_PATH.read_text(), (
        "run `python -m tabrepro.models.hyperparameters --write` and review the diff"
    )


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_every_model_declares_names_and_refuses_a_typo(model):
    for family in FAMILIES:
        names = accepted(model, family).rules
        assert names, f"{model} accepts nothing for {family}"
        real = sorted(names)[0]
        typo = real[:-1] + ("x" if real[-1] != "x" else "y")
        problem = check_params(model, {typo: 1}, {family}, _did_you_mean)
        if typo in names:  # the typo happens to be another real name
            continue
        assert problem is not None
        path, message = problem
        assert path == [typo] and f"unknown hyperparameter {typo!r} for model {model!r}" in message
        assert "did you mean" in message


@pytest.mark.parametrize("model", [m for m in MODEL_NAMES if issubclass(MODEL_REGISTRY[m], EstimatorModel)])
def test_owned_settings_are_declared_and_refused(model):
    """What a wrapper passes to the library itself (seed, threads, logging) may not come from
    params.yaml: the declaration lists at least every key of `_owned_kwargs`."""
    instance = create_model(model, "binary", {}, seed=0)
    owned = set(instance._owned_kwargs())
    declared = MODEL_REGISTRY[model].declared_hyperparameters().owned
    assert owned <= set(declared), f"{model}: {sorted(owned - set(declared))} not declared as owned"
    for key in owned:
        problem = check_params(model, {key: 1}, None, _did_you_mean)
        assert problem is not None and "does not take" in problem[1]


@pytest.mark.parametrize("model", LIBRARY_MODELS)
def test_names_the_wrapper_reads_are_consumed(model):
    """A name the wrapper declares beyond the library's signature is read by the wrapper: fitting
    with it set works (a library would refuse or ignore it otherwise)."""
    declared = MODEL_REGISTRY[model].declared_hyperparameters()
    library_names = set(hp.read_manifest()["models"][model]["classification"])
    own = sorted(set(declared.reads) - library_names)
    values = {name: WRAPPER_VALUES[name] for name in own}
    assert set(values) == set(own), f"add a value for {sorted(set(own) - set(values))} to WRAPPER_VALUES"
    assert check_params(model, values, {"classification"}, _did_you_mean) is None
    before = {k: v for k, v in repeats().items() if "not used" in k or "Unknown parameter" in k}
    X, y, Xv, yv = _data("binary")
    create_model(model, "binary", values, seed=0).fit(X, y, Xv, yv)
    after = {k: v for k, v in repeats().items() if "not used" in k or "Unknown parameter" in k}
    assert after == before, f"{model} ignored a parameter: {after}"


def _first_values(params: dict) -> dict:
    """One configuration of a params mapping: a choice's first option, a range's middle, the
    classification branch of a per-task split; sizes shrunk so that a fit takes a moment."""
    config = {}
    for name, spec in params.items():
        if isinstance(spec, dict) and set(spec) <= {"classification", "regression"}:
            spec = spec["classification"]
        if isinstance(spec, dict):
            kind, body = next(iter(spec.items()))
            spec = body[0] if kind == "choice" else (body[0] + body[1]) / 2
            spec = int(spec) if kind.endswith("int") else spec
        config[name] = tuple(spec) if isinstance(spec, list) else spec
    small = {
        "n_estimators": 5,
        "iterations": 5,
        "max_epochs": 2,
        "patience": 1,
        "batch_size": 16,
        "virtual_batch_size": 8,
        "n_blocks": 1,
        "d_block": 8,
        "hidden_layer_sizes": (8,),
    }
    return {name: small.get(name, value) for name, value in config.items()}


@pytest.mark.parametrize("model", LIBRARY_MODELS)
def test_library_values_params_yaml_uses_fit(model):
    """Every search space of the real params.yaml, at its first values, builds and fits the model,
    and no name it sets is reported as ignored (the declared names are really accepted)."""

    from conftest import REPO
    from tabrepro.config import read_params_file

    raw = read_params_file(REPO / "params.yaml")
    configs = {
        str(_first_values(space[model]["params"])): _first_values(space[model]["params"])
        for space in raw["search_spaces"].values()
        if model in space
    }
    assert configs, f"params.yaml sets nothing for {model}"
    X, y, Xv, yv = _data("binary")
    for config in configs.values():
        create_model(model, "binary", config, seed=0).fit(X, y, Xv, yv)
    ignored = [k for k in repeats() if "not used" in k or "Unknown parameter" in k]
    assert not any(f'"{name}"' in k or f": {name}" in k for k in ignored for c in configs.values() for name in c)


def test_torch_training_rules_cover_the_training_loop():
    assert set(TORCH_TRAINING_RULES) == set(TorchModel.TRAINING_DEFAULTS)


def _numeric_ranges(rules):
    for name, rule in rules.items():
        for alternative in rule:
            if (
                alternative.type in ("int", "float")
                and alternative.options is None
                and (alternative.low is not None or alternative.high is not None)
            ):
                yield name, alternative


# Declared deliberately stricter than the config's own validate() (a negative lr or rFF width
# is meaningless, but NPTConfig does not check it).
STRICTER_THAN_VALIDATE = {("npt", "lr"), ("npt", "rff_expansion")}
# Fields that need another field set for a bound to be valid on its own.
CONTEXT = {"embed_dim": {"n_heads": 1}, "d_model": {"n_heads": 1}, "shared_embed_dim": {"embed_dim": 64}}


@pytest.mark.parametrize("model, config_class", [("npt", NPTConfig), ("bishop", BiSHopConfig)])
def test_declared_ranges_agree_with_the_config_validation(model, config_class):
    rules = accepted(model, "classification").rules
    checked = 0
    for name, alternative in _numeric_ranges(rules):
        context = CONTEXT.get(name, {})
        step = 1 if alternative.type == "int" else 1e-9
        for bound, inside, side in ((alternative.low, "both left", -1), (alternative.high, "both right", +1)):
            if bound is None:
                continue
            inclusive = alternative.closed in inside.split()
            value = int(bound) if alternative.type == "int" else float(bound)
            if inclusive:
                config_class(**context, **{name: value})  # the bound itself is valid
                outside = value + side * step
            else:
                outside = value
            assert not rule_admits(rules[name], outside)
            if (model, name) in STRICTER_THAN_VALIDATE:
                continue
            with pytest.raises(ValueError):
                config_class(**context, **{name: outside})
            checked += 1
    assert checked >= 15


def test_every_config_field_but_the_seed_is_declared():
    npt = accepted("npt", "regression")
    assert set(npt.rules) == {f.name for f in dataclasses.fields(NPTConfig)} - {"seed"}
    ablation = accepted("bishop_no_decoder", "classification")
    assert "decoder" not in ablation.rules and "fixed to False" in ablation.owned["decoder"]
    problem = check_params("bishop_no_decoder", {"decoder": True}, None, _did_you_mean)
    assert problem is not None and "fixed to False by this ablation" in problem[1]


@pytest.mark.parametrize(
    "params, path, text",
    [
        ({"max_depth": {"choice": [3, "five"]}}, ["max_depth", "choice", 1], "'five' is not accepted"),
        ({"max_depth": True}, ["max_depth"], "True is not accepted"),
        ({"subsample": {"uniform": [0.5, 1.5]}}, ["subsample", "uniform"], "reaches values"),
        ({"learning_rate": {"log_uniform": [0.001, 2.0]}}, ["learning_rate", "log_uniform"], "reaches values"),
        ({"n_estimators": {"int": [0, 10]}}, ["n_estimators", "int"], "reaches values"),
    ],
)
def test_values_outside_the_declared_types_and_ranges_are_refused(params, path, text):
    problem = check_params("xgboost", params, {"classification"}, _did_you_mean)
    assert problem is not None
    assert problem[0] == path and text in problem[1]


def test_task_branches_are_checked_against_their_own_estimator():
    good = {
        "criterion": {
            "classification": {"choice": ["gini", "entropy"]},
            "regression": {"choice": ["squared_error", "absolute_error"]},
        }
    }
    assert check_params("random_forest", good, {"classification", "regression"}, _did_you_mean) is None
    bad = {"criterion": {"classification": {"choice": ["gini", "squared_error"]}, "regression": "squared_error"}}
    path, message = check_params("random_forest", bad, {"classification"}, _did_you_mean)
    assert path == ["criterion", "classification", "choice", 1] and "'squared_error'" in message
    # A value used for both tasks must suit both estimators.
    path, _ = check_params("random_forest", {"criterion": "gini"}, {"classification", "regression"}, _did_you_mean)
    assert path == ["criterion"]
    assert check_params("random_forest", {"criterion": "gini"}, None, _did_you_mean) is None  # unused entry


def test_translations_and_continuous_range_ends():
    assert (
        check_params("random_forest", {"max_features": {"choice": ["sqrt", "all", 0.5, 3]}}, None, _did_you_mean)
        is None
    )
    assert check_params("random_forest", {"max_features": 1.5}, None, _did_you_mean) is not None
    # LightGBM's subsample is in (0, 1]; a continuous draw never lands exactly on 0.0.
    assert check_params("lightgbm", {"subsample": {"uniform": [0.0, 1.0]}}, None, _did_you_mean) is None
    assert check_params("lightgbm", {"subsample": 0.0}, None, _did_you_mean) is not None
    assert check_params("lightgbm", {"subsample": {"uniform": [0.0, 0.0]}}, None, _did_you_mean) is not None


def test_accept_keeps_bools_out_of_numbers():
    assert not Accept("int").admits(True) and not Accept("float").admits(False)
    assert Accept("float").admits(3) and not Accept("real_not_int").admits(3)
    assert Accept("int", low=1, closed="left").admits(1) and not Accept("int", low=1, closed="neither").admits(1)


def test_ignored_parameter_warnings_reach_the_log_once(caplog):
    """XGBoost and LightGBM warn about a parameter they ignore; the warning reaches the log (not
    silenced), once per process however many configurations repeat it."""
    X, y, Xv, yv = _data("binary")
    with caplog.at_level(logging.WARNING, logger="tabrepro.models.library"):
        for _ in range(3):
            for model in ("xgboost", "lightgbm"):
                create_model(model, "binary", {"n_estimators": 3, "max_dept_typo": 3}, seed=0).fit(X, y, Xv, yv)
    messages = [r.getMessage() for r in caplog.records if "max_dept_typo" in r.getMessage()]
    assert len([m for m in messages if m.startswith("xgboost")]) == 1
    assert len([m for m in messages if m.startswith("lightgbm")]) == 1
    assert repeats()['xgboost: WARNING: Parameters: { "max_dept_typo" } are not used.'] == 3
