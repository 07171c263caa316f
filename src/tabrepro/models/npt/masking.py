"""What the model may see, what it must predict, and the loss on it (NPT §2.6, App. C.4-C.5).

Label safety is structural, not a matter of configuration: `NPTTable` overwrites the target of
every validation and test row with zero and sets its mask bit *when the table is built*, and
keeps the true labels in a separate tensor (`labels`) that only the scoring functions read.
Every model input (`inputs`, mask draws, minibatch composition, stratification) is derived from
the zeroed tensor, so no setting of any knob can place a validation or test label in front of
the model or in the training loss.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from tabrepro.features import Feature
from tabrepro.models.npt.config import NPTConfig

__all__ = [
    "TRAIN",
    "VAL",
    "TEST",
    "NPTTable",
    "MaskDraw",
    "LossTerms",
    "draw_masks",
    "batch_plan",
    "entry_losses",
    "npt_loss",
    "feature_loss_weight",
    "target_loss",
]

TRAIN, VAL, TEST = 0, 1, 2


class NPTTable:
    """A table of n rows x d attributes (target last) with each row's role (TRAIN/VAL/TEST).

    `values` holds class indices for categorical attributes and standardised floats for
    continuous ones; NaN (or `missing`) marks genuinely missing entries, which get mask bit 1 and
    are never scored. Built once; the tensors it exposes are never written to.
    """

    def __init__(self, attributes: Sequence[Feature], values: Tensor, split: Tensor, missing: Tensor | None = None):
        attributes = tuple(attributes)
        values = torch.as_tensor(values, dtype=torch.float32)
        split = torch.as_tensor(split, dtype=torch.int64).reshape(-1)
        if values.dim() != 2 or values.shape[1] != len(attributes):
            raise ValueError(f"values must be (n, {len(attributes)}), got {tuple(values.shape)}")
        if split.shape[0] != values.shape[0]:
            raise ValueError(f"split has {split.shape[0]} rows, values has {values.shape[0]}")
        if not bool(((split == TRAIN) | (split == VAL) | (split == TEST)).all()):
            raise ValueError("split entries must be TRAIN (0), VAL (1) or TEST (2)")
        is_missing = torch.isnan(values)
        if missing is not None:
            missing = torch.as_tensor(missing, dtype=torch.bool)
            if missing.shape != values.shape:
                raise ValueError("missing must have the shape of values")
            is_missing = is_missing | missing
        observed_values = torch.where(is_missing, 0.0, values)
        if not bool(torch.isfinite(observed_values).all()):
            raise ValueError("values contains infinite entries")
        for j, attribute in enumerate(attributes):
            if attribute.is_categorical:
                column = observed_values[:, j]
                if bool(((column != column.round()) | (column < 0) | (column >= attribute.n_categories)).any()):
                    raise ValueError(
                        f"attribute {j} ({attribute.name!r}) needs class indices in [0, {attribute.n_categories})"
                    )

        hidden = is_missing.clone()
        hidden[:, -1] |= split != TRAIN  # validation/test targets: masked, always
        self._attributes = attributes
        self._split = split
        self._missing = is_missing
        self._input_missing = hidden
        # The one tensor models are fed from: every hidden entry (missing values and every
        # non-training target) is zero here.
        self._inputs = torch.where(hidden, 0.0, values)
        self._labels = observed_values[:, -1].clone()  # scoring only
        self._label_observed = ~is_missing[:, -1]

    @classmethod
    def _from_parts(cls, attributes: tuple[Feature, ...], parts: dict[str, Tensor]) -> NPTTable:
        table = cls.__new__(cls)
        table._attributes = attributes
        for name, tensor in parts.items():
            setattr(table, name, tensor)
        return table

    # ----------------------------------------------------------------- read-only views
    @property
    def attributes(self) -> tuple[Feature, ...]:
        return self._attributes

    @property
    def inputs(self) -> Tensor:
        """(n, d) values as the model may see them: every non-training target is zero."""
        return self._inputs

    @property
    def input_missing(self) -> Tensor:
        """(n, d) mask bits at evaluation: missing entries and every non-training target."""
        return self._input_missing

    @property
    def missing(self) -> Tensor:
        """(n, d) genuinely missing entries."""
        return self._missing

    @property
    def split(self) -> Tensor:
        return self._split

    @property
    def labels(self) -> Tensor:
        """(n,) true targets of every row; read by scoring code only, never by model inputs."""
        return self._labels

    @property
    def label_observed(self) -> Tensor:
        return self._label_observed

    @property
    def n_rows(self) -> int:
        return int(self._inputs.shape[0])

    @property
    def device(self) -> torch.device:
        return self._inputs.device

    def rows(self, role: int) -> Tensor:
        return torch.nonzero(self._split == role).reshape(-1)

    def to(self, device: torch.device | str) -> NPTTable:
        names = ("_split", "_missing", "_input_missing", "_inputs", "_labels", "_label_observed")
        return self._from_parts(self._attributes, {n: getattr(self, n).to(device) for n in names})

    def fingerprint(self) -> str:
        """Hash of everything the training trajectory may depend on (test labels excluded)."""
        digest = hashlib.sha256()
        digest.update(_attributes_text(self._attributes).encode())
        val = self._split == VAL
        for tensor in (self._inputs, self._input_missing, self._split, torch.where(val, self._labels, 0.0)):
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()


def _attributes_text(attributes: Sequence[Feature]) -> str:
    """The attributes as checkpoint format 1 hashed them into `NPTTable.fingerprint` (the repr of
    a tuple of NPT's former `Attribute(kind, n_classes, name)`), so that state files written
    before the attributes became `Feature`s still resume."""
    items = [f"Attribute(kind={a.kind!r}, n_classes={a.n_categories!r}, name={a.name!r})" for a in attributes]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


@dataclass(frozen=True)
class MaskDraw:
    """One epoch's stochastic masking of the whole table (rows are sliced per minibatch)."""

    values: Tensor  # (n, d) model-input codes: masked entries zero, randomised entries redrawn
    mask: Tensor  # (n, d) bool model-input mask bits
    target_selected: Tensor  # (n,) bool: training targets in the target loss
    feature_selected: Tensor  # (n, d) bool: feature entries in the feature loss (last col False)
    randomised: Tensor  # (n, d) bool: selected entries given a random value instead of a mask


# Rows per piece of a mask draw: about 4 M entries (16 MiB per float piece). Drawing the whole
# table's random numbers at once held four float32 copies of it and their products: ~10 GiB passing
# through for HIGGS's 11 M x 29 table at every epoch, on top of the training step.
MASK_DRAW_ENTRIES = 1 << 22


def _row_pieces(n: int, d: int, entries: int) -> list[tuple[int, int]]:
    """Row ranges covering n rows of d entries, each about `entries` entries, in which the CPU
    generator draws the numbers one whole-table call would draw. `torch.rand` draws element by
    element; `torch.randn` transforms blocks of 16 and redraws the last 16 entries of a tensor
    whose size is not a multiple of 16, so every piece but the last holds a multiple of 16
    entries and the last at least 16 (tests/unit/test_npt.py checks the equality)."""
    step = 16 // math.gcd(d, 16)  # rows per multiple of 16 entries
    rows = max(step, entries // max(d, 1) // step * step)
    bounds = [*range(0, n, rows), n]
    if len(bounds) > 2 and (bounds[-1] - bounds[-2]) * d < 16:
        del bounds[-2]  # a short last piece joins the one before it
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def draw_masks(
    table: NPTTable, config: NPTConfig, generator: torch.Generator, piece_entries: int = MASK_DRAW_ENTRIES
) -> MaskDraw:
    """BERT-style stochastic feature and target masking for one epoch.

    Candidates are observed entries: features of training rows (and of validation/test rows when
    `feature_mask_non_train`), targets of training rows only. Each is selected with p_feature /
    p_target; of the selected, a fraction p_randomise gets a random value (uniform class, or
    N(0, 1)) with mask bit 0, the rest are zeroed with mask bit 1. All selected entries are scored.
    The random numbers drawn do not depend on the configuration or on any label, so changing a
    rate or a label never shifts the random stream.

    The four streams (selection, randomisation, random class, random value) are drawn in that
    order, each over the whole table, but in pieces of rows (`piece_entries`), so that only the
    draw's own outputs are held whole; on a CPU the numbers are those of one call per stream.
    """
    n, d = table.inputs.shape
    device = table.device
    pieces = _row_pieces(n, d, piece_entries)

    def stream(draw: Callable[..., Tensor]) -> Iterator[tuple[slice, Tensor]]:
        for start, stop in pieces:
            yield slice(start, stop), draw((stop - start, d), generator=generator, device=device)

    observed = ~table.input_missing  # non-training targets are never observed here
    is_train = table.split == TRAIN
    rates = torch.full((d,), config.p_feature, device=device)
    rates[-1] = config.p_target
    selected = torch.empty((n, d), dtype=torch.bool, device=device)
    for rows, u_select in stream(torch.rand):
        candidates = observed[rows].clone()
        if not config.feature_mask_non_train:
            candidates[:, :-1] &= is_train[rows].unsqueeze(1)
        candidates[:, -1] &= is_train[rows]
        selected[rows] = candidates & (u_select < rates)
    randomised = torch.empty_like(selected)
    for rows, u_randomise in stream(torch.rand):
        randomised[rows] = selected[rows] & (u_randomise < config.p_randomise)

    n_classes = torch.tensor([a.n_categories for a in table.attributes], device=device)
    is_categorical = n_classes > 0
    values = table.inputs.clone()
    for rows, u_class in stream(torch.rand):
        random_class = torch.minimum(torch.floor(u_class * n_classes), (n_classes - 1).clamp(min=0))
        values[rows] = torch.where(randomised[rows] & is_categorical, random_class, values[rows])
    for rows, z_value in stream(torch.randn):
        values[rows] = torch.where(randomised[rows] & ~is_categorical, z_value, values[rows])

    mask = table.input_missing | (selected & ~randomised)
    values.masked_fill_(mask, 0.0)
    target_selected = selected[:, -1].clone()
    selected[:, -1] = False  # from here on the feature selection
    return MaskDraw(
        values=values,
        mask=mask,
        target_selected=target_selected,
        feature_selected=selected,
        randomised=randomised,
    )


def batch_plan(
    table: NPTTable, rows: Tensor, batch_size: int | None, generator: torch.Generator, stratify: bool = False
) -> list[Tensor]:
    """Split `rows` into minibatches that each keep the TRAIN/VAL/TEST proportions.

    Each role's rows are shuffled and dealt round-robin to the batches, so batch sizes differ by at
    most one row per role. With `stratify`, training rows are grouped by class (after shuffling)
    before dealing, which gives every batch the class proportions of the training rows. The class
    comes from `table.inputs`, where only training targets are non-zero.
    """
    rows = rows.to(table.device)
    n_batches = 1 if batch_size is None else max(1, math.ceil(rows.numel() / batch_size))
    parts: list[list[Tensor]] = [[] for _ in range(n_batches)]
    roles = table.split[rows]
    for role in (TRAIN, VAL, TEST):
        members = rows[roles == role]
        order = members[torch.randperm(members.numel(), generator=generator, device=generator.device).to(table.device)]
        if stratify and role == TRAIN and table.attributes[-1].is_categorical:
            classes = table.inputs[order, -1]
            order = order[torch.argsort(classes, stable=True)]
        for b in range(n_batches):
            parts[b].append(order[b::n_batches])
    return [torch.cat(p) for p in parts]


def entry_losses(
    outputs: Sequence[Tensor], truth: Tensor, attributes: Sequence[Feature], columns: Sequence[int] | None = None
) -> Tensor:
    """(b, len(columns)) per-entry losses: cross-entropy, or squared error on standardised values.

    Computed for every row (not just selected ones) and later multiplied by a 0/1 selection: that
    keeps shapes static (no host sync on GPU) and gives unselected entries exactly zero gradient.
    """
    columns = range(len(attributes)) if columns is None else columns
    losses = []
    for j in columns:
        out = outputs[j].float()
        if attributes[j].is_categorical:
            losses.append(F.cross_entropy(out, truth[:, j].long(), reduction="none"))
        else:
            losses.append((out[:, 0] - truth[:, j]) ** 2)
    return torch.stack(losses, dim=1)


@dataclass(frozen=True)
class LossTerms:
    total: Tensor  # (1 - lambda) * target + lambda * feature, the quantity differentiated
    target: Tensor  # mean loss over the selected target entries
    feature: Tensor  # mean loss over the selected feature entries
    n_target: Tensor
    n_feature: Tensor


def npt_loss(
    outputs: Sequence[Tensor],
    truth: Tensor,
    target_selected: Tensor,
    feature_selected: Tensor,
    attributes: Sequence[Feature],
    lam: float,
) -> LossTerms:
    """L = (1 - lambda) L_targets + lambda L_features, each term divided by its own entry count.

    `truth` are the true codes of the batch rows taken from `NPTTable.inputs`, so it holds no
    validation or test label (those entries are zero and never selected anyway).
    """
    d = len(attributes)
    target_losses = entry_losses(outputs, truth, attributes, [d - 1])[:, 0]
    t_weight = target_selected.to(target_losses.dtype)
    n_target = t_weight.sum()
    target = (target_losses * t_weight).sum() / n_target.clamp(min=1.0)
    if lam > 0.0 and d > 1:
        feature_losses = entry_losses(outputs, truth, attributes, range(d - 1))
        f_weight = feature_selected[:, : d - 1].to(feature_losses.dtype)
        n_feature = f_weight.sum()
        feature = (feature_losses * f_weight).sum() / n_feature.clamp(min=1.0)
    else:  # lambda = 0: the feature term cannot move the parameters; skip computing it
        n_feature = feature_selected[:, : d - 1].sum().to(t_weight.dtype)
        feature = torch.zeros((), device=truth.device)
    total = (1.0 - lam) * target + lam * feature
    return LossTerms(total=total, target=target, feature=feature, n_target=n_target, n_feature=n_feature)


def target_loss(target_outputs: Tensor, labels: Tensor, attribute: Feature) -> Tensor:
    """Mean target loss (cross-entropy or MSE on the standardised scale) over the given rows."""
    if labels.numel() == 0:
        return torch.tensor(float("nan"))
    losses = entry_losses([target_outputs], labels.unsqueeze(1), [attribute])
    return losses.mean()


def feature_loss_weight(config: NPTConfig, step: int) -> float:
    """lambda at `step`: cosine from 1 at step 0 to 0 at max_steps, or a fixed value.

    Without feature masking there is nothing to reconstruct, so lambda is 0 throughout (the paper's
    Income setting); otherwise a cosine schedule would silence the target loss early on.
    """
    if config.p_feature == 0.0:
        return 0.0
    if config.feature_loss_weight == "cosine":
        progress = min(max(step / config.max_steps, 0.0), 1.0)
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return float(config.feature_loss_weight)
