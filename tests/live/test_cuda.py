"""NPT and BiSHop on a CUDA device: the paths the paper profile's GPU jobs take.

Skipped where torch sees no GPU (CI and the project's own machines have none); run on a lent
GPU machine with `python -m pytest tests/live/test_cuda.py`. What they check:

* the same initial weights on CPU and GPU (both initialise on the CPU from the seed);
* forward outputs and gradients of the same weights agree with the CPU's within fp32 rounding
  (no dropout; TF32 off, torch's default);
* a fit on the GPU is repeatable: the same seed gives bit-identical losses and weights;
* a fit killed and resumed on the GPU ends with the weights of an uninterrupted one (the CUDA
  dropout generator's state goes through the checkpoint);
* weights saved from a GPU fit load on a CPU trainer and predict what the GPU did;
* bfloat16 autocast trains on the GPU;
* BiSHop's predictions do not depend on the evaluation batch size.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from tabrepro.models.bishop import BiSHopConfig, BiSHopTrainer, TabularTensors
from tabrepro.models.bishop.trainer import STATE_FILE as BISHOP_STATE_FILE
from tabrepro.models.bishop.trainer import WEIGHTS_FILE as BISHOP_WEIGHTS_FILE
from tabrepro.models.npt import NPTConfig, NPTTrainer
from tabrepro.models.npt.trainer import BEST_WEIGHTS_FILE as NPT_WEIGHTS_FILE
from test_npt import make_table, weights_equal

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

NPT_TINY = {"embed_dim": 8, "n_layers": 4, "n_heads": 2, "eval_every_epochs": 1}
NO_DROPOUT = {"attention_dropout": 0.0, "hidden_dropout": 0.0, "embedding_dropout": 0.0}
BISHOP_TINY = {
    "d_model": 16,
    "n_heads": 2,
    "ffn_dim": 32,
    "embed_dim": 8,
    "patch_size": 4,
    "n_pooling": 3,
    "n_levels": 2,
    "merge_factor": 2,
    "n_decoded": 8,
    "head_hidden": (1.0,),
    "batch_size": 32,
}


class Interrupt(Exception):
    pass


def interrupt_at(when: int):
    def callback(position, record):
        if position == when:
            raise Interrupt

    return callback


def on_cpu(state: dict) -> dict:
    return {name: value.detach().cpu() for name, value in state.items()}


def assert_close(cuda_values: torch.Tensor, cpu_values: torch.Tensor, rtol: float = 1e-4) -> None:
    """Agreement within fp32 rounding of differently ordered sums, relative to the tensor's scale."""
    cuda_values = cuda_values.detach().cpu().double()
    cpu_values = cpu_values.detach().double()
    scale = cpu_values.abs().max().clamp_min(1e-12)
    assert float((cuda_values - cpu_values).abs().max() / scale) < rtol


@pytest.fixture(autouse=True)
def fp32_matrix_products():
    """TF32 off for the duration (torch's default; a test must not depend on who set what)."""
    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


# ------------------------------------------------------------------------------------- NPT
def npt_config(device: str, **options) -> NPTConfig:
    return NPTConfig(**{**NPT_TINY, "device": device, **options})


@pytest.mark.parametrize("attention", ["full", "isab"])
def test_npt_same_weights_give_the_cpus_outputs_and_gradients(attention):
    table = make_table(60)
    trainers = {}
    for device in ("cpu", "cuda"):
        trainer = NPTTrainer(table.attributes, npt_config(device, datapoint_attention=attention, **NO_DROPOUT))
        trainer.prepare(table)
        trainers[device] = trainer
    assert weights_equal(on_cpu(trainers["cuda"].model.state_dict()), trainers["cpu"].model.state_dict())

    gradients = {}
    for device, trainer in trainers.items():
        model = trainer.model
        model.train()
        outputs = model.forward_codes(trainer.table.inputs, trainer.table.input_missing)
        loss = sum(output.float().square().mean() for output in outputs)
        model.zero_grad()
        loss.backward()
        gradients[device] = (outputs, {name: p.grad for name, p in model.named_parameters() if p.grad is not None})
    for cuda_output, cpu_output in zip(gradients["cuda"][0], gradients["cpu"][0]):
        assert_close(cuda_output, cpu_output)
    assert gradients["cuda"][1].keys() == gradients["cpu"][1].keys()
    for name, grad in gradients["cpu"][1].items():
        assert_close(gradients["cuda"][1][name], grad, rtol=1e-3)


def test_npt_fit_on_the_gpu_is_repeatable():
    table = make_table(60)
    config = npt_config("cuda", max_steps=8, batch_size=25)
    results = []
    for _ in range(2):
        trainer = NPTTrainer(table.attributes, config)
        results.append((trainer.fit(table), on_cpu(trainer.model.state_dict())))
    assert results[0][0].history == results[1][0].history
    assert weights_equal(results[0][1], results[1][1])


def test_npt_killed_and_resumed_on_the_gpu_ends_with_the_uninterrupted_weights(tmp_path: Path):
    table = make_table(60)
    config = npt_config("cuda", max_steps=12, batch_size=25, checkpoint_every_steps=5, p_target=0.5)
    reference = NPTTrainer(table.attributes, config)
    expected = reference.fit(table)
    with pytest.raises(Interrupt):
        NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path).fit(table, callback=interrupt_at(8))
    resumed = NPTTrainer(table.attributes, config, checkpoint_dir=tmp_path)
    result = resumed.fit(table)
    assert result.resumed_from == 5
    assert result.history == expected.history and result.best_step == expected.best_step
    assert weights_equal(on_cpu(resumed.model.state_dict()), on_cpu(reference.model.state_dict()))

    # The GPU fit's weights, loaded on a CPU, predict what the GPU predicted.
    on_the_cpu = NPTTrainer(table.attributes, config.replace(device="cpu"))
    on_the_cpu.load_weights(tmp_path / NPT_WEIGHTS_FILE)
    assert_close(reference.target_outputs(table), on_the_cpu.target_outputs(table))


def test_npt_pass_killed_on_the_gpu_goes_on_after_its_saved_batches(tmp_path: Path, monkeypatch):
    from tabrepro.models.npt.model import NPTNetwork
    from tabrepro.nn import checkpoint

    monkeypatch.setattr(checkpoint, "SAVE_PASS_EVERY_S", 0.0)
    table, rows = make_table(60), make_table(90, seed=1)
    trainer = NPTTrainer(table.attributes, npt_config("cuda", max_steps=3, batch_size=16), checkpoint_dir=tmp_path)
    trainer.fit(table)
    expected = trainer.target_outputs(rows)
    original, calls = NPTNetwork.forward_codes, [0]

    def killed_after_three(self, *args):
        if not self.training:
            calls[0] += 1
            if calls[0] == 4:
                raise Interrupt
        return original(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(NPTNetwork, "forward_codes", killed_after_three)
        with pytest.raises(Interrupt):
            trainer.target_outputs(rows)
    assert torch.load(tmp_path / checkpoint.PASS_FILE, weights_only=True)["batches_done"] == 3
    assert torch.equal(trainer.target_outputs(rows), expected)
    assert not (tmp_path / checkpoint.PASS_FILE).exists()


def test_npt_bf16_autocast_trains_on_the_gpu():
    table = make_table(60)
    trainer = NPTTrainer(table.attributes, npt_config("cuda", max_steps=6, bf16_autocast=True))
    result = trainer.fit(table)
    outputs = trainer.target_outputs(table)
    assert outputs.dtype == torch.float32 and bool(torch.isfinite(outputs).all())
    assert result.best_val_loss is not None and result.best_val_loss == result.best_val_loss


# ---------------------------------------------------------------------------------- BiSHop
def bishop_config(device: str, **options) -> BiSHopConfig:
    return BiSHopConfig(**{**BISHOP_TINY, "device": device, **options})


def toy_data(n: int, seed: int = 0) -> TabularTensors:
    """Three numerical features and one categorical one; the label depends on both."""
    generator = torch.Generator().manual_seed(seed)
    x_num = torch.randn((n, 3), generator=generator)
    x_cat = torch.randint(0, 3, (n, 1), generator=generator)
    y = (x_num[:, 0] + 1.5 * (x_cat[:, 0] == 1).float() - 0.5 > 0).long()
    return TabularTensors(x_cat, x_num, y)


def bishop_trainer(config: BiSHopConfig, checkpoint_dir: Path | None = None) -> BiSHopTrainer:
    return BiSHopTrainer(
        config, "classification", cardinalities=(3,), n_numerical=3, n_classes=2, checkpoint_dir=checkpoint_dir
    )


def test_bishop_same_weights_give_the_cpus_outputs_and_gradients():
    data = toy_data(64)
    trainers = {}
    for device in ("cpu", "cuda"):
        trainer = bishop_trainer(bishop_config(device, dropout=0.0, head_dropout=0.0))
        trainer.prepare(data)
        trainers[device] = trainer
    assert weights_equal(on_cpu(trainers["cuda"].model.state_dict()), trainers["cpu"].model.state_dict())
    results = {}
    for device, trainer in trainers.items():
        trainer.model.train()
        batch = trainer.train_data
        outputs = trainer.model(batch.x_cat, batch.x_num)
        loss = trainer.loss(outputs, batch.y)
        trainer.model.zero_grad()
        loss.backward()
        grads = {name: p.grad for name, p in trainer.model.named_parameters() if p.grad is not None}
        results[device] = (outputs, grads)
    assert_close(results["cuda"][0], results["cpu"][0])
    assert results["cuda"][1].keys() == results["cpu"][1].keys()
    for name, grad in results["cpu"][1].items():
        assert_close(results["cuda"][1][name], grad, rtol=1e-3)


def test_bishop_fit_on_the_gpu_is_repeatable():
    data = toy_data(100)
    train, val = data.rows(torch.arange(70)), data.rows(torch.arange(70, 100))
    states = []
    for _ in range(2):
        trainer = bishop_trainer(bishop_config("cuda", max_epochs=3, lr=1e-3))
        result = trainer.fit(train, val)
        states.append((result.history, on_cpu(trainer.model.state_dict())))
    assert states[0][0] == states[1][0]
    assert weights_equal(states[0][1], states[1][1])


def test_bishop_killed_and_resumed_on_the_gpu_ends_with_the_uninterrupted_weights(tmp_path: Path):
    data = toy_data(100)
    train, val = data.rows(torch.arange(70)), data.rows(torch.arange(70, 100))
    config = bishop_config("cuda", max_epochs=6, lr=3e-3, lr_patience=0, early_stopping_patience=3)
    reference = bishop_trainer(config)
    expected = reference.fit(train, val)
    with pytest.raises(Interrupt):
        bishop_trainer(config, tmp_path).fit(train, val, callback=interrupt_at(2))
    assert (tmp_path / BISHOP_STATE_FILE).exists()
    resumed_trainer = bishop_trainer(config, tmp_path)
    resumed = resumed_trainer.fit(train, val)
    assert resumed.resumed_from is not None and resumed.history == expected.history
    assert weights_equal(on_cpu(resumed_trainer.model.state_dict()), on_cpu(reference.model.state_dict()))

    # The GPU fit's weights, loaded on a CPU, predict what the GPU predicted.
    on_the_cpu = bishop_trainer(config.replace(device="cpu"))
    on_the_cpu.load_weights(tmp_path / BISHOP_WEIGHTS_FILE)
    assert_close(reference.outputs(val), on_the_cpu.outputs(val))


def test_bishop_predictions_do_not_depend_on_the_evaluation_batch_size():
    data = toy_data(100)
    trainer = bishop_trainer(bishop_config("cuda", max_epochs=1))
    trainer.fit(data.rows(torch.arange(70)), data.rows(torch.arange(70, 100)))
    whole = trainer.outputs(data)
    small = copy.copy(trainer)
    small.config = trainer.config.replace(eval_batch_size=7)
    assert_close(small.outputs(data), whole.cpu(), rtol=1e-5)


def test_bishop_bf16_autocast_trains_on_the_gpu():
    data = toy_data(64)
    trainer = bishop_trainer(bishop_config("cuda", max_epochs=1, bf16_autocast=True))
    trainer.fit(data, data)
    outputs = trainer.outputs(data)
    assert outputs.dtype == torch.float32 and bool(torch.isfinite(outputs).all())
