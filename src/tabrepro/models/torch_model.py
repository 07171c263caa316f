"""`TorchModel`: a PyTorch network trained by one shared loop (AdamW, shuffled mini-batches, early
stopping on the validation target loss, best weights restored), on CUDA when present, seeded
without touching the caller's global RNG state (tabrepro.nn.session.torch_session). A subclass
builds the network. torch is imported lazily, so importing this module stays cheap."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabrepro.models.base import TabularModel
from tabrepro.models.early_stopping import EarlyStopper
from tabrepro.nn.session import torch_session

if TYPE_CHECKING:
    import torch

__all__ = ["TorchModel"]


def _rows(inputs: tuple[torch.Tensor | None, ...], rows: Any) -> list[torch.Tensor | None]:
    """The same rows of every network input, passing None inputs through."""
    return [None if t is None else t[rows] for t in inputs]


class TorchModel(TabularModel):
    """A PyTorch network trained by one shared loop; subclasses build the network.

    Training: AdamW over shuffled mini-batches (a generator seeded with `seed`), cross-entropy or
    MSE on the standardised target. After every epoch the validation target loss (mean NLL or
    MSE) is computed; training stops after `patience` epochs without a strictly lower loss, or
    after `max_epochs`, and the best epoch's weights are restored. Without validation rows the
    epoch's mean training loss is monitored instead. `lr_scheduler: true` adds ReduceLROnPlateau
    on the monitored loss (factor 0.2, `lr_patience` epochs, min lr 2e-5: the Grinsztajn et al.
    benchmark's setting). A non-finite loss stops training with the best earlier weights, or with
    the training prior if there are none (`fit_info_["used_prior"]`), as the MLP does.

    Search-space keys named in TRAINING_DEFAULTS configure the loop; all others go to the network.
    """

    accelerator = "gpu"
    TRAINING_DEFAULTS: ClassVar[dict[str, Any]] = {
        "lr": 1e-3,
        "weight_decay": 0.0,
        "batch_size": 512,
        "max_epochs": 300,
        "patience": 40,
        "lr_scheduler": False,
        "lr_patience": 30,
    }
    EVAL_BATCH_SIZE: ClassVar[int] = 4096

    # ----------------------------------------------------------- subclass hooks
    @abstractmethod
    def _build_network(self, architecture: dict[str, Any], X_train: np.ndarray, d_out: int) -> torch.nn.Module:
        """The untrained network; `architecture` holds the non-training search-space keys."""

    def _inputs(self, X: np.ndarray, device: torch.device) -> tuple[torch.Tensor | None, ...]:
        """The network's positional inputs for rows X (default: one float32 matrix); an input
        may be None (e.g. FT-Transformer without continuous features)."""
        import torch  # deferred: loads torch

        return (torch.as_tensor(np.asarray(X, dtype=np.float32), device=device),)

    def _parameter_groups(self, network: torch.nn.Module) -> Iterable[Any]:
        """What AdamW optimises (a model may exempt some parameters from weight decay)."""
        return network.parameters()

    # ------------------------------------------------------------- the loop
    def _split_params(self) -> tuple[dict[str, Any], dict[str, Any]]:
        training = dict(self.TRAINING_DEFAULTS)
        architecture: dict[str, Any] = {}
        for key, value in self.params.items():
            (training if key in training else architecture)[key] = value
        for key in ("batch_size", "max_epochs", "patience", "lr_patience"):
            if int(training[key]) < 1:
                raise ValueError(f"{self.name}: {key} must be >= 1, got {training[key]!r}")
            training[key] = int(training[key])
        if float(training["lr"]) <= 0 or float(training["weight_decay"]) < 0:
            raise ValueError(f"{self.name}: lr must be > 0 and weight_decay >= 0")
        return training, architecture

    def _fit(
        self, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> None:
        import torch  # deferred: loads torch

        training, architecture = self._split_params()
        d_out = self.n_fit_classes if self.is_classifier else 1
        self._network: torch.nn.Module | None = None
        self._fallback: np.ndarray | float | None = None
        stopper, best_state = EarlyStopper(training["patience"]), None
        with torch_session(self.seed, self.n_jobs) as device:
            network = self._build_network(architecture, X_train, d_out).to(device)
            inputs, target = self._inputs(X_train, device), self._targets(y_train, device)
            monitor = None
            if X_val is not None and y_val is not None:
                monitor = (self._inputs(X_val, device), self._targets(y_val, device))
            optimizer = torch.optim.AdamW(
                self._parameter_groups(network),
                lr=float(training["lr"]),
                weight_decay=float(training["weight_decay"]),
            )
            scheduler = None
            if training["lr_scheduler"]:
                scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                    optimizer, factor=0.2, patience=training["lr_patience"], min_lr=2e-5
                )
            order = torch.Generator().manual_seed(self.seed)
            batch_size = min(training["batch_size"], X_train.shape[0])
            for epoch in range(1, training["max_epochs"] + 1):
                loss = self._train_epoch(network, optimizer, inputs, target, batch_size, order)
                if monitor is not None and np.isfinite(loss):
                    loss = self._loss_of(network, *monitor)
                improved, stop = stopper.step(epoch, loss)
                if improved:
                    best_state = {k: v.detach().clone() for k, v in network.state_dict().items()}
                if stop:
                    break
                if scheduler is not None:
                    scheduler.step(loss)
        if best_state is None:
            self._fallback = self._training_prior(y_train)
        else:
            network.load_state_dict(best_state)
        self._network, self._device = network.eval(), device
        self.fit_info_.update({**stopper.info(monitor is not None), "device": device.type})

    def _targets(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        import torch  # deferred: loads torch

        dtype = torch.long if self.is_classifier else torch.float32
        return torch.as_tensor(np.asarray(y), dtype=dtype, device=device)

    def _loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F  # deferred: loads torch

        if self.is_classifier:
            return F.cross_entropy(output, target)
        return F.mse_loss(output[:, 0], target)

    def _train_epoch(
        self,
        network: torch.nn.Module,
        optimizer: Any,
        inputs: tuple,
        target: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
    ) -> float:
        """One pass over shuffled mini-batches; returns the mean training loss."""
        import torch  # deferred: loads torch

        network.train()
        n_rows = target.shape[0]
        order = torch.randperm(n_rows, generator=generator).to(target.device)
        total = torch.zeros((), dtype=torch.float64, device=target.device)  # no sync per batch
        seen = 0
        for start in range(0, n_rows, batch_size):
            rows = order[start : start + batch_size]
            if rows.numel() == 1 and n_rows > 1:
                continue  # BatchNorm cannot normalise a single row
            optimizer.zero_grad(set_to_none=True)
            loss = self._loss(network(*_rows(inputs, rows)), target[rows])
            loss.backward()
            optimizer.step()
            total += loss.detach().double() * rows.numel()
            seen += rows.numel()
        return float(total) / max(seen, 1)

    def _outputs(self, network: torch.nn.Module, inputs: tuple) -> torch.Tensor:
        """Network outputs for all rows, in evaluation mode and in batches."""
        import torch  # deferred: loads torch

        network.eval()
        n_rows = next(t.shape[0] for t in inputs if t is not None)
        with torch.no_grad():
            parts = [
                network(*_rows(inputs, slice(start, start + self.EVAL_BATCH_SIZE)))
                for start in range(0, n_rows, self.EVAL_BATCH_SIZE)
            ]
        return torch.cat(parts)

    def _loss_of(self, network: torch.nn.Module, inputs: tuple, target: torch.Tensor) -> float:
        return float(self._loss(self._outputs(network, inputs), target))

    def _predicted_outputs(self, X: np.ndarray) -> np.ndarray:

        assert self._network is not None
        with torch_session(None, self.n_jobs):
            outputs = self._outputs(self._network, self._inputs(X, self._device))
        return outputs.double().cpu().numpy()

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        if isinstance(self._fallback, np.ndarray):
            return np.tile(self._fallback, (X.shape[0], 1))
        logits = self._predicted_outputs(X)
        logits -= logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        return proba / proba.sum(axis=1, keepdims=True)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        if self._fallback is not None:
            return np.full(X.shape[0], float(self._fallback))
        return self._predicted_outputs(X)[:, 0]

    def save_weights(self, path: Path) -> bool:
        """The best epoch's state dict; False for a constant or prior-only model."""
        network = getattr(self, "_network", None)
        if network is None or self._fallback is not None or self.fit_info_.get("constant"):
            return False
        from tabrepro.nn.checkpoint import save_state_dict  # deferred: loads torch

        save_state_dict(network, path)
        return True
