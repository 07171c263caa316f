"""Search-space expansion: grid versus random draws, determinism, per-task splits, errors."""

from __future__ import annotations

import math

import pytest

from conftest import repo_raw_params
from tabrepro.tuning import (
    SearchSpaceError,
    expand_search_space,
    sample_configs,
    select_best,
    space_size,
    variant_names,
)

GRID = {
    "n_estimators": {"choice": [50, 100]},
    "criterion": {"classification": {"choice": ["gini", "entropy"]}, "regression": "squared_error"},
    "max_features": "sqrt",
}
MIXED = {
    "hidden_layer_sizes": {"choice": [[25], [50, 50]]},
    "alpha": {"choice": [0.0, 0.1]},
    "lr": {"log_uniform": [1e-5, 0.1]},
    "depth": {"int": [3, 10]},
    "leaves": {"log_int": [2, 1000]},
    "frac": {"uniform": [0.5, 1.0]},
}


def test_small_choice_space_gives_whole_grid_in_fixed_order() -> None:
    configs = sample_configs(GRID, "binary", n_configs=24, seed=123)
    assert configs == [
        {"criterion": "gini", "max_features": "sqrt", "n_estimators": 50},
        {"criterion": "gini", "max_features": "sqrt", "n_estimators": 100},
        {"criterion": "entropy", "max_features": "sqrt", "n_estimators": 50},
        {"criterion": "entropy", "max_features": "sqrt", "n_estimators": 100},
    ]
    assert sample_configs(GRID, "binary", n_configs=4, seed=999) == configs  # seed-independent


def test_grid_larger_than_budget_gives_distinct_random_draws() -> None:
    space = {"a": {"choice": list(range(10))}, "b": {"choice": ["x", "y", "z"]}}
    configs = sample_configs(space, "regression", n_configs=7, seed=0)
    assert len(configs) == 7
    assert len({tuple(c.items()) for c in configs}) == 7
    assert configs == sample_configs(space, "regression", n_configs=7, seed=0)
    assert configs != sample_configs(space, "regression", n_configs=7, seed=1)


def test_small_budget_covers_every_stratum_of_each_parameter() -> None:
    # Latin hypercube: 4 draws over a 4-value learning rate use each value exactly once, for any seed.
    space = {
        "lr": {"choice": [0.001, 0.01, 0.1, 0.3]},
        "depth": {"choice": [3, 5, 10]},
        "trees": {"choice": [50, 100, 500, 1000]},
    }
    for seed in range(20):
        configs = sample_configs(space, "binary", n_configs=4, seed=seed)
        assert sorted(c["lr"] for c in configs) == [0.001, 0.01, 0.1, 0.3]
        assert sorted(c["trees"] for c in configs) == [50, 100, 500, 1000]


def test_small_integer_range_is_enumerated_when_it_fits() -> None:
    space = {"n_neighbors": {"int": [2, 5]}, "weights": "distance"}
    configs = sample_configs(space, "binary", n_configs=24, seed=0)
    assert [c["n_neighbors"] for c in configs] == [2, 3, 4, 5]


def test_random_draws_respect_bounds_and_types() -> None:
    configs = sample_configs(MIXED, "multiclass", n_configs=200, seed=7)
    assert len(configs) == 200
    for config in configs:
        assert config["hidden_layer_sizes"] in ((25,), (50, 50))
        assert isinstance(config["alpha"], float)
        assert isinstance(config["lr"], float) and 1e-5 <= config["lr"] <= 0.1
        assert type(config["depth"]) is int and 3 <= config["depth"] <= 10
        assert type(config["leaves"]) is int and 2 <= config["leaves"] <= 1000
        assert 0.5 <= config["frac"] <= 1.0
    # log-uniform draws spread over decades: about half fall below the geometric midpoint.
    below = sum(c["lr"] < math.sqrt(1e-5 * 0.1) for c in configs)
    assert 60 < below < 140
    assert len({c["depth"] for c in configs}) == 8


def test_per_task_split_reads_classification_for_binary_and_multiclass() -> None:
    for task in ("binary", "multiclass"):
        assert expand_search_space(GRID, task)["criterion"].values == ("gini", "entropy")
    regression = expand_search_space(GRID, "regression")
    assert regression["criterion"].kind == "fixed"
    assert sample_configs(GRID, "regression", 10, 0)[0]["criterion"] == "squared_error"
    assert space_size(regression) == 2


def test_lists_become_tuples_and_entry_form_is_accepted() -> None:
    entry = {"n_configs": 6, "params": {"hidden_layer_sizes": [500, 500], "alpha": 0.0}}
    assert sample_configs(entry, "binary", 6, 0) == [{"alpha": 0.0, "hidden_layer_sizes": (500, 500)}]


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"lr": {"log_uniform": [0.0, 1.0]}}, "'lr'.*lo > 0"),
        ({"lr": {"uniform": [1.0, 0.5]}}, "'lr'.*lo <= hi"),
        ({"lr": {"log_uniform": ["1e-5", 0.1]}}, "'lr'.*1.0e-5"),
        ({"depth": {"int": [3.5, 10]}}, "'depth'.*integers"),
        ({"depth": {"int": [3]}}, "'depth'.*\\[lo, hi\\]"),
        ({"k": {"log_int": [0, 10]}}, "'k'.*lo >= 1"),
        ({"w": {"choice": []}}, "'w'.*non-empty"),
        ({"w": {"choice": [1, 1]}}, "'w'.*twice"),
        ({"w": {"chioce": [1, 2]}}, "'w'.*exactly one of"),
        ({"w": {"choice": [1], "int": [1, 2]}}, "'w'.*exactly one of"),
        ({"c": {"regression": {"choice": ["a"]}}}, "'c'.*classification"),
        ({}, "no parameters"),
    ],
)
def test_malformed_specs_name_the_parameter(space: dict, message: str) -> None:
    with pytest.raises(SearchSpaceError, match=message):
        sample_configs(space, "binary", 5, 0)


def test_bad_arguments() -> None:
    with pytest.raises(SearchSpaceError, match="n_configs"):
        sample_configs(GRID, "binary", 0, 0)
    with pytest.raises(SearchSpaceError, match="task"):
        sample_configs(GRID, "ranking", 3, 0)


def test_every_search_space_in_params_yaml_parses() -> None:
    spaces = repo_raw_params()["search_spaces"]
    checked = 0
    for family in spaces.values():
        for model, entry in family.items():
            if not isinstance(entry, dict) or "params" not in entry:
                continue  # e.g. `extends`
            for task in ("binary", "multiclass", "regression"):
                configs = sample_configs(entry, task, min(entry["n_configs"], 50), seed=0)
                assert configs, (model, task)
            checked += 1
    assert checked > 0


def test_select_best_direction_ties_and_nan() -> None:
    assert select_best([0.7, 0.9, 0.9, 0.1], "auroc") == 1
    assert select_best([3.0, 1.0, 1.0, 2.0], "rmse") == 1
    assert select_best([float("nan"), 0.5, None, 0.4], "nll") == 3
    with pytest.raises(ValueError, match="unknown metric"):
        select_best([1.0], "f1")
    with pytest.raises(ValueError, match="no valid"):
        select_best([float("nan")], "auroc")


def test_variant_spaces_give_named_configs_in_order_with_forced_values_last():
    space = {
        "n_configs": 3,
        "params": {"depth": 4, "rate": {"classification": 0.1, "regression": 0.2}},
        "variants": {"plain": {}, "deep": {"depth": 8}, "slow": {"rate": 0.01}},
        "forced": {"depth": 2},
    }
    assert variant_names(space) == ["plain", "deep", "slow"]
    configs = sample_configs(space, "regression", 2, seed=0)
    assert configs == [{"depth": 2, "rate": 0.2}, {"depth": 2, "rate": 0.2}]
    del space["forced"]
    assert sample_configs(space, "binary", 3, seed=5) == [
        {"depth": 4, "rate": 0.1},
        {"depth": 8, "rate": 0.1},
        {"depth": 4, "rate": 0.01},
    ]


@pytest.mark.parametrize(
    "variants, message",
    [
        ({"typo": {"dpeth": 3}}, r"variant 'typo' overrides \['dpeth'\]"),
        ({"sampled": {"depth": {"int": [1, 3]}}}, r"variant 'sampled': parameter 'depth' must be a fixed value"),
        ({}, "non-empty mapping"),
    ],
)
def test_malformed_variants_are_named(variants, message):
    with pytest.raises(SearchSpaceError, match=message):
        sample_configs({"n_configs": 1, "params": {"depth": 4}, "variants": variants}, "binary", 1, seed=0)
