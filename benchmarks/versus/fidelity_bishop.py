"""BiSHop's fidelity cases: the rows, both sides' settings, and our side's training.

benchmarks.versus.fidelity runs the cases; this module holds what is BiSHop's. Both sides get the
same matrix (the pipeline's encoded features of the dataset's one Datasets I split, numerical
features only: PLE bins are fitted on the training rows by each side and do not change under the
pipeline's per-column standardisation), the same thesis-default configuration with the options
that follow the authors' code (benchmarks.versus.cases.BISHOP_CODE_OPTIONS: decoder input level,
AdamW with weight decay 0.01), the same number of epochs and batch size, and seed s on both sides
(our config.seed; their process's torch.manual_seed, which their code never calls itself). Each
side keeps the weights of its best validation-loss epoch by its own rule (ours: patience 20 as
the thesis; theirs: bishop.py's patience 40).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from benchmarks.versus.authors import VersusError
from benchmarks.versus.problem import Fold, Problem

__all__ = ["bishop_problem", "our_bishop_config", "authors_bishop_settings", "train_ours_bishop", "TINY_DATASET"]

TINY_DATASET = "sklearn_breast_cancer"  # the tests' dataset: no download, seconds to train


def bishop_problem(params: Any, dataset: str) -> Any:
    """The rows of one BiSHop Datasets I dataset's split (tabrepro fetch/prepare/split first),
    or, for TINY_DATASET, scikit-learn's breast cancer on a seeded 70/20/10 split."""
    if dataset == TINY_DATASET:
        from sklearn.datasets import load_breast_cancer

        x, y = load_breast_cancer(return_X_y=True)
        order = np.random.default_rng(0).permutation(len(y))
        n_train, n_val = int(0.7 * len(y)), int(0.2 * len(y))
        train, val, test = order[:n_train], order[n_train : n_train + n_val], order[n_train + n_val :]
        mean, sd = x[train].mean(axis=0), x[train].std(axis=0)
        fold = Fold((x - mean) / np.where(sd > 0, sd, 1.0), np.sort(train), np.sort(val), np.sort(test))
        return Problem(y.astype(np.int64), 2, [fold], "scikit-learn breast cancer, a seeded 70/20/10 split")
    from tabrepro.config import Job
    from tabrepro.errors import InputError
    from tabrepro.job_run import load_fold
    from tabrepro.job_spec import resolve_job

    try:
        data = load_fold(resolve_job(params, Job("bishop", dataset, "bishop", 0)))
    except (InputError, OSError) as error:
        raise VersusError(f"bishop/{dataset}: {error} (run `tabrepro split bishop {dataset}` first)") from None
    if data.task != "binary" or any(feature.kind != "continuous" for feature in data.feature_layout.features):
        raise VersusError(f"bishop/{dataset}: only numerical features and a binary target are driven on both sides")
    fold = Fold(np.asarray(data.X, dtype=np.float64), data.split.train, data.split.val, data.split.test)
    rule = f"the bishop protocol's split of {dataset} ({data.split_file.name}), every seed on the same rows"
    return Problem(np.asarray(data.y, dtype=np.int64), 2, [fold], rule)


def our_bishop_config(case: Any, epochs: int, seed: int) -> Any:
    """Our BiSHopConfig: the thesis defaults, the authors' code options, `epochs` long."""
    from benchmarks.versus.cases import BISHOP_CODE_OPTIONS
    from tabrepro.models.bishop.config import BiSHopConfig

    values = {**BISHOP_CODE_OPTIONS, **case.overrides}
    return BiSHopConfig(**values, max_epochs=epochs, seed=seed, device="cpu", checkpoint_every_epochs=epochs)


def authors_bishop_settings(config: Any) -> dict[str, Any]:
    """The shared settings in the authors' option names (benchmarks.versus.driver._bishop_args)."""
    from benchmarks.versus.cases import authors_bishop_options

    if not config.decoder_input_level or config.optimizer != "adamw" or config.weight_decay != 0.01:
        raise VersusError("the authors' side runs their code's decoder input level and AdamW (weight decay 0.01)")
    return {**authors_bishop_options(config, config.batch_size), "epochs": config.max_epochs}


def train_ours_bishop(config_dict: dict[str, Any], fold: dict[str, Any], threads: int) -> dict[str, Any]:
    """Our BiSHopTrainer on the fold (a fresh process): test-row probabilities, best epoch, epochs."""
    import torch

    from tabrepro.models.bishop.config import BiSHopConfig
    from tabrepro.models.bishop.trainer import BiSHopTrainer, TabularTensors

    torch.set_num_threads(threads)
    x = torch.tensor(fold["x"], dtype=torch.float32)
    y = torch.tensor(fold["y"], dtype=torch.long)

    def rows(role: str) -> TabularTensors:
        index = torch.tensor(fold[role], dtype=torch.long)
        return TabularTensors(torch.zeros((len(index), 0), dtype=torch.long), x[index], y[index])

    trainer = BiSHopTrainer(
        BiSHopConfig.from_dict(config_dict), "classification", n_numerical=x.shape[1], n_classes=int(fold["n_classes"])
    )
    start = time.perf_counter()
    result = trainer.fit(rows("train"), rows("val"))
    seconds = time.perf_counter() - start
    logits = trainer.outputs(rows("test")).double()
    assert trainer.model is not None
    return {
        "proba_test": torch.softmax(logits, dim=1).tolist(),
        "best_step": int(result.best_epoch),
        "steps": int(result.epochs),
        "seconds": seconds,
        "parameters": trainer.model.n_parameters(),
    }
