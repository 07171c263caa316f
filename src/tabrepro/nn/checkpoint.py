"""Checkpoint files of the deep models' training loops (NPT, BiSHop, and the weights of every
PyTorch model): written atomically, read back with the checks resuming relies on.

A resumed run must end with the weights of an uninterrupted one, so a checkpoint is only ever
replaced whole (`atomic_torch_save`, built on tabrepro.io.atomic_open: a kill mid-write leaves the
previous file), and is refused when it was written for another configuration (`read_checkpoint`).
Files are read with `weights_only=True`: they hold tensors, plain containers and numbers, never
pickled classes, so renaming a class never makes an old checkpoint unreadable.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from tabrepro.io import atomic_open

__all__ = [
    "to_cpu",
    "to_device",
    "clone_state",
    "tensor_digest",
    "atomic_torch_save",
    "save_state_dict",
    "read_checkpoint",
    "StateFileMixin",
    "load_weights_into",
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
        digest.update(t.numpy().tobytes() if t.numel() else b"")
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


def read_checkpoint(
    path: Path, checkpoint_format: int, config: Any, neutral_fields: frozenset[str]
) -> dict[str, Any] | None:
    """The state dict saved at `path` (on CPU), or None if there is no such file.

    Refuses (ValueError) a file of another format or one written under a config that differs
    from `config` in any field outside `neutral_fields`; `config` is a dataclass config with
    `to_dict` / `from_dict` (NPTConfig, BiSHopConfig). Checks of the data are the caller's.
    """
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("format") != checkpoint_format:
        raise ValueError(f"{path}: unknown checkpoint format {state.get('format')!r}")
    config_cls = type(config)

    def comparable(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in config_cls.from_dict(values).to_dict().items() if k not in neutral_fields}

    if comparable(state["config"]) != comparable(config.to_dict()):
        raise ValueError(f"{path} was written with a different {config_cls.__name__}; refusing to resume")
    return state


class StateFileMixin:
    """A trainer's state file (NPTTrainer, BiSHopTrainer): `checkpoint_dir / state_file`,
    written atomically from `state_dict()` and read back through `read_checkpoint`'s checks.
    What the state holds, and restoring it, stay with each trainer."""

    state_file: ClassVar[str]
    checkpoint_format: ClassVar[int]
    resume_neutral_fields: ClassVar[frozenset[str]]
    checkpoint_dir: Path | None
    config: Any

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def save_checkpoint(self) -> Path:
        """Write `state_dict()` (tensors on CPU) to the state file; returns its path."""
        assert self.checkpoint_dir is not None
        path = self.checkpoint_dir / self.state_file
        atomic_torch_save(to_cpu(self.state_dict()), path)
        return path

    def _read_state_file(self) -> tuple[Path, dict[str, Any] | None]:
        """The state file's path and its checked contents (None while there is no file)."""
        assert self.checkpoint_dir is not None
        path = self.checkpoint_dir / self.state_file
        return path, read_checkpoint(path, self.checkpoint_format, self.config, self.resume_neutral_fields)


def load_weights_into(model: torch.nn.Module, path: str | Path, device: torch.device) -> None:
    """Load a weights-only file (a state dict) into `model` on `device`; leaves it in eval mode."""
    weights = torch.load(Path(path), map_location=device, weights_only=True)
    model.load_state_dict(weights)
    model.eval()
