"""NPT training loop: masking, minibatching, model selection, checkpoints and exact resume.

Reproducibility contract: same config, same table, same device and thread count -> the same
weights bit for bit, and a run killed after any checkpoint and resumed from it ends with the
same weights as an uninterrupted run. That rests on three things:

* every random choice comes from an explicit `torch.Generator`: weight initialisation and the
  per-epoch draws (batch composition, masks) from generators seeded by `derive_seed(seed, name,
  epoch)`, so they are recomputed rather than stored; dropout from one stateful generator whose
  state is checkpointed;
* the learning rate and lambda are pure functions of the step;
* the checkpoint holds the full state (model, LAMB moments, Lookahead slow weights, dropout
  generator, step, best-so-far weights, loss history) and is written atomically (temp file,
  fsync, os.replace), so a kill mid-write leaves the previous checkpoint intact.

A validation pass long enough to save its progress (`SavedPass`: hours on HIGGS on a CPU) first
saves the training state it follows, marked `validation_pending`; a job stopped in that pass goes
on with it (after its saved batches) instead of training again since the last checkpoint.

Speed: `prepare` asks glibc to keep freed memory (`tabrepro.nn.session.retain_freed_memory`,
process-wide, changes no result), as the CLI does for every training command, so that a step used
from Python does not fault in again the activations' pages the previous step handed back.

Evaluation masks every validation and test target (they are zero in `NPTTable.inputs` anyway),
reveals every training target, and scores the validation rows; model selection keeps the
weights with the lowest validation target loss.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tabrepro.features import Feature
from tabrepro.models.npt.config import CHECKPOINT_FORMAT, RESUME_NEUTRAL_FIELDS, NPTConfig
from tabrepro.models.npt.masking import (
    TEST,
    TRAIN,
    VAL,
    MaskDraw,
    NPTTable,
    batch_plan,
    draw_masks,
    feature_loss_weight,
    npt_loss,
    target_loss,
)
from tabrepro.models.npt.model import NPTNetwork
from tabrepro.models.npt.optim import Lookahead, LRSchedule, build_optimizer, clip_gradients
from tabrepro.nn.checkpoint import ResumableTrainer, save_state_dict
from tabrepro.nn.progress import logged_batches
from tabrepro.nn.session import bf16_autocast, deterministic_algorithms, resolve_device, retain_freed_memory
from tabrepro.seeding import derive_seed

__all__ = ["NPTTrainer", "NPTFitResult", "STATE_FILE", "BEST_WEIGHTS_FILE"]

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"
BEST_WEIGHTS_FILE = "best_weights.pt"


@dataclass
class NPTFitResult:
    """What one NPTTrainer.fit did: steps, the selected step and its validation loss, the loss
    trajectory, and whether it resumed or diverged."""

    steps: int  # optimiser steps taken in total (including those before a resume)
    best_step: int  # step whose weights were kept
    best_val_loss: float | None  # None without validation rows
    history: list[dict[str, float]]  # per training step: loss, target_loss, feature_loss, lr, ...
    val_history: list[tuple[int, float]]  # (step, validation target loss)
    diverged: bool = False
    resumed_from: int | None = None
    checkpoint_dir: Path | None = None
    # Target loss of the selected weights on test rows with a known label (None if there are
    # none). Computed once, after training: test labels never reach the trajectory.
    test_loss: float | None = None


@dataclass
class _EpochPlan:
    epoch: int
    batches: list[Tensor]
    masks: MaskDraw


class NPTTrainer(ResumableTrainer):
    """Trains one NPTNetwork on one NPTTable (fit), then predicts with the selected weights."""

    # For ResumableTrainer (the state file, and the checks before resuming from it).
    state_file = STATE_FILE
    checkpoint_format = CHECKPOINT_FORMAT
    resume_neutral_fields = RESUME_NEUTRAL_FIELDS
    schedule_key = "schedule"
    fingerprint_key = "table_fingerprint"

    def __init__(
        self,
        attributes: list[Feature] | tuple[Feature, ...],
        config: NPTConfig,
        *,
        checkpoint_dir: str | Path | None = None,
    ):
        self.attributes = tuple(attributes)
        self.config = config
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.device = resolve_device(config.device)
        self.model: NPTNetwork | None = None
        self.optimizer: Lookahead | None = None
        self.schedule = LRSchedule.from_config(config)
        self.table: NPTTable | None = None
        self.step = 0
        self.history: list[dict[str, float]] = []
        self.val_history: list[tuple[int, float]] = []
        self.best_loss: float | None = None
        self.best_step = 0
        self.best_weights: dict[str, Tensor] | None = None
        self.diverged = False
        self.validation_pending = False  # saved with a checkpoint written before its step's validation
        self.steps_per_epoch = 1
        self._train_rows: Tensor | None = None
        self._plan: _EpochPlan | None = None
        self._eval_batches: list[Tensor] | None = None
        self._dropout_generator: torch.Generator | None = None

    # ------------------------------------------------------------------ setup
    def _seed(self, *names: object) -> int:
        return derive_seed(self.config.seed, "npt", *names)

    def _generator(self, seed: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(seed)

    def build_model(self) -> NPTNetwork:
        """Initialise weights on CPU from an explicit seed (same init on every device)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._seed("init"))
            model = NPTNetwork(self.attributes, self.config)
        return model.to(self.device)

    def prepare(self, table: NPTTable) -> None:
        """Fresh model, optimiser and generators for training on `table` (step 0)."""
        if table.attributes != self.attributes:
            raise ValueError("the table's attributes differ from the trainer's")
        cfg = self.config
        retain_freed_memory()  # as BiSHop's trainer and the CLI do: no heap re-grown every step
        self.table = table.to(self.device)
        train_rows = self.table.rows(TRAIN)
        if train_rows.numel() == 0:
            raise ValueError("NPT needs at least one training row")
        self._train_rows = torch.arange(self.table.n_rows, device=self.device) if cfg.semi_supervised else train_rows
        n_input = self._train_rows.numel()
        self.steps_per_epoch = 1 if cfg.batch_size is None else -(-n_input // cfg.batch_size)
        self.model = self.build_model()
        self._dropout_generator = self._generator(self._seed("dropout"))
        self.model.dropout_generator = self._dropout_generator
        self.optimizer = build_optimizer(self.model, cfg)
        self.step = 0
        self.history, self.val_history = [], []
        self.best_loss, self.best_step = None, 0
        self._forget_best()
        self._forget_outputs()
        self.diverged = False
        self.validation_pending = False
        self._plan = None
        self._eval_batches = self.eval_batches(self.table)

    def eval_batches(self, table: NPTTable) -> list[Tensor]:
        """Evaluation minibatches over all rows, fixed for a given table and seed, and the same on
        every device: drawn from a CPU generator (a CUDA one draws other batches, and an NPT row's
        prediction depends on the rows beside it), so weights trained on a GPU predict on a CPU
        what they predicted there, up to float rounding."""
        rows = torch.arange(table.n_rows, device=table.device)
        return batch_plan(table, rows, self.config.batch_size, torch.Generator().manual_seed(self._seed("eval")))

    def _epoch_plan(self, epoch: int) -> _EpochPlan:
        if self._plan is None or self._plan.epoch != epoch:
            assert self.table is not None and self._train_rows is not None
            self._plan = None  # the last epoch's masks go before this epoch's are drawn (GiBs on HIGGS)
            generator = self._generator(self._seed("epoch", epoch))
            batches = batch_plan(
                self.table, self._train_rows, self.config.batch_size, generator, stratify=self.config.stratify_batches
            )
            masks = draw_masks(self.table, self.config, generator)
            self._plan = _EpochPlan(epoch, batches, masks)
        return self._plan

    # ------------------------------------------------------------------ training
    def train_step(self) -> dict[str, float]:
        """One optimiser step on the next minibatch; returns the logged losses."""
        assert self.model is not None and self.optimizer is not None and self.table is not None
        cfg = self.config
        epoch, index = divmod(self.step, self.steps_per_epoch)
        plan = self._epoch_plan(epoch)
        rows = plan.batches[index]
        lam = feature_loss_weight(cfg, self.step)
        lr = self.schedule.apply(self.optimizer, self.step)

        self.model.train()
        with bf16_autocast(self.device, cfg.bf16_autocast):
            outputs = self.model.forward_codes(plan.masks.values[rows], plan.masks.mask[rows])
        terms = npt_loss(
            outputs,
            self.table.inputs[rows],
            plan.masks.target_selected[rows],
            plan.masks.feature_selected[rows],
            self.attributes,
            lam,
        )
        if not bool(torch.isfinite(terms.total)):
            self.diverged = True
            return {"step": float(self.step), "loss": float("nan")}
        terms.total.backward()
        grad_norm = clip_gradients(self.model.parameters(), cfg.grad_clip, cfg.grad_clip_threshold)
        self.optimizer.step()
        # Gradients live from backward to the optimiser step only: not through the next forward
        # pass, a validation pass or a checkpoint (a parameter-sized copy fewer at the peak:
        # 1.4 GB for NPT-Base on Income's 41 attributes).
        self.optimizer.zero_grad(set_to_none=True)
        self._validated_outputs = None
        self.step += 1
        record = {
            "step": float(self.step),
            "loss": _scalar(terms.total),
            "target_loss": _scalar(terms.target),
            "feature_loss": _scalar(terms.feature),
            "n_target": _scalar(terms.n_target),
            "n_feature": _scalar(terms.n_feature),
            "lr": lr,
            "lambda": lam,
            "grad_norm": float("nan") if grad_norm is None else _scalar(grad_norm),
        }
        self.history.append(record)
        return record

    @torch.no_grad()
    def target_outputs(self, table: NPTTable | None = None, batches: list[Tensor] | None = None) -> Tensor:
        """Target-attribute outputs (logits or value) of the rows whose target is hidden (the
        validation and test rows), all of them masked; training rows' are not computed (zero).

        Without a table: the training table's, from the last validation pass while the weights
        are the ones it ran with (after fit: the final test loss and the predictions of the
        validation and test rows, three passes over every row fewer; hours at Income's size).
        """
        assert self.model is not None
        if table is None and self._validated_outputs is not None:
            return self._validated_outputs.clone()
        if table is None:
            assert self.table is not None
            table, batches = self.table, self._eval_batches
        else:
            table = table.to(self.device)
        if batches is None:
            batches = self.eval_batches(table)
        self.model.eval()
        width = self.attributes[-1].one_hot_width
        # The pass fills the hidden rows' outputs only, so it keeps (and saves) just those, in row
        # order: HIGGS's saved progress is 14.5 MB, not the 88 MB of a tensor over all 11 M rows,
        # small enough to carry between machines in git (benchmarks.scale.carry).
        hidden_rows = torch.nonzero(table.split != TRAIN).reshape(-1)
        hidden_outputs = torch.zeros((hidden_rows.numel(), width), device=self.device)
        # The pass's inputs: the table's visible entries and mask bits (in its fingerprint), the batches.
        saved = self._saved_pass(hidden_outputs, lambda: ("npt evaluation pass", table.fingerprint(), batches))
        start = saved.resume()
        for done, rows in enumerate(logged_batches(batches, "npt evaluation pass", log, start=start), start + 1):
            # every row of the batch is attended to; only the hidden targets' outputs are computed
            hidden = torch.nonzero(table.split[rows] != TRAIN).reshape(-1)
            if hidden.numel():
                with bf16_autocast(self.device, self.config.bf16_autocast):
                    outputs = self.model.forward_codes(table.inputs[rows], table.input_missing[rows], hidden)
                hidden_outputs[torch.searchsorted(hidden_rows, rows[hidden])] = outputs[-1].float()
            saved.batch_done(done)
        saved.finish()
        result = torch.zeros((table.n_rows, width), device=self.device)
        result[hidden_rows] = hidden_outputs
        return result

    def split_loss(self, outputs: Tensor, role: int, table: NPTTable | None = None) -> float | None:
        """Mean target loss over the rows of `role` with an observed label (None if there are none)."""
        table = self.table if table is None else table.to(self.device)
        assert table is not None
        rows = torch.nonzero((table.split == role) & table.label_observed).reshape(-1)
        if rows.numel() == 0:
            return None
        return float(target_loss(outputs[rows], table.labels[rows], self.attributes[-1]))

    def _validate(self, save_state_if_long: bool = False) -> None:
        """Score the validation rows and keep the best weights. `save_state_if_long`: should the
        pass last long enough to save its progress, save the training state first (pending)."""
        assert self.model is not None
        with self._state_saved_before_long_pass(self._save_pending_validation if save_state_if_long else None):
            outputs = self.target_outputs()
        self.validation_pending = False
        self._validated_outputs = outputs
        loss = self.split_loss(outputs, VAL)
        if loss is None:
            return
        self.val_history.append((self.step, loss))
        if self.best_loss is None or loss < self.best_loss:
            self.best_loss, self.best_step = loss, self.step
            self._keep_best()
            self._best_validated_outputs = outputs

    def _save_pending_validation(self) -> None:
        self.validation_pending = True
        self.save_checkpoint()

    def _is_eval_step(self, step: int) -> bool:
        interval = self.config.eval_every_epochs * self.steps_per_epoch
        return step % interval == 0 or step == self.config.max_steps

    def fit(
        self, table: NPTTable, *, resume: bool = True, callback: Callable[[int, dict[str, float]], None] | None = None
    ) -> NPTFitResult:
        """Train for `max_steps` steps (resuming from the state file if there is one).

        `callback(step, record)` runs after each step, after that step's checkpoint was written;
        an exception raised there stops training like a crash would (tests use it to interrupt).
        """
        cfg = self.config
        self._check_best_weights_setting()
        with deterministic_algorithms(cfg.deterministic, self.device):
            self.prepare(table)
            resumed_from = self.load_checkpoint() if resume and self.checkpoint_dir else None
            if self.validation_pending:  # stopped in the validation pass of its last step
                self._validate()
                self._checkpoint_if_due()
            while self.step < cfg.max_steps and not self.diverged:
                record = self.train_step()
                if self.diverged:
                    break
                if self._is_eval_step(self.step):
                    self._validate(save_state_if_long=True)
                self._checkpoint_if_due()
                if callback is not None:
                    callback(self.step, record)
            self._finish()
            test_loss = self.split_loss(self.target_outputs(), TEST)
        return NPTFitResult(
            steps=self.step,
            best_step=self.best_step,
            best_val_loss=self.best_loss,
            history=list(self.history),
            val_history=list(self.val_history),
            diverged=self.diverged,
            resumed_from=resumed_from,
            checkpoint_dir=self.checkpoint_dir,
            test_loss=test_loss,
        )

    def _checkpoint_if_due(self) -> None:
        every = self.config.checkpoint_every_steps
        if every and self.checkpoint_dir is not None and self.step % every == 0 and self.step < self.config.max_steps:
            self.save_checkpoint()

    def _finish(self) -> None:
        """Load the selected weights (the last ones without validation rows, or when training
        diverged before any); persist the final state and the best weights."""
        self._select_weights()  # the model now holds the selected weights
        if self.checkpoint_dir is not None:
            assert self.model is not None  # fit built it
            save_state_dict(self.model, self.checkpoint_dir / BEST_WEIGHTS_FILE)

    # ------------------------------------------------------------------ checkpoints
    # What ResumableTrainer's state file holds besides weights, optimiser, schedule and dropout.
    def _lr_schedule(self) -> LRSchedule:
        return self.schedule

    def _data_state(self) -> dict[str, Any]:
        assert self.table is not None
        return {
            "attributes": [(a.kind, a.n_categories, a.name) for a in self.attributes],
            "table_fingerprint": self._data_fingerprint(),
            "step": self.step,
        }

    def _progress_state(self) -> dict[str, Any]:
        return {
            "best": {**self._best_state(), "step": self.best_step},
            "history": self.history,
            "val_history": self.val_history,
            "diverged": self.diverged,
            "validation_pending": self.validation_pending,
        }

    def _data_fingerprint(self) -> str:
        assert self.table is not None
        return self.table.fingerprint()

    def _last_is_best(self) -> None:
        self.best_step = self.step

    def _position(self) -> int:
        return self.step

    def _restore_progress(self, state: dict[str, Any]) -> int:
        self.step = int(state["step"])
        self.best_step = int(state["best"]["step"])
        self.history = list(state["history"])
        self.val_history = [tuple(v) for v in state["val_history"]]
        self.diverged = bool(state["diverged"])
        self.validation_pending = bool(state.get("validation_pending", False))  # absent before it existed
        self._plan = None
        return self.step


def _scalar(value: Tensor) -> float:
    return float(value.detach())
