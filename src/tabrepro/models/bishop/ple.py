"""Piecewise-linear encoding (PLE) of numerical features on training-quantile bins (§3.1).

With bin edges b_0 <= ... <= b_G at the 0, 1/G, ..., 1 quantiles of a feature's TRAINING values,
component g = 1..G of the encoding of x is

    e_g = 0                              if x < b_{g-1} and g > 1
          1                              if x >= b_g and g < G
          (x - b_{g-1}) / (b_g - b_{g-1})  otherwise,

so the first and last components extrapolate linearly below b_0 and above b_G (the thesis'
formula; the authors' code clips them too). A degenerate bin (b_{g-1} = b_g, frequent for
discrete features) encodes the step 1[x >= b_g]. The edges are a registered buffer: they travel
with the state dict and hence with every checkpoint and weights file, and `fit` is the only
place they are computed, from the rows it is given (the trainer passes training rows only).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["PiecewiseLinearEncoding", "quantile_edges"]


def quantile_edges(x: Tensor, n_bins: int) -> Tensor:
    """(n_features, n_bins + 1) edges at the quantiles 0, 1/G, ..., 1 of each column of x.

    Missing values (NaN) are ignored; a column without any observed value gets all-zero edges.
    Computed in float64 so that the edges do not depend on the input dtype's rounding.
    """
    if x.dim() != 2:
        raise ValueError(f"expected a (rows, features) matrix, got shape {tuple(x.shape)}")
    values = x.detach().to(device="cpu", dtype=torch.float64)
    levels = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)
    if values.shape[0] == 0:
        return torch.zeros((values.shape[1], n_bins + 1), dtype=torch.float64)
    edges = torch.nanquantile(values, levels, dim=0).T.contiguous()  # (features, G + 1)
    return torch.nan_to_num(edges, nan=0.0)


class PiecewiseLinearEncoding(nn.Module):
    """(batch, features) -> (batch, features, n_bins); `fit` on training rows before use."""

    # buffers (register_buffer), declared for the type checker
    edges: Tensor
    fitted: Tensor
    lower: Tensor
    upper: Tensor

    def __init__(self, n_features: int, n_bins: int):
        super().__init__()
        self.n_features = n_features
        self.n_bins = n_bins
        self.register_buffer("edges", torch.zeros((n_features, n_bins + 1)))
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))
        lower = torch.zeros(n_bins)
        upper = torch.ones(n_bins)
        lower[0] = -torch.inf  # component 1 is not clipped below, component G not above
        upper[-1] = torch.inf
        self.register_buffer("lower", lower, persistent=False)
        self.register_buffer("upper", upper, persistent=False)

    @torch.no_grad()
    def fit(self, x: Tensor) -> PiecewiseLinearEncoding:
        """Set the bin edges from the rows of x (the training rows: nothing else may be passed)."""
        if x.shape[1] != self.n_features:
            raise ValueError(f"expected {self.n_features} features, got {x.shape[1]}")
        self.edges.copy_(quantile_edges(x, self.n_bins).to(self.edges))
        self.fitted.fill_(True)
        return self

    def forward(self, x: Tensor) -> Tensor:
        if not bool(self.fitted):
            raise RuntimeError("PiecewiseLinearEncoding used before fit()")
        left = self.edges[:, :-1]
        right = self.edges[:, 1:]
        width = right - left
        degenerate = width <= 0
        x = x.unsqueeze(-1)
        ramp = (x - left) / torch.where(degenerate, torch.ones_like(width), width)
        ramp = torch.minimum(torch.maximum(ramp, self.lower), self.upper)
        step = (x >= right).to(ramp.dtype)
        return torch.where(degenerate, step, ramp)

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, n_bins={self.n_bins}"
