"""BiSHop training loop (§4.1): Adam, ReduceLROnPlateau on the validation loss, early stopping,
minibatches, exact resume from atomic checkpoints.

Reproducibility contract (as for NPT): same config, same data, same device and thread count ->
the same weights bit for bit, and a run killed after any checkpoint and resumed from it ends with
the same weights as an uninterrupted run. That rests on

* weight initialisation on CPU from a derived seed (same initial weights on every device);
* the per-epoch batch order drawn from a generator seeded by `derive_seed(seed, "bishop",
  "epoch", epoch)`, recomputed rather than stored;
* dropout drawing from one explicit generator whose state is checkpointed (the model never
  touches torch's global generator);
* a checkpoint at the end of every `checkpoint_every_epochs` epochs holding the full state
  (model, optimiser, scheduler, dropout generator, epoch, best-so-far loss, epoch and weights,
  early-stopping counter, history), written atomically (temp file, fsync, os.replace).

A validation pass long enough to save its progress (`SavedPass`: hours over HIGGS's validation
rows on a CPU) first saves the state of the epoch it follows, its training done (`pending_epoch`,
that epoch's record so far); a job stopped in the pass goes on with it, after its saved batches,
instead of training again since the last checkpoint.

Speed: the optimiser is PyTorch's fused Adam, and `prepare` asks glibc to keep freed memory
(`tabrepro.nn.session.retain_freed_memory`, process-wide, changes no result): without it a CPU
step spent ~20 % of its time in page faults re-growing the heap that the previous step returned.
Gradient clipping is folded into the fused Adam step (`_clipped_step`): no pass over the 17M
gradients when the clipping factor is 1, the factor applied inside the Adam kernel otherwise.

Losses: cross-entropy over the class logits (classification), mean squared error on the
standardised target (regression). The validation loss is the exact mean over validation rows.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from tabrepro.layout import WEIGHTS_FILE
from tabrepro.models.bishop.config import CHECKPOINT_FORMAT, RESUME_NEUTRAL_FIELDS, BiSHopConfig
from tabrepro.models.bishop.model import BiSHopNetwork
from tabrepro.nn.checkpoint import (
    ResumableTrainer,
    atomic_torch_save,
    tensor_digest,
    to_cpu,
)
from tabrepro.nn.progress import logged_batches
from tabrepro.nn.session import bf16_autocast, deterministic_algorithms, resolve_device, retain_freed_memory
from tabrepro.seeding import derive_seed
from tabrepro.tasks import TASK_FAMILIES, TaskFamily

__all__ = ["BiSHopTrainer", "BiSHopFitResult", "TabularTensors", "STATE_FILE", "WEIGHTS_FILE"]

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"


@dataclass(frozen=True)
class TabularTensors:
    """Rows for BiSHop: categorical codes (-1 = missing), numerical values, optional targets."""

    x_cat: Tensor  # (n, n_cat) int64
    x_num: Tensor  # (n, n_num) float32
    y: Tensor | None = None  # (n,) int64 class indices or float32 standardised values

    def __post_init__(self) -> None:
        if self.x_cat.dim() != 2 or self.x_num.dim() != 2:
            raise ValueError("x_cat and x_num must be 2-D")
        if self.x_cat.shape[0] != self.x_num.shape[0]:
            raise ValueError("x_cat and x_num have different numbers of rows")
        if self.y is not None and self.y.shape != (self.x_cat.shape[0],):
            raise ValueError("y must be 1-D with one value per row")

    def __len__(self) -> int:
        return int(self.x_cat.shape[0])

    def to(self, device: torch.device) -> TabularTensors:
        return TabularTensors(
            self.x_cat.to(device), self.x_num.to(device), None if self.y is None else self.y.to(device)
        )

    def rows(self, index: Tensor) -> TabularTensors:
        return TabularTensors(self.x_cat[index], self.x_num[index], None if self.y is None else self.y[index])

    def fingerprint(self) -> str:
        return tensor_digest(self.x_cat, self.x_num, self.y)


@dataclass
class BiSHopFitResult:
    """What one BiSHopTrainer.fit did: epochs, the kept epoch and its validation loss, the
    per-epoch history, and whether it stopped early, diverged or resumed."""

    epochs: int  # epochs completed in total (including those before a resume)
    best_epoch: int  # epoch (1-based) whose weights were kept; = epochs without validation
    best_val_loss: float | None  # None without validation rows
    history: list[dict[str, float]] = field(default_factory=list)  # per epoch
    stopped_early: bool = False
    diverged: bool = False
    resumed_from: int | None = None
    checkpoint_dir: Path | None = None


class BiSHopTrainer(ResumableTrainer):
    """Trains one BiSHopNetwork (fit), then predicts with the selected weights."""

    # For ResumableTrainer (the state file, and the checks before resuming from it).
    state_file = STATE_FILE
    checkpoint_format = CHECKPOINT_FORMAT
    resume_neutral_fields = RESUME_NEUTRAL_FIELDS
    schedule_key = "scheduler"
    fingerprint_key = "data_fingerprint"

    def __init__(
        self,
        config: BiSHopConfig,
        task: TaskFamily,
        *,
        cardinalities: tuple[int, ...] = (),
        n_numerical: int = 0,
        n_classes: int | None = None,
        checkpoint_dir: str | Path | None = None,
    ):
        if task not in TASK_FAMILIES:
            raise ValueError(f"unknown task {task!r}")
        if task == "classification" and (n_classes is None or n_classes < 2):
            raise ValueError("classification needs n_classes >= 2")
        self.config = config
        self.task: TaskFamily = task
        self.cardinalities = tuple(int(c) for c in cardinalities)
        self.n_numerical = int(n_numerical)
        self.n_classes = n_classes
        # n_classes is set for classification (checked above)
        self.n_outputs: int = n_classes if task == "classification" and n_classes is not None else 1
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.device = resolve_device(config.device)
        self.model: BiSHopNetwork | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.ReduceLROnPlateau | None = None
        self._dropout_generator: torch.Generator | None = None
        self.train_data: TabularTensors | None = None
        self.val_data: TabularTensors | None = None
        self._fingerprint: str | None = None
        self._reset_progress()

    def _reset_progress(self) -> None:
        self.epoch = 0  # epochs completed
        self.history: list[dict[str, float]] = []
        self.best_loss: float | None = None
        self.best_epoch = 0
        self.best_weights: dict[str, Tensor] | None = None
        self._forget_best()
        self.bad_epochs = 0
        self.stopped_early = False
        self.diverged = False
        self.pending_epoch: dict[str, float] | None = None  # see the module docstring
        self._forget_outputs()

    # ------------------------------------------------------------------ setup
    def _seed(self, *names: object) -> int:
        return derive_seed(self.config.seed, "bishop", *names)

    def build_model(self) -> BiSHopNetwork:
        """Initialise weights on CPU from an explicit seed (same init on every device)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._seed("init"))
            model = BiSHopNetwork(self.config, self.cardinalities, self.n_numerical, self.n_outputs)
        return model.to(self.device)

    def _check_data(self, data: TabularTensors, name: str, targets: bool = True) -> None:
        if data.x_cat.shape[1] != len(self.cardinalities) or data.x_num.shape[1] != self.n_numerical:
            raise ValueError(
                f"{name}: expected {len(self.cardinalities)} categorical and {self.n_numerical} numerical columns"
            )
        if targets and data.y is None:
            raise ValueError(f"{name} has no targets")

    def prepare(self, train: TabularTensors, val: TabularTensors | None = None) -> None:
        """Fresh model (PLE bins from `train`), optimiser, scheduler and generator (epoch 0)."""
        cfg = self.config
        self._check_data(train, "training data")
        if len(train) == 0:
            raise ValueError("BiSHop needs at least one training row")
        if val is not None:
            self._check_data(val, "validation data")
            if len(val) == 0:
                val = None
        retain_freed_memory()  # ~20 % faster CPU steps; see tabrepro.nn.session
        self.train_data = train.to(self.device)
        self.val_data = None if val is None else val.to(self.device)
        self._fingerprint = None
        self.model = self.build_model()
        self.model.fit_encoding(self.train_data.x_cat, self.train_data.x_num)
        self._dropout_generator = torch.Generator(device=self.device).manual_seed(self._seed("dropout"))
        self.model.dropout_generator = self._dropout_generator
        optimizer_cls = torch.optim.Adam if cfg.optimizer == "adam" else torch.optim.AdamW
        # fused: one kernel per step instead of a dozen passes over 17M parameters (~4x less
        # optimiser time on CPU); deterministic, last bits differ from the foreach version.
        self.optimizer = optimizer_cls(
            self.model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, fused=True
        )
        self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self.optimizer, mode="min", factor=cfg.lr_factor, patience=cfg.lr_patience, eps=cfg.lr_eps
        )
        self._reset_progress()

    # ------------------------------------------------------------------ loss and evaluation
    def loss(self, outputs: Tensor, y: Tensor, reduction: str = "mean") -> Tensor:
        if self.task == "classification":
            return F.cross_entropy(outputs.float(), y.long(), reduction=reduction)
        return F.mse_loss(outputs[:, 0].float(), y.float(), reduction=reduction)

    @torch.no_grad()
    def outputs(self, data: TabularTensors) -> Tensor:
        """Model outputs (logits, or the standardised prediction in column 0) for every row."""
        if self.model is None:
            raise RuntimeError("the trainer has no model; call fit() or load_weights() first")
        data = data.to(self.device)
        self.model.eval()
        size = self.config.eval_batch_size
        result = torch.zeros((len(data), self.n_outputs), device=self.device)
        saved = self._saved_pass(result, lambda: ("bishop prediction pass", data.x_cat, data.x_num, f"batch {size}"))
        starts = range(0, len(data), size)
        begin = saved.resume()
        with bf16_autocast(self.device, self.config.bf16_autocast):
            for done, i in enumerate(logged_batches(starts, "bishop prediction pass", log, start=begin), begin + 1):
                result[i : i + size] = self.model(data.x_cat[i : i + size], data.x_num[i : i + size]).float()
                saved.batch_done(done)
        saved.finish()
        return result

    def mean_loss(self, data: TabularTensors, outputs: Tensor | None = None) -> float:
        """Mean loss over `data`'s rows (of `outputs` when given: the model's outputs for them)."""
        assert data.y is not None
        outputs = self.outputs(data) if outputs is None else outputs
        return float(self.loss(outputs, data.y, reduction="sum")) / len(data)

    def validation_outputs(self) -> Tensor | None:
        """The model's outputs for the validation rows given to fit, under its current weights,
        when a validation pass computed them (None otherwise). After fit, the estimator's
        prediction of those rows reuses them: a third of BiSHop's prediction time on Forest
        Cover, most of it on HIGGS (1.26 M validation rows)."""
        return self._validated_outputs

    # ------------------------------------------------------------------ training
    def _epoch_batches(self, epoch: int) -> list[Tensor]:
        assert self.train_data is not None
        generator = torch.Generator().manual_seed(self._seed("epoch", epoch))
        order = torch.randperm(len(self.train_data), generator=generator).to(self.device)
        return list(torch.split(order, self.config.batch_size))[: self.config.batches_per_epoch]

    def train_step(self, rows: Tensor) -> float:
        """One optimiser step on the given training rows; returns the batch loss."""
        assert self.model is not None and self.optimizer is not None and self.train_data is not None
        batch = self.train_data.rows(rows)
        self.model.train()
        with bf16_autocast(self.device, self.config.bf16_autocast):
            outputs = self.model(batch.x_cat, batch.x_num)
        assert batch.y is not None  # training rows carry targets (_check_data)
        loss = self.loss(outputs, batch.y)
        self.optimizer.zero_grad(set_to_none=True)
        if not bool(torch.isfinite(loss)):
            self.diverged = True
            return float("nan")
        loss.backward()
        self._clipped_step()
        self._validated_outputs = None
        return float(loss.detach())

    def _clipped_step(self) -> None:
        """Gradient-norm clipping (`clip_grad_norm_`'s rule) fused into the optimiser step.

        `clip_grad_norm_` multiplies all ~17M gradients by min(1, max_norm / (norm + 1e-6)),
        also when that factor is 1. Here a factor of 1 (exactly a no-op) skips the pass, and
        a factor below 1 is handed to the fused Adam kernel as its `grad_scale` (it divides the
        gradients by it while it reads them): same update up to rounding, one pass over the
        gradients less per step. A non-fused optimiser gets the ordinary in-place scaling.
        """
        assert self.model is not None and self.optimizer is not None
        max_norm = self.config.grad_clip_norm
        if max_norm is None:
            self.optimizer.step()
            return
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        total = torch.nn.utils.get_total_norm(grads)
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        if float(coef) >= 1.0:
            self.optimizer.step()
        elif self.optimizer.defaults.get("fused"):
            # read by fused Adam/AdamW's step; torch's stubs do not declare the attribute
            self.optimizer.grad_scale = coef.reciprocal()  # type: ignore[attr-defined]
            try:
                self.optimizer.step()
            finally:
                del self.optimizer.grad_scale  # type: ignore[attr-defined]
        else:
            torch._foreach_mul_(grads, coef)
            self.optimizer.step()

    def train_epoch(self) -> dict[str, float]:
        """One pass over the training rows, then validation, scheduler and early stopping."""
        assert self.model is not None
        total, count = 0.0, 0
        for rows in self._epoch_batches(self.epoch):
            loss = self.train_step(rows)
            if self.diverged:
                break
            total += loss * rows.numel()
            count += rows.numel()
        lr = float(self.optimizer.param_groups[0]["lr"])  # type: ignore[union-attr]
        self.epoch += 1
        record = {"epoch": float(self.epoch), "train_loss": total / max(count, 1), "lr": lr}
        if self.diverged:
            record["train_loss"] = float("nan")
            self.history.append(record)
            return record
        return self._end_epoch(record, save_state_if_long=True)

    def _end_epoch(self, record: dict[str, float], save_state_if_long: bool = False) -> dict[str, float]:
        """Validation, scheduler and early stopping after the epoch's training (`record`).
        `save_state_if_long`: should the validation pass last long enough to save its progress,
        save the training state first, with this epoch pending."""
        assert self.scheduler is not None
        monitored = record["train_loss"]
        if self.val_data is not None:
            save = (lambda: self._save_pending_epoch(record)) if save_state_if_long else None
            with self._state_saved_before_long_pass(save):
                self._validated_outputs = self.outputs(self.val_data)
            self.pending_epoch = None
            val_loss = self.mean_loss(self.val_data, self._validated_outputs)
            record["val_loss"] = val_loss
            monitored = val_loss
            if not math.isfinite(val_loss):
                self.diverged = True
            elif self.best_loss is None or val_loss < self.best_loss:
                self.best_loss, self.best_epoch = val_loss, self.epoch
                self._keep_best()
                self._best_validated_outputs = self._validated_outputs
                self.bad_epochs = 0
            else:
                self.bad_epochs += 1
                if self.bad_epochs >= self.config.early_stopping_patience:
                    self.stopped_early = True
        if math.isfinite(monitored):
            self.scheduler.step(monitored)
        self.history.append(record)
        return record

    def _save_pending_epoch(self, record: dict[str, float]) -> None:
        self.pending_epoch = dict(record)
        self.save_checkpoint()

    def _finished(self) -> bool:
        return self.epoch >= self.config.max_epochs or self.stopped_early or self.diverged

    def fit(
        self,
        train: TabularTensors,
        val: TabularTensors | None = None,
        *,
        resume: bool = True,
        callback: Callable[[int, dict[str, float]], None] | None = None,
    ) -> BiSHopFitResult:
        """Train (resuming from the state file in `checkpoint_dir` if there is one).

        `callback(epoch, record)` runs after each epoch, after that epoch's checkpoint was
        written; an exception raised there stops training like a crash would (tests use it).
        """
        cfg = self.config
        self._check_best_weights_setting()
        with deterministic_algorithms(cfg.deterministic, self.device):
            self.prepare(train, val)
            resumed_from = self.load_checkpoint() if resume and self.checkpoint_dir else None
            if self.pending_epoch is not None:  # stopped in the validation pass of that epoch
                self._after_epoch(self._end_epoch(self.pending_epoch), callback)
            while not self._finished():
                self._after_epoch(self.train_epoch(), callback)
            self._finish()
        return BiSHopFitResult(
            epochs=self.epoch,
            best_epoch=self.best_epoch,
            best_val_loss=self.best_loss,
            history=list(self.history),
            stopped_early=self.stopped_early,
            diverged=self.diverged,
            resumed_from=resumed_from,
            checkpoint_dir=self.checkpoint_dir,
        )

    def _after_epoch(self, record: dict[str, float], callback: Callable[[int, dict[str, float]], None] | None) -> None:
        if (
            self.checkpoint_dir is not None
            and not self._finished()
            and self.epoch % self.config.checkpoint_every_epochs == 0
        ):
            self.save_checkpoint()
        if callback is not None:
            callback(self.epoch, record)

    def _finish(self) -> None:
        """Persist the final state, then keep the selected weights (best validation epoch)."""
        self._select_weights(keep_last=not self.config.restore_best)
        if self.checkpoint_dir is not None:
            self.save_weights(self.checkpoint_dir / WEIGHTS_FILE)

    # ------------------------------------------------------------------ checkpoints
    def _spec(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "cardinalities": list(self.cardinalities),
            "n_numerical": self.n_numerical,
            "n_outputs": self.n_outputs,
        }

    def _data_fingerprint(self) -> str:
        assert self.train_data is not None
        if self._fingerprint is None:  # the data do not change during fit
            val = self.val_data.fingerprint() if self.val_data is not None else "none"
            self._fingerprint = f"{self.train_data.fingerprint()}/{val}"
        return self._fingerprint

    # What ResumableTrainer's state file holds besides weights, optimiser, schedule and dropout.
    def _lr_schedule(self) -> torch.optim.lr_scheduler.ReduceLROnPlateau:
        assert self.scheduler is not None
        return self.scheduler

    def _data_state(self) -> dict[str, Any]:
        return {"spec": self._spec(), "data_fingerprint": self._data_fingerprint(), "epoch": self.epoch}

    def _progress_state(self) -> dict[str, Any]:
        return {
            "best": {**self._best_state(), "epoch": self.best_epoch},
            "bad_epochs": self.bad_epochs,
            "stopped_early": self.stopped_early,
            "diverged": self.diverged,
            "history": self.history,
            "pending_epoch": self.pending_epoch,
        }

    def _check_data_state(self, path: Path, state: dict[str, Any]) -> None:
        if state["spec"] != self._spec():
            raise ValueError(f"{path} was written for a different feature layout or task")
        super()._check_data_state(path, state)

    def _last_is_best(self) -> None:
        self.best_epoch = self.epoch

    def _position(self) -> int:
        return self.epoch

    def _restore_progress(self, state: dict[str, Any]) -> int:
        self.epoch = int(state["epoch"])
        self.best_epoch = int(state["best"]["epoch"])
        self.bad_epochs = int(state["bad_epochs"])
        self.stopped_early = bool(state["stopped_early"])
        self.diverged = bool(state["diverged"])
        self.history = [dict(r) for r in state["history"]]
        pending = state.get("pending_epoch")  # absent before it existed
        self.pending_epoch = None if pending is None else dict(pending)
        return self.epoch

    # ------------------------------------------------------------------ weights-only artefacts
    def save_weights(self, path: str | Path) -> Path:
        """The current model's state dict (weights and PLE bins) as a small weights-only file."""
        assert self.model is not None
        path = Path(path)
        atomic_torch_save(to_cpu(self.model.state_dict()), path)
        return path
