"""The authors' training step, driven from outside their code, in a process of its own.

    python -m benchmarks.versus.driver SPEC.json      (started by benchmarks.versus.authors.run_driver)

SPEC names the case, the model ("npt" or "bishop"), the directory holding the authors' checkout
("repo"), extra import-path entries ("deps"), threads, the device ("cpu" or "cuda"), warm-up and
timed steps, the model settings, and where to write the figures ("result", JSON). The process
puts their checkout on sys.path, stubs the imports their step never uses
(benchmarks.versus.stubs), builds their model, optimiser and loss with their own functions and
classes, and times what their training loop runs per step. It imports nothing of tabrepro.models.npt
or tabrepro.models.bishop. What a step contains is described in benchmarks.versus.cases.

Timing follows our benchmarks (benchmarks.steps.npt, benchmarks.steps.bishop): `warmup` steps, one
step under FlopCounterMode (matrix products and attention only), then `steps` timed steps; the
data loading that precedes each step in their loop (NPT: their per-epoch row shuffle and mask
sampling) runs before the timer starts and is timed separately. On a GPU the device is
synchronised before each timed load and after each step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.versus.data import breast_cancer_train, npt_random_table
from benchmarks.versus.stubs import install_stubs

__all__ = ["main", "STUBS", "npt_shared_settings", "prepare_imports", "serve"]

# Per model: modules stubbed always (never used by a step; importing the real ones would be slow
# or need network/credentials), and modules stubbed only where they are not installed.
STUBS: dict[str, dict[str, tuple[str, ...]]] = {
    "npt": {
        "always": (
            # their data pipeline (download, encode, pickle-cache the real data set), which
            # npt.train imports for type hints only; the table comes from _npt_tensors instead
            "npt.column_encoding_dataset",
            "wandb",
            "fairseq",
            "transformers",
            "dotmap",
            "torchmetrics",
            "torch.utils.tensorboard",
            "tensorboardX",
            "torchvision",
            "wget",
            "patoolib",
            "matplotlib",
            "seaborn",
        ),
        "if_missing": ("tqdm", "pandas"),
    },
    "bishop": {
        "always": ("wandb", "openml", "torcheval", "torchmetrics", "matplotlib"),
        "if_missing": ("pandas", "scipy"),
    },
}

Step = Callable[[int], None]


class _Config(dict):
    """Stand-in for the wandb config NPT's code receives: read by attribute and with .get."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError as error:
            raise AttributeError(key) from error


# ---------------------------------------------------------------------------------------- NPT
NPT_SHARED_SETTINGS = ("embed_dim", "n_layers", "n_heads", "lr", "flat_fraction", "max_steps", "p_feature", "p_target")


def npt_shared_settings(config: Any) -> dict[str, Any]:
    """The fields of our NPTConfig that both sides share (shape and optimisation), in the names
    `_npt_argv` and `_npt_tensors` take; the callers check first that the authors' side can be
    driven with `config` at all."""
    return {name: getattr(config, name) for name in NPT_SHARED_SETTINGS}


def _npt_argv(settings: dict[str, Any], workdir: Path, cuda: bool = False) -> list[str]:
    """Their command line for the case, in their option names (npt/configs.py), as their
    scripts/uci_class_reg.sh runs breast cancer: LAMB + Lookahead, flat-then-cosine schedule,
    gradient clipping 1, full batch, cosine-annealed feature/target loss trade-off; CUDA
    disabled unless `cuda` (their default then: AMP off, the data set kept on the CPU and each
    batch copied to the GPU)."""
    return [
        "--data_set",
        "breast-cancer",
        "--data_path",
        str(workdir / "data"),
        "--wandb_dir",
        str(workdir),
        *([] if cuda else ["--exp_disable_cuda"]),
        "--exp_optimizer",
        "lookahead_lamb",
        "--exp_lr",
        str(settings["lr"]),
        "--exp_scheduler",
        "flat_and_anneal",
        "--exp_optimizer_warmup_proportion",
        str(settings["flat_fraction"]),
        "--exp_num_total_steps",
        str(settings["max_steps"]),
        "--exp_gradient_clipping",
        "1",
        "--exp_batch_size",
        "-1",
        "--exp_tradeoff",
        "1",
        "--exp_tradeoff_annealing",
        "cosine",
        "--exp_eval_every_n",
        "1",
        "--exp_eval_every_epoch_or_steps",
        "epochs",
        "--exp_cache_cadence",
        "1",
        "--model_dim_hidden",
        str(settings["embed_dim"]),
        "--model_stacking_depth",
        str(settings["n_layers"]),
        "--model_num_heads",
        str(settings["n_heads"]),
    ]


def npt_encoded_table(
    x: Any, y: Any, n_classes: int, n_train: int, n_val: int, *, auroc_setting: bool
) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """Their encoded table (what their ColumnEncodingDataset hands NPTBatchDataset) for rows
    already sorted train, validation, test: the class target first (one-hot + mask token, bool),
    each continuous feature as (value, mask token); the role matrices mark the target column."""
    import torch

    n, d = x.shape[0], x.shape[1] + 1
    target = torch.zeros((n, n_classes + 1), dtype=torch.bool)
    target[torch.arange(n), y] = True
    columns = [target] + [torch.stack([x[:, j], torch.zeros(n)], dim=1) for j in range(d - 1)]
    bounds = [0, n_train, n_train + n_val, n]

    def role(lo: int, hi: int) -> Any:
        matrix = torch.zeros((n, d), dtype=torch.bool)
        matrix[lo:hi, 0] = True
        return matrix

    data_dict = {
        "data_arrs": columns,
        "missing_matrix": torch.zeros((n, d), dtype=torch.bool),
        "train_mask_matrix": role(bounds[0], bounds[1]),
        "val_mask_matrix": role(bounds[1], bounds[2]),
        "test_mask_matrix": role(bounds[2], bounds[3]),
        "new_train_val_test_indices": [list(range(bounds[i], bounds[i + 1])) for i in range(3)],
    }
    metadata = {
        "N": n,
        "D": d,
        "cat_features": [0],
        "num_features": list(range(1, d)),
        "cat_target_cols": [0],
        "num_target_cols": [],
        "input_feature_dims": [n_classes + 1] + [2] * (d - 1),
        "fixed_test_set_index": None,
        "auroc_setting": auroc_setting,
    }
    return data_dict, metadata, [-1.0] + [1.0] * (d - 1)


def _npt_tensors(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """Their encoded table of the timing case's random binary table."""
    import torch

    table = npt_random_table(settings["n_rows"], settings["n_features"], seed=settings.get("seed", 0))
    order = torch.cat([table["train"], table["val"], table["test"]])
    return npt_encoded_table(
        table["x"][order],
        table["y"][order],
        2,
        len(table["train"]),
        len(table["val"]),
        auroc_setting=True,
    )


def _npt(spec: dict[str, Any]) -> tuple[Step, Step, dict[str, Any]]:
    """(load data for step i, step i, facts): their Trainer.run_batch on their NPTBatchDataset's
    batch, bracketed by what their run_epoch does around it for a training epoch."""
    import numpy as np
    import torch
    from npt.batch_dataset import NPTBatchDataset
    from npt.configs import build_parser
    from npt.train import Trainer
    from npt.utils.batch_utils import collate_with_pre_batching
    from npt.utils.model_init_utils import init_model_opt_scaler

    settings, workdir = spec["settings"], Path(spec["workdir"])
    cuda = spec.get("device", "cpu") == "cuda"
    args = build_parser().parse_args(_npt_argv(settings, workdir, cuda))
    args.model_augmentation_bert_mask_prob = {"train": float(settings["p_feature"]), "val": 0.0, "test": 0.0}
    args.model_label_bert_mask_prob = {"train": float(settings["p_target"]), "val": 1, "test": 1}
    args.exp_device = "cuda:0" if cuda else "cpu"  # what their run.py setup_args resolves
    args.cv_index = 0
    c = _Config(vars(args))
    np.random.seed(args.np_seed)
    torch.manual_seed(args.torch_seed)

    data_dict, metadata, sigmas = _npt_tensors(settings)
    model, optimizer, scaler = init_model_opt_scaler(c, metadata=metadata, device=args.exp_device)
    dataset = NPTBatchDataset(
        data_dict=data_dict, c=c, curr_cv_split=0, metadata=metadata, device=args.exp_device, sigmas=sigmas
    )
    # Their Trainer reads these attributes of its ColumnEncodingDataset (which would download,
    # encode and pickle the real data set): the cache path goes to the scratch directory.
    holder = SimpleNamespace(
        model_cache_path=str(workdir / "npt-cache"), metadata=metadata, n_cv_splits=1, cv_dataset=dataset
    )
    trainer = Trainer(model=model, optimizer=optimizer, scaler=scaler, c=c, wandb_run=None, cv_index=0, dataset=holder)
    batch: dict[str, Any] = {}

    def load(i: int) -> None:
        dataset.set_mode(mode="train", epoch=i + 1)  # their per-epoch shuffle and masks
        batch["current"] = collate_with_pre_batching([next(iter(dataset))])

    def step(i: int) -> None:
        trainer.model.train()
        trainer.optimizer.zero_grad()
        trainer.run_batch(batch["current"], "train", False, i + 1, c.exp_print_every_nth_forward, 0)
        trainer.loss.reset()

    facts = {
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "rows": metadata["N"],
        "attributes": metadata["D"],
        "embed_dim": settings["embed_dim"],
    }
    return load, step, facts


# ------------------------------------------------------------------------------------- BiSHop
def _bishop_args(settings: dict[str, Any], n_num: int, cuda: bool = False) -> argparse.Namespace:
    """Their bishop.py arguments (defaults there, overridden by `settings`), plus what their
    utils/tools._check_data derives for a numerical-only binary classification data set."""
    return argparse.Namespace(
        data="breast_cancer",
        benchmark_name=None,
        task="classification",
        n_cat=0,
        n_num=n_num,
        n_classes=2,
        input_size=n_num,
        output_size=2,
        out_len=settings["out_len"],
        patch_dim=settings["patch_dim"],
        emb_dim=settings["emb_dim"],
        n_agg=settings["n_agg"],
        factor=settings["factor"],
        d_model=settings["d_model"],
        d_ff=settings["d_ff"],
        n_heads=settings["n_heads"],
        e_layers=settings["e_layers"],
        d_layers=settings["d_layers"],
        dropout=settings["dropout"],
        num_workers=0,
        batch_size=settings["batch_size"],
        train_epochs=200,
        patience=40,
        learning_rate=settings["learning_rate"],
        lradj="type1",
        itr=1,
        use_gpu=cuda,
        gpu=0,
        mode="entmax",
        use_multi_gpu=False,
        devices="0",
        record=False,
        rf_most=0,
        rf_least=0,
        rf_rand=0,
        sweep=False,
        seed=settings.get("seed", 66),
    )


def _bishop(spec: dict[str, Any]) -> tuple[Step, Step, dict[str, Any]]:
    """(pick batch i, step i, facts): the body of their Exp_BiSHop.train batch loop, on their
    model, optimiser and criterion as Exp_BiSHop builds them."""
    import torch
    from exp.exp_bishop import Exp_BiSHop

    settings = spec["settings"]
    x, y = breast_cancer_train()
    torch.manual_seed(settings.get("seed", 66))
    experiment = Exp_BiSHop(_bishop_args(settings, x.shape[1], spec.get("device", "cpu") == "cuda"), None)
    experiment.model.get_bins(x.float())  # their train(): quantile bins from the (CPU) training rows
    model_optim = experiment._select_optimizer()
    criterion = experiment._select_criterion()
    experiment.model.train()

    size = settings["batch_size"]
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    batches = [order[i : i + size] for i in range(0, len(y) - size + 1, size)]
    empty_cat = torch.zeros((len(y), 0), dtype=torch.long)
    batch: dict[str, Any] = {}

    def load(i: int) -> None:
        rows = batches[i % len(batches)]
        batch["current"] = (empty_cat[rows], x[rows], y[rows])

    def step(i: int) -> None:
        batch_cat, batch_num, batch_y = batch["current"]
        model_optim.zero_grad()
        pred, true = experiment._process_one_batch(batch_cat, batch_num, batch_y)
        loss = criterion(pred, true)
        loss.item()  # their loop appends loss.item() to its epoch list every step
        loss.backward()
        torch.nn.utils.clip_grad_norm_(experiment.model.parameters(), 1.0)
        model_optim.step()

    facts = {
        "parameters": sum(p.numel() for p in experiment.model.parameters()),
        "batch_size": size,
    }
    return load, step, facts


# --------------------------------------------------------------------------------------- timing
def _measure(load: Step, step: Step, steps: int, warmup: int, device: str = "cpu") -> dict[str, Any]:
    """Warm-up steps, one FLOP-counted step, `steps` timed steps (data loading timed apart)."""
    import torch

    from benchmarks.steps.common import flop_counter, synchronize

    dev = torch.device(device)

    for i in range(warmup):
        load(i)
        step(i)
    load(warmup)
    with flop_counter() as counter:
        step(warmup)
    flops = counter.get_total_flops()
    step_times, load_times = [], []
    for k in range(steps):
        i = warmup + 1 + k
        synchronize(dev)
        start = time.perf_counter()
        load(i)
        loaded = time.perf_counter()
        step(i)
        synchronize(dev)
        step_times.append(time.perf_counter() - loaded)
        load_times.append(loaded - start)
    median = statistics.median(step_times)
    peak_mib = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else None
    return {
        "device": device,
        "peak_memory_mib": peak_mib,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "steps_timed": steps,
        "step_s": step_times,
        "step_s_median": median,
        "step_s_min": min(step_times),
        "data_s_median": statistics.median(load_times),
        "gflop_per_step": flops / 1e9,
        "gflops_per_s": flops / 1e9 / median,
    }


def prepare_imports(spec: dict[str, Any], model: str, *, provided: tuple[str, ...] = ()) -> list[str]:
    """Their checkout first on sys.path, then the dependency directories; the model's stubs
    installed, except the modules in `provided` (the caller puts its own in their place)."""
    for entry in reversed([spec["repo"], *spec.get("deps", [])]):
        sys.path.insert(0, entry)
    warnings.filterwarnings("ignore", category=FutureWarning)  # deprecated torch.cuda.amp etc.
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    stubs = STUBS[model]
    return install_stubs([name for name in stubs["always"] if name not in provided], stubs["if_missing"])


def serve(
    argv: list[str] | None,
    work: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    model: str | None = None,
    provided: tuple[str, ...] = (),
    setup: Callable[[], None] | None = None,
) -> int:
    """What every driver process does around its `work`: read SPEC.json (argv[0]), prepare the
    imports (`model`, default the spec's; `setup` then installs what `provided` leaves out), set
    torch's threads, run `work(spec)` with their progress prints sent to stderr (kept for a failure
    report), and write its figures, the stubbed modules and the tabrepro modules loaded (a test
    checks that no model code of ours is among them) to the spec's "result"."""
    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    stubbed = prepare_imports(spec, model or spec["model"], provided=provided)
    if setup is not None:
        setup()
    import torch

    from tabrepro.io import write_json

    torch.set_num_threads(int(spec["threads"]))
    with contextlib.redirect_stdout(sys.stderr):
        figures = work(spec)
    ours_loaded = sorted(name for name in sys.modules if name.startswith("tabrepro."))
    write_json(spec["result"], {**figures, "stubbed": stubbed, "tabrepro_modules": ours_loaded})
    return 0


def _time_case(spec: dict[str, Any]) -> dict[str, Any]:
    """The case's facts and its step's figures (see the module docstring)."""
    build = {"npt": _npt, "bishop": _bishop}[spec["model"]]
    load, step, facts = build(spec)
    figures = _measure(load, step, int(spec["steps"]), int(spec["warmup"]), spec.get("device", "cpu"))
    return {"case": spec["case"], **facts, **figures}


def main(argv: list[str] | None = None) -> int:
    return serve(argv, _time_case)


if __name__ == "__main__":
    sys.exit(main())
