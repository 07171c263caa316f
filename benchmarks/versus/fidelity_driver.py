"""The authors' side of a fidelity case: their NPT trained to the end, in a process of its own.

    python -m benchmarks.versus.fidelity_driver SPEC.json

SPEC (written by benchmarks.versus.fidelity) holds their checkout ("repo"), the fold's rows
("x": standardised features, "y": class codes, "train"/"val"/"test": row indices, the harness's
fold, not theirs), the settings in our names, the seed, torch threads and where to write the
result ("result", JSON). The process builds their Trainer with their own functions, hands it the
fold's table in the form their ColumnEncodingDataset would (so their split code, and its
overlapping-fold defect, never runs), and runs their `Trainer.train_and_eval`: every epoch a
full-batch step and a validation pass, the best-validation model cached and loaded back at the
end (their `EarlyStopCounter`). It then runs their model once more on the test rows (targets
hidden, as their test mode does) and writes the test rows' class probabilities, in the order of
"test", for the caller to score with our metric code. It imports nothing of tabrepro.models.npt.

Their experiment tracking (wandb) is a sink here: their logger calls it every evaluation, and
nothing it receives changes training. Their AUROC (torchmetrics) is off: it is only logged.
"""

from __future__ import annotations

import re
import sys
import time
import types
from pathlib import Path
from typing import Any

from benchmarks.versus.driver import _Config, _npt_argv, npt_encoded_table, serve

__all__ = ["main", "npt_tables"]


def _install_wandb_sink() -> None:
    """A `wandb` whose log and run.summary.update accept and drop what they are given."""
    sink = types.ModuleType("wandb")
    sink.log = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    sink.run = types.SimpleNamespace(summary=types.SimpleNamespace(update=lambda *a, **k: None))  # type: ignore[attr-defined]
    sys.modules["wandb"] = sink


# Hook tables torch's Optimizer sets up in its __init__, which their Lookahead never calls: newer
# torch reads them in load_state_dict, i.e. when their EarlyStopCounter loads the best model back.
_OPTIMIZER_HOOK_TABLES = (
    "_optimizer_step_pre_hooks",
    "_optimizer_step_post_hooks",
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


def _lookahead_on_this_torch() -> None:
    """Empty hook tables on their Lookahead class (no hook is ever registered on it), so that
    this torch's Optimizer.load_state_dict runs on it as older torch did."""
    from collections import OrderedDict

    from npt.utils.optim_utils import Lookahead

    for name in _OPTIMIZER_HOOK_TABLES:
        if not hasattr(Lookahead, name):
            setattr(Lookahead, name, OrderedDict())


def npt_tables(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[float], list[int]]:
    """(data_dict, metadata, sigmas, order): the fold's table as their NPTBatchDataset takes it:
    target first (one-hot + mask-token column), each feature as (value, mask token), rows sorted
    train, validation, test; `order` maps their row positions to the given rows."""
    import torch

    train, val, test = (list(spec[role]) for role in ("train", "val", "test"))
    order = train + val + test
    x = torch.tensor(spec["x"], dtype=torch.float32)[order]
    y = torch.tensor(spec["y"], dtype=torch.long)[order]
    # their AUROC is logged only, through torchmetrics (stubbed), so it stays off
    data_dict, metadata, sigmas = npt_encoded_table(
        x, y, int(spec["n_classes"]), len(train), len(val), auroc_setting=False
    )
    return data_dict, metadata, sigmas, order


def _best_epoch(path: Any) -> int | None:
    """The epoch in their cached checkpoint's name (model_<epoch>.pt)."""
    found = re.search(r"model_(\d+)\.pt$", str(path or ""))
    return int(found.group(1)) if found else None


def _test_probabilities(trainer: Any, dataset: Any, data_dict: dict[str, Any], n_test: int) -> list[list[float]]:
    """Their model's class probabilities for the test rows (their test mode: every target hidden),
    in the order the rows were given."""
    import torch
    from npt.utils.batch_utils import collate_with_pre_batching

    dataset.set_mode(mode="test", epoch=trainer.max_epochs + 1)
    positions = torch.as_tensor(dataset.dataset_mode_to_batch_settings["test"][2], dtype=torch.long)
    batch = collate_with_pre_batching([next(iter(dataset))])
    for given, shuffled in zip(data_dict["data_arrs"][1:], batch["data_arrs"][1:], strict=True):
        if not torch.equal(given[positions].float(), shuffled.float()):
            raise RuntimeError("could not recover the row order of the authors' test batch")
    trainer.model.eval()
    with torch.no_grad():
        logits = trainer.model(batch["masked_tensors"])[0].double()
    probabilities = torch.softmax(logits, dim=1)
    start = len(positions) - n_test
    by_row = torch.empty((n_test, probabilities.shape[1]), dtype=torch.float64)
    for k, position in enumerate(positions.tolist()):
        if position >= start:
            by_row[position - start] = probabilities[k]
    return by_row.tolist()


def train_npt(spec: dict[str, Any]) -> dict[str, Any]:
    """Their NPT trained to the end on the spec's fold; test probabilities and the best epoch."""
    import numpy as np
    import torch
    from npt.batch_dataset import NPTBatchDataset
    from npt.configs import build_parser
    from npt.train import Trainer
    from npt.utils.model_init_utils import init_model_opt_scaler

    _lookahead_on_this_torch()
    settings, workdir, seed = spec["settings"], Path(spec["workdir"]), int(spec["seed"])
    argv = _npt_argv(settings, workdir) + ["--np_seed", str(seed), "--torch_seed", str(seed)]
    # test rows are scored from the final model below: their per-epoch test pass changes nothing
    argv += ["--exp_eval_test_at_end_only", "True"]
    args = build_parser().parse_args(argv)
    args.model_augmentation_bert_mask_prob = {"train": float(settings["p_feature"]), "val": 0.0, "test": 0.0}
    args.model_label_bert_mask_prob = {"train": float(settings["p_target"]), "val": 1, "test": 1}
    args.exp_device = "cpu"
    args.cv_index = 0
    c = _Config(vars(args))
    np.random.seed(args.np_seed)
    torch.manual_seed(args.torch_seed)

    data_dict, metadata, sigmas, _ = npt_tables(spec)
    model, optimizer, scaler = init_model_opt_scaler(c, metadata=metadata, device=args.exp_device)
    dataset = NPTBatchDataset(
        data_dict=data_dict, c=c, curr_cv_split=0, metadata=metadata, device=args.exp_device, sigmas=sigmas
    )
    # what their Trainer reads of its ColumnEncodingDataset (which would download and split)
    holder = types.SimpleNamespace(
        model_cache_path=str(workdir / "npt-cache"),
        metadata=metadata,
        n_cv_splits=1,
        cv_dataset=dataset,
        set_mode=dataset.set_mode,
    )
    trainer = Trainer(model=model, optimizer=optimizer, scaler=scaler, c=c, wandb_run=None, cv_index=0, dataset=holder)
    start = time.perf_counter()
    trainer.train_and_eval()
    seconds = time.perf_counter() - start
    return {
        "proba_test": _test_probabilities(trainer, dataset, data_dict, len(spec["test"])),
        "best_epoch": _best_epoch(trainer.early_stop_counter.best_model_path),
        "steps": int(trainer.scheduler.num_steps),
        "seconds": seconds,
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
    }


def main(argv: list[str] | None = None) -> int:
    return serve(argv, train_npt, model="npt", provided=("wandb",), setup=_install_wandb_sink)


if __name__ == "__main__":
    sys.exit(main())
