"""Checkpoint files of the deep models' training loops (NPT, BiSHop, and the weights of every
PyTorch model): written atomically, read back with the checks resuming relies on.

A resumed run must end with the weights of an uninterrupted one, so a checkpoint is only ever
replaced whole (`atomic_torch_save`, built on tabrepro.io.atomic_open: a kill mid-write leaves the
previous file), and is refused when it was written for another configuration (`read_checkpoint`).
Files are read with `weights_only=True`: they hold tensors, plain containers and numbers, never
pickled classes, so renaming a class never makes an old checkpoint unreadable. A state or saved
pass that cannot be read (empty, truncated, garbage, or a state file of another checkpoint format)
is moved aside to NAME.corrupt with one line saying so, and the job starts from scratch instead of
failing on every retry.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import pickle
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from tabrepro.io import atomic_open, remove_stale_temps, set_aside

BEST_WEIGHTS_PREFIX = "best-weights-at-"  # + the training position + ".pt", with best_weights_on_disk
PASS_FILE = "pass-in-progress.pt"  # a long prediction pass's outputs so far (SavedPass)
PASS_FORMAT = 2  # 2: NPT saves the outputs of its hidden rows only (1 held every row's)
PassPart = str | Tensor | Sequence[Tensor]  # one thing a pass's outputs depend on besides the weights
PassIdentity = Sequence[PassPart]
SAVE_PASS_EVERY_S = 300.0  # how often a long pass writes its outputs so far

log = logging.getLogger(__name__)

__all__ = [
    "to_cpu",
    "to_device",
    "clone_state",
    "tensor_digest",
    "atomic_torch_save",
    "save_state_dict",
    "read_checkpoint",
    "load_resume_file",
    "ResumableTrainer",
    "BEST_WEIGHTS_PREFIX",
    "load_weights_into",
    "PASS_FILE",
    "SavedPass",
    "pass_key",
]


def to_cpu(value: Any) -> Any:
    """Detached CPU copies of every tensor in a nest of dicts, lists and tuples (for saving)."""
    if isinstance(value, Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def to_device(value: Any, device: torch.device) -> Any:
    """Every tensor of a nest of dicts and lists moved to `device` (after loading)."""
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    return value


def clone_state(module: torch.nn.Module) -> dict[str, Tensor]:
    """A detached copy of a module's state dict (a snapshot that later steps do not modify)."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def tensor_digest(*tensors: Tensor | None) -> str:
    """SHA-256 over the dtypes, shapes and bytes of the tensors (None counts as a marker); what a
    state file records of its training data, so that it is not resumed on other data."""
    digest = hashlib.sha256()
    for tensor in tensors:
        if tensor is None:
            digest.update(b"none;")
            continue
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{t.dtype}{tuple(t.shape)};".encode())
        digest.update(t.numpy().reshape(-1).data if t.numel() else b"")  # the bytes, without a copy
    return digest.hexdigest()


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """torch.save into a stream from tabrepro.io.atomic_open (temp file beside `path`, fsync,
    os.replace): a kill mid-write leaves the previous file intact, which resuming relies on.

    torch.save gets a stream, not a file name: the archive inside the file is then always named
    "archive", so equal objects give equal bytes whatever the file is called.
    """
    with atomic_open(path, "wb") as handle:
        torch.save(obj, handle)


def save_state_dict(module: torch.nn.Module, path: str | Path) -> None:
    """A module's weights only (CPU tensors; loadable with torch.load(weights_only=True))."""
    atomic_torch_save({k: v.detach().cpu() for k, v in module.state_dict().items()}, Path(path))


def _unreadable(path: Path, error: Exception) -> str:
    """What is wrong with a file torch.load refused, in a few words (never torch's advice to
    unpickle it)."""
    if path.stat().st_size == 0:
        return "empty file"
    if not zipfile.is_zipfile(path):
        return "not a PyTorch archive (cut short or overwritten)"
    if isinstance(error, pickle.UnpicklingError):
        return "a PyTorch archive holding more than tensors and plain values"
    first_line = (str(error).splitlines() or [""])[0][:200]
    return f"unreadable PyTorch archive ({type(error).__name__}: {first_line})"


def load_resume_file(path: Path, instead: str, *, required: tuple[str, ...] = ("format",)) -> dict[str, Any] | None:
    """A resume file's contents (on CPU), or None when there is none or it cannot be read as one:
    such a file is set aside (tabrepro.io.set_aside) with `instead`, what the caller does now.
    A file that opens but is not a dict with the `required` keys counts as unreadable."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return None
    with handle:
        try:
            with warnings.catch_warnings():  # torch's advice on pickle protocols is not for us
                warnings.simplefilter("ignore")
                state = torch.load(handle, map_location="cpu", weights_only=True)
        except Exception as error:
            problem: str | None = _unreadable(path, error)
        else:
            missing = [key for key in required if key not in state] if isinstance(state, dict) else list(required)
            problem = f"not a resume file (no {', '.join(missing)})" if missing else None
    if problem is None:
        return state
    set_aside(path, problem, instead)
    return None


def read_checkpoint(
    path: Path, checkpoint_format: int, config: Any, neutral_fields: frozenset[str]
) -> dict[str, Any] | None:
    """The state dict saved at `path` (on CPU), or None if there is no such file or it cannot be
    read (then moved aside, see `load_resume_file`: training starts from scratch).

    A file of another format (an older or newer checkout's) is set aside the same way, with one
    line. Refuses (ValueError) one written under a config that differs from `config` in any field
    outside `neutral_fields`; `config` is a dataclass config with `to_dict` / `from_dict`
    (NPTConfig, BiSHopConfig). Checks of the data are the caller's.
    """
    instead = "training starts from scratch"
    state = load_resume_file(path, instead, required=("format", "config"))
    if state is None:
        return None
    if state.get("format") != checkpoint_format:
        set_aside(path, f"checkpoint format {state.get('format')!r}, not this checkout's {checkpoint_format}", instead)
        return None
    config_cls = type(config)

    def comparable(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in config_cls.from_dict(values).to_dict().items() if k not in neutral_fields}

    if comparable(state["config"]) != comparable(config.to_dict()):
        raise ValueError(f"{path} was written with a different {config_cls.__name__}; refusing to resume")
    return state


def pass_key(model: torch.nn.Module, *identity: PassPart) -> str:
    """What a prediction pass's outputs depend on, as one digest: the model's weights and the
    caller's `identity` (data fingerprint, batches, settings that change the arithmetic)."""
    digest = hashlib.sha256(tensor_digest(*model.state_dict().values()).encode())
    for part in identity:
        if isinstance(part, str):
            digest.update(f"{part};".encode())
        elif isinstance(part, Tensor):
            digest.update(tensor_digest(part).encode())
        else:
            digest.update(f"{len(part)} tensors;".encode())
            digest.update(tensor_digest(*part).encode())
    return digest.hexdigest()


class SavedPass:
    """The finished batches of a long prediction pass, kept in a file so a killed job goes on.

    At full size one pass of NPT or BiSHop over every row is hours on a CPU node (NPT on Forest
    Cover: 323 batches at 15-30 s each); a job killed in it (a time limit, a preempted node, the
    end of a session) would start the pass again. With a checkpoint directory, `batch_done` writes
    the outputs so far to `PASS_FILE` (atomically) at most every `every_s` seconds, under `key()`,
    the digest of everything they depend on (`pass_key`). A pass started with the same key takes
    the saved outputs and continues after the last saved batch: a row's output depends only on the
    weights and its batch, so the outputs are the uninterrupted pass's, bit for bit. A file under
    another key is left for the pass it belongs to until this pass writes its own; `finish` deletes
    the file once the pass it holds is complete. Passes shorter than `every_s` never write.
    `before_first_save` runs once, before the first write (a trainer saves the state the pass
    follows, which a job must restore before its saved batches are of use).
    """

    def __init__(
        self,
        directory: Path | None,
        key: Callable[[], str],
        outputs: Tensor,
        *,
        every_s: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
        before_first_save: Callable[[], None] | None = None,
    ):
        self.path = None if directory is None else Path(directory) / PASS_FILE
        self._before_first_save = before_first_save
        self._key_function = key
        self._key: str | None = None
        self.outputs = outputs
        self.every_s = SAVE_PASS_EVERY_S if every_s is None else every_s
        self._clock = clock
        self._last_save = clock()
        self._holds_file = False  # the file is this pass's (read back or written by it)

    def key(self) -> str:
        if self._key is None:  # computed at most once, and only when a file is read or written
            self._key = self._key_function()
        return self._key

    def resume(self) -> int:
        """How many batches an earlier run of this pass finished (their outputs copied in)."""
        if self.path is None:
            return 0
        saved = load_resume_file(self.path, "this pass starts at its first batch")
        if saved is None:
            return 0
        if saved.get("format") != PASS_FORMAT:  # older, or written by a newer checkout
            other = f"is in saved-pass format {saved.get('format')}, not {PASS_FORMAT}"
        elif saved.get("key") != self.key():
            other = "belongs to other weights, data or batches"
        elif tuple(saved["outputs"].shape) != tuple(self.outputs.shape):
            other = "holds outputs of another shape"
        else:
            other = None
        if other is not None:
            log.info("the saved pass in %s %s; this pass starts at its first batch", self.path, other)
            return 0
        self.outputs.copy_(saved["outputs"])
        self._holds_file = True
        done = int(saved["batches_done"])
        log.info("prediction pass resumed after %d batches saved in %s", done, self.path)
        return done

    def batch_done(self, done: int) -> None:
        """`done` batches are finished: write them if `every_s` passed since the last write."""
        now = self._clock()
        if self.path is None or now - self._last_save < self.every_s:
            return
        if self._before_first_save is not None:
            self._before_first_save()
            self._before_first_save = None
        state = {"format": PASS_FORMAT, "key": self.key(), "batches_done": done, "outputs": self.outputs.cpu()}
        atomic_torch_save(state, self.path)
        self._holds_file = True
        self._last_save = now

    def finish(self) -> None:
        """The pass is complete: its file, if it has one, is no longer needed."""
        if self.path is not None and self._holds_file:
            self.path.unlink(missing_ok=True)


class ResumableTrainer:
    """What NPTTrainer and BiSHopTrainer share about their state file (`checkpoint_dir /
    state_file`): writing it atomically, the checks before resuming from it, and restoring the
    parts every such trainer has (weights, optimiser, learning-rate schedule, dropout stream).

    A state holds, in this order: `format`, `config`, the trainer's `_data_state()` (what the
    state was written for and where training stands), the weights, optimiser, schedule (under
    `schedule_key`, the name the trainer's existing state files use) and dropout-generator
    state, then the trainer's `_progress_state()` (best-so-far, history, flags). What the data
    and progress parts hold, and restoring them, stay with each trainer.

    Best-so-far weights are a clone in RAM, saved inside every state file, unless the config's
    `best_weights_on_disk` is set: then each new best goes to its own file in the checkpoint
    directory (`best-weights-at-<position>.pt`, written atomically) and the state names it. A file
    it replaces is deleted only once a state file naming the newer one is in place, so a kill at
    any moment leaves a state whose best weights exist; files no state names (a kill between a
    new best and the state after it) are deleted on resume, and the steps that made them rerun.
    """

    state_file: ClassVar[str]
    checkpoint_format: ClassVar[int]
    resume_neutral_fields: ClassVar[frozenset[str]]
    schedule_key: ClassVar[str]
    fingerprint_key: ClassVar[str]  # the data state's key for `_data_fingerprint()`
    checkpoint_dir: Path | None
    config: Any
    device: torch.device
    model: torch.nn.Module | None
    optimizer: Any
    best_loss: float | None
    best_weights: dict[str, Tensor] | None
    best_weights_file: str | None = None  # with best_weights_on_disk: its name in checkpoint_dir
    _dropout_generator: torch.Generator | None
    # Outputs of the last validation pass (each trainer's own kind: NPT's targets of every row,
    # BiSHop's validation rows), under the weights the model holds now (None once a step changes
    # them) and under the best weights. After training, the selected weights' pass stands in for
    # the predictions that would repeat it: the same weights on the same rows in the same batches
    # give the same outputs, bit for bit.
    _validated_outputs: Tensor | None = None
    _best_validated_outputs: Tensor | None = None
    # Set by a trainer around a pass whose progress, once worth saving, must come with the
    # training state it follows (NPT's validation pass after a training step).
    _before_pass_save: Callable[[], None] | None = None

    # --- the trainer's part
    def build_model(self) -> torch.nn.Module:
        raise NotImplementedError

    def _lr_schedule(self) -> Any:
        """The learning-rate schedule object (state_dict / load_state_dict)."""
        raise NotImplementedError

    def _data_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _progress_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _data_fingerprint(self) -> str:
        """A digest of the training data, recorded in the state under `fingerprint_key`."""
        raise NotImplementedError

    def _check_data_state(self, path: Path, state: dict[str, Any]) -> None:
        """Refuse (ValueError naming `path`) a state written for other data; a trainer may check
        more (BiSHop: the feature layout and task)."""
        if state[self.fingerprint_key] != self._data_fingerprint():
            raise ValueError(f"{path} was written for different data; refusing to resume")

    def _last_is_best(self) -> None:
        """Record the current position as the selected one (its weights are taken as best)."""
        raise NotImplementedError

    def _forget_outputs(self) -> None:
        """Drop the kept validation outputs: the weights were replaced (a fresh start, a state
        file or a weights-only file)."""
        self._validated_outputs = self._best_validated_outputs = None

    def _restore_progress(self, state: dict[str, Any]) -> int:
        """Restore the progress part besides the best loss and weights (restored already);
        returns where training stands (NPT: step, BiSHop: epoch)."""
        raise NotImplementedError

    def _position(self) -> int:
        """Where training stands now (NPT: step, BiSHop: epoch)."""
        raise NotImplementedError

    # --- best-so-far weights
    def _check_best_weights_setting(self) -> None:
        if self.config.best_weights_on_disk and self.checkpoint_dir is None:
            raise ValueError("best_weights_on_disk needs a checkpoint directory (checkpoint_dir) to keep them in")

    def _forget_best(self) -> None:
        """No best weights yet (a fresh start)."""
        self.best_weights, self.best_weights_file = None, None

    def _keep_best(self) -> None:
        """The model's current weights become the best so far: a clone in RAM, or a file."""
        assert self.model is not None
        if not self.config.best_weights_on_disk:
            self.best_weights = clone_state(self.model)
            return
        assert self.checkpoint_dir is not None
        name = f"{BEST_WEIGHTS_PREFIX}{self._position()}.pt"
        save_state_dict(self.model, self.checkpoint_dir / name)  # the older file goes with the next state
        self.best_weights, self.best_weights_file = None, name

    def _best_state(self) -> dict[str, Any]:
        """The best-so-far part every state file holds: loss, and the weights or their file."""
        return {"loss": self.best_loss, "weights": self.best_weights, "weights_file": self.best_weights_file}

    def _remove_unnamed_best_files(self) -> None:
        """Delete best-weights files the state file (just written or read) does not name:
        superseded ones, and orphans of a kill between a new best and the state after it."""
        assert self.checkpoint_dir is not None
        for path in self.checkpoint_dir.glob(f"{BEST_WEIGHTS_PREFIX}*.pt"):
            if path.name != self.best_weights_file:
                path.unlink(missing_ok=True)

    # --- long prediction passes
    @contextlib.contextmanager
    def _state_saved_before_long_pass(self, save: Callable[[], None] | None) -> Iterator[None]:
        """Within: a pass that comes to save its progress first calls `save` (the trainer saves
        the training state the pass follows, marked pending); None: nothing is saved first."""
        self._before_pass_save = save
        try:
            yield
        finally:
            self._before_pass_save = None

    def _saved_pass(self, outputs: Tensor, identity: Callable[[], PassIdentity]) -> SavedPass:
        """A SavedPass in the checkpoint directory (none without one) for `outputs` of the current
        weights on what `identity()` names (rows, batches); the device and bf16 setting join the
        key, since they change the arithmetic. `identity` is called only if the key is needed."""
        assert self.model is not None
        model = self.model

        def key() -> str:
            return pass_key(model, self.device.type, f"bf16={self.config.bf16_autocast}", *identity())

        return SavedPass(self.checkpoint_dir, key, outputs, before_first_save=self._before_pass_save)

    # --- shared
    def state_dict(self) -> dict[str, Any]:
        assert self.model is not None and self.optimizer is not None and self._dropout_generator is not None
        return {
            "format": self.checkpoint_format,
            "config": self.config.to_dict(),
            **self._data_state(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            self.schedule_key: self._lr_schedule().state_dict(),
            "rng": {"dropout": self._dropout_generator.get_state()},
            **self._progress_state(),
        }

    def save_checkpoint(self) -> Path:
        """Write `state_dict()` (tensors on CPU) to the state file; returns its path."""
        assert self.checkpoint_dir is not None
        path = self.checkpoint_dir / self.state_file
        atomic_torch_save(to_cpu(self.state_dict()), path)
        self._remove_unnamed_best_files()  # only now: the state in place names the newest
        return path

    def load_checkpoint(self) -> int | None:
        """Restore the state file if present (after prepare); returns the restored position."""
        assert self.checkpoint_dir is not None and self.model is not None
        assert self.optimizer is not None and self._dropout_generator is not None
        path = self.checkpoint_dir / self.state_file
        remove_stale_temps(self.checkpoint_dir)  # a killed run's half-written files
        state = read_checkpoint(path, self.checkpoint_format, self.config, self.resume_neutral_fields)
        if state is None:
            self._remove_unnamed_best_files()  # left by an earlier run that wrote no state
            return None
        self._check_data_state(path, state)
        best = state["best"]
        weights_file = best.get("weights_file")
        if weights_file is not None and not (self.checkpoint_dir / weights_file).is_file():
            raise ValueError(f"{path} names best weights {weights_file}, which are missing; refusing to resume")
        self.model.load_state_dict(state["model"])
        self._forget_outputs()
        self.optimizer.load_state_dict(to_device(state["optimizer"], self.device))
        self._lr_schedule().load_state_dict(state[self.schedule_key])
        self._dropout_generator.set_state(state["rng"]["dropout"])
        self.best_loss = best["loss"]
        self.best_weights = None if best["weights"] is None else to_device(best["weights"], self.device)
        self.best_weights_file = weights_file
        self._remove_unnamed_best_files()
        return self._restore_progress(state)

    def _select_weights(self, keep_last: bool = False) -> None:
        """At the end of training: persist the final state, then load the selected weights (the
        best validation loss's; the last ones when `keep_last` or nothing was validated)."""
        assert self.model is not None
        if (self.best_weights is None and self.best_weights_file is None) or keep_last:
            self._last_is_best()
            self.best_weights, self.best_weights_file = clone_state(self.model), None
            selected_outputs = self._validated_outputs
        else:
            selected_outputs = self._best_validated_outputs
        if self.checkpoint_dir is not None:
            self.save_checkpoint()
        if self.best_weights is not None:
            self.model.load_state_dict(self.best_weights)
        else:
            assert self.checkpoint_dir is not None and self.best_weights_file is not None
            load_weights_into(self.model, self.checkpoint_dir / self.best_weights_file, self.device)
        self.model.eval()
        self._validated_outputs = selected_outputs

    def load_weights(self, path: str | Path) -> None:
        """Load a weights-only file into the model (built fresh when there is none yet)."""
        if self.model is None:
            self.model = self.build_model()
        load_weights_into(self.model, path, self.device)
        self._forget_outputs()


def load_weights_into(model: torch.nn.Module, path: str | Path, device: torch.device) -> None:
    """Load a weights-only file (a state dict) into `model` on `device`; leaves it in eval mode."""
    weights = torch.load(Path(path), map_location=device, weights_only=True)
    model.load_state_dict(weights)
    model.eval()
