"""NPT's analysis experiments on tiny data: corruption (Alg. 1), deletion (Alg. 2), attention maps,
the semi-synthetic lookup task (Table 3) and their settings. CPU, one thread."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from conftest import REPO
from tabrepro.config import read_params_file
from tabrepro.features import categorical, continuous
from tabrepro.models.npt import NPTConfig, NPTNetwork, NPTTable
from tabrepro.models.npt.masking import TEST, TRAIN, VAL
from tabrepro.npt.analysis.attention import abd_attention, attention_experiment, block_attention_weights
from tabrepro.npt.analysis.common import NPTContext, target_outputs
from tabrepro.npt.analysis.corruption import corrupt_batch, corruption_experiment, table2_deltas
from tabrepro.npt.analysis.deletion import delete_for_row, deletion_experiment, one_sided_wilcoxon
from tabrepro.npt.analysis.lookup import _fixed_batches, knn_baselines, make_batch, run_variant, synthetic_lookup_data
from tabrepro.npt.analysis.settings import (
    AnalysisError,
    AnalysisSettings,
    LookupModelSettings,
    LookupSettings,
    experiment_digest,
    settings_for,
)

torch.set_num_threads(1)

TINY = {"embed_dim": 8, "n_layers": 4, "n_heads": 2, "device": "cpu"}


def make_context(n: int = 48, task: str = "regression", datapoint_attention: str = "full", seed: int = 0) -> NPTContext:
    """An untrained tiny NPT on a random table: 3 continuous features and the target."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    if task == "regression":
        y = X[:, 0] + 0.1 * rng.normal(size=n)
        target = continuous("target")
    else:
        y = (X[:, 0] > 0).astype(float)
        target = categorical(2, "target")
    roles = np.full(n, TRAIN)
    roles[int(0.6 * n) : int(0.75 * n)] = VAL
    roles[int(0.75 * n) :] = TEST
    attributes = (continuous("a"), continuous("b"), continuous("c"), target)
    values = np.column_stack([X, np.where(roles == TEST, np.nan, y)])
    table = NPTTable(attributes, torch.as_tensor(values, dtype=torch.float32), torch.as_tensor(roles))
    torch.manual_seed(seed)
    model = NPTNetwork(attributes, NPTConfig(**TINY, datapoint_attention=datapoint_attention))
    return NPTContext(model=model, table=table, batches=[torch.arange(n)], task=task, labels=y, features=X)


# --------------------------------------------------------------------------- settings
def test_settings_defaults_overrides_and_errors():
    raw = read_params_file(REPO / "params.yaml")
    quick = settings_for(raw, "quick")
    assert quick is not None and quick.lookup.dataset == "synthetic" and quick.folds == (0,)
    assert settings_for(raw, "paper").lookup.dataset == "protein"
    assert settings_for(raw, "tiny") is None  # no entry: no analysis
    assert settings_for({}, "quick") is None
    assert settings_for({"analysis": {"paper": {}}}, "quick") is None
    custom = settings_for({"analysis": {"quick": {"deletion": {"max_test_rows": 3}}}}, "quick")
    assert custom.deletion.max_test_rows == 3 and custom.deletion.delta_start == 0.01
    with pytest.raises(AnalysisError, match="max_tset_rows"):
        AnalysisSettings.from_dict({"deletion": {"max_tset_rows": 3}})
    with pytest.raises(AnalysisError, match="experiments"):
        AnalysisSettings.from_dict({"experiments": ["corruption", "nonsense"]})
    with pytest.raises(AnalysisError, match="variants"):
        AnalysisSettings.from_dict({"lookup": {"variants": ["add_two"]}})
    base = AnalysisSettings.from_dict(raw["analysis"]["quick"])
    changed = AnalysisSettings.from_dict({**raw["analysis"]["quick"], "corruption": {"max_test_rows": 5}})
    assert experiment_digest(base, "corruption", 0) != experiment_digest(changed, "corruption", 0)
    assert experiment_digest(base, "lookup", 0) == experiment_digest(changed, "lookup", 0)
    assert experiment_digest(base, "lookup", 0) != experiment_digest(base, "lookup", 1)


# --------------------------------------------------------------------------- corruption
def test_corrupt_batch_permutes_each_column_but_keeps_the_row():
    generator = torch.Generator().manual_seed(0)
    values = torch.arange(40, dtype=torch.float32).reshape(10, 4)
    mask = values.remainder(3) == 0  # mask bits that identify their values
    new_values, new_mask = corrupt_batch(values, mask, keep=4, generator=generator)
    assert torch.equal(new_values[4], values[4]) and torch.equal(new_mask[4], mask[4])
    others = [i for i in range(10) if i != 4]
    for j in range(4):
        assert sorted(new_values[others, j].tolist()) == sorted(values[others, j].tolist())
        assert torch.equal(new_mask[:, j], new_values[:, j].remainder(3) == 0)  # bits travelled along
    orders = [tuple(new_values[others, j].argsort().tolist()) for j in range(4)]
    assert len(set(orders)) > 1  # columns are permuted independently
    assert not torch.equal(new_values, values)


def test_corruption_changes_nothing_without_attention_between_datapoints():
    rowwise = make_context(datapoint_attention="rowwise")
    result = corruption_experiment(rowwise, seed=1)
    assert result["n_test_rows"] == 12
    for name, value in result["clean"].items():
        assert result["corrupted"][name] == pytest.approx(value, rel=1e-5, abs=1e-6)
    full = corruption_experiment(make_context(), seed=1)
    assert full["corrupted"]["rmse"] != pytest.approx(full["clean"]["rmse"], rel=1e-6)
    capped = corruption_experiment(make_context(), max_test_rows=5, seed=1)
    assert capped["n_test_rows"] == 5


def test_table2_sign_convention():
    regression = table2_deltas("regression", {"rmse": 2.0, "mse": 4.0}, {"rmse": 3.0, "mse": 9.0})
    assert regression["delta_rmse_over_rmse_pct"] == pytest.approx(-50.0)  # worse is negative
    classification = table2_deltas("binary", {"accuracy_pct": 95.0, "nll": 0.1}, {"accuracy_pct": 90.0, "nll": 0.3})
    assert classification["delta_accuracy_pct"] == pytest.approx(-5.0)
    assert classification["nll_change"] == pytest.approx(0.2)


def test_classification_context_scores_probabilities():
    context = make_context(task="binary")
    outputs = target_outputs(context)
    rows = context.test_rows()
    metrics = context.score(rows, outputs[rows])
    assert {"accuracy_pct", "nll", "auroc"} <= set(metrics)
    proba = context.probabilities(outputs[rows])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


# --------------------------------------------------------------------------- attention
def test_recomputed_attention_reproduces_the_blocks_output():
    context = make_context()
    model = context.model.eval()
    captured = []
    block = model.blocks[0]
    handle = block.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    with torch.no_grad():
        model.forward_codes(context.table.inputs, context.table.input_missing)
        handle.remove()
        h = captured[0]
        weights = block_attention_weights(block, h)  # (1, heads, n, n)
        width = h.shape[-1]
        v = torch.nn.functional.linear(
            block.ln_attention(h), block.qkv.weight[2 * width :], block.qkv.bias[2 * width :]
        )
        heads = v.view(1, h.shape[1], block.n_heads, -1).transpose(1, 2)
        merged = (weights @ heads).transpose(1, 2).reshape(1, h.shape[1], width)
        expected = block._self_attention(h)
        torch.testing.assert_close(block.out(merged), expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


def test_attention_maps_follow_row_permutations_and_sorting():
    context = make_context()
    table = context.table
    maps = abd_attention(context.model, table.inputs, table.input_missing)
    assert len(maps) == 2 and maps[0].shape == (2, 48, 48)
    order = torch.randperm(48, generator=torch.Generator().manual_seed(3))
    permuted = abd_attention(context.model, table.inputs[order], table.input_missing[order])
    index = order.numpy()
    np.testing.assert_allclose(permuted[1], maps[1][:, index][:, :, index], rtol=1e-4, atol=1e-6)
    result = attention_experiment(context, n_reference_rows=2, max_rows=20, seed=0)
    assert len(result["references"]) == 2
    for ref in result["references"]:
        assert ref["rows"][0] == ref["row"] and len(ref["rows"]) == 20
        assert ref["distances"][0] == 0 and np.all(np.diff(ref["distances"]) >= 0)
        assert len(ref["summary"]) == 4  # 2 ABD layers x 2 heads


# --------------------------------------------------------------------------- deletion
class KernelRegression(nn.Module):
    """A stand-in model: each row's target output is a Gaussian-kernel average of the visible
    targets of the other rows, so near rows matter and far rows do not."""

    def __init__(self, bandwidth: float = 0.5):
        super().__init__()
        self.bandwidth = bandwidth

    def forward_codes(self, values: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        features = values[:, :-1].double()
        visible = ~mask[:, -1]
        distances = torch.cdist(features, features) ** 2
        weights = torch.exp(-distances / (2 * self.bandwidth**2)) * visible.double()
        weights.fill_diagonal_(0.0)
        prediction = (weights @ values[:, -1].double()) / weights.sum(1).clamp(min=1e-12)
        return [values[:, j : j + 1] for j in range(values.shape[1] - 1)] + [(prediction + 10.0).unsqueeze(1)]


def test_deletion_keeps_near_rows_of_a_local_model():
    context = make_context(n=80)
    context.model = KernelRegression()
    result = deletion_experiment(context, max_test_rows=8, max_proposals=300, seed=0)
    assert result["n_usable"] == 8
    distance = result["mean_distance"]
    assert distance["kept"] < distance["deleted"] and distance["kept"] < distance["random"]
    assert result["wilcoxon"]["kept_less_than_random"]["p_value"] < 0.05
    for run in result["runs"]:
        change = abs(run["final_prediction"] - run["original_prediction"]) / abs(run["original_prediction"])
        assert change <= 0.10 and run["proposals"] <= 300


def test_deletion_of_irrelevant_rows_runs_to_the_minimum():
    context = make_context(n=60, datapoint_attention="rowwise")  # nothing depends on other rows
    row = int(context.test_rows()[0])
    others = np.array([r for r in range(60) if r != row])
    run = delete_for_row(context, row, others, np.random.default_rng(0))
    assert run["stop"] == "min_rows" and len(run["kept"]) == math.ceil(0.02 * 60) - 1
    assert run["proposals"] == len(run["deleted"])  # every proposal accepted


def test_deletion_threshold_grows_after_rejections():
    context = make_context(n=40)
    context.model = KernelRegression(bandwidth=5.0)  # every row matters a little
    row = int(context.test_rows()[0])
    others = np.array([r for r in range(40) if r != row])
    run = delete_for_row(context, row, others, np.random.default_rng(0), delta_start=1e-9, patience=3, max_proposals=40)
    assert run["final_delta"] > 1e-9 and run["stop"] in ("max_proposals", "max_total_change", "min_rows")


def test_one_sided_wilcoxon():
    rng = np.random.default_rng(0)
    a = rng.normal(size=30)
    assert one_sided_wilcoxon(a, a + 1.0)["p_value"] < 1e-5
    assert one_sided_wilcoxon(a + 1.0, a)["p_value"] > 0.99
    assert one_sided_wilcoxon(a, a)["p_value"] is None


# --------------------------------------------------------------------------- lookup
def test_lookup_batches_and_nearest_neighbour_baselines():
    settings = LookupSettings(n_train_rows=64, n_val_rows=16, n_test_rows=32, batch_rows=16)
    data = synthetic_lookup_data(settings, seed=0)
    assert data.train_X.shape == (64, 9) and data.test_X.shape == (32, 9)
    rng = np.random.default_rng(0)
    batch = make_batch(data.test_X[:16], data.test_y[:16], "random_features_add_one", settings, rng)
    assert batch.values.shape == (32, 10) and bool(batch.mask[:16, -1].all()) and not bool(batch.mask[16:].any())
    assert float(batch.values[:16, -1].abs().sum()) == 0.0  # hidden targets are zero
    np.testing.assert_allclose(batch.duplicate_y, batch.y + 1.0)
    np.testing.assert_allclose(batch.original_X[:, :6], batch.duplicate_X[:, :6])
    assert not np.allclose(batch.original_X[:, 6:], batch.duplicate_X[:, 6:])  # independent noise
    original = _fixed_batches(data.test_X, data.test_y, "original", settings, seed=1)
    one_nn = knn_baselines(original, 10)[1]
    np.testing.assert_allclose(one_nn, np.concatenate([b.y for b in original]))  # exact copies
    add_one = _fixed_batches(data.test_X, data.test_y, "add_one", settings, seed=1)
    np.testing.assert_allclose(knn_baselines(add_one, 1)[1], np.concatenate([b.y for b in add_one]) + 1.0)


def test_npt_learns_the_lookup_far_better_than_knn():
    """Table 3's point on the quick task: NPT looks the duplicate up (RMSE far below k-NN's)
    where k-NN cannot, i.e. with random features and with the duplicates' targets shifted."""
    settings = LookupSettings(
        n_train_rows=2048,
        n_val_rows=64,
        n_test_rows=128,
        batch_rows=32,
        intervention_rows=4,
        model=LookupModelSettings(embed_dim=16, n_layers=2, n_heads=4, lr=1.5e-2, steps=700),
    )
    data = synthetic_lookup_data(settings, seed=0)
    for variant in ("add_one", "random_features"):
        result = run_variant(data, variant, settings, seed=0)
        rmse = result["rmse"]
        assert rmse["NPT"] < 0.35 * rmse["k-NN"], (variant, rmse)
        assert rmse["NPT"] < 0.35 * rmse["1-NN"], (variant, rmse)
        assert result["pearson_r"]["NPT"] > 0.9
        # Interventions: the prediction follows the duplicate's target.
        assert np.mean([run["slope"] for run in result["interventions"]]) > 0.3
        # Some head of the ABD layer sends most of each original's attention to its duplicate.
        assert max(result["attention_on_duplicate"][0]) > 0.5
