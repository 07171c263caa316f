"""α-entmax with a learnable α, exact forward, gradients w.r.t. the scores and α.

α-entmax(z) = argmax_{p in simplex} pᵀz + H_α(p) (H_α: Tsallis α-entropy) has the closed form

    p_i = [1 + (α - 1)(z_i - τ)]_+ ^ (1 / (α - 1)),   τ such that Σ p_i = 1,

which is the usual [(α - 1) z_i - τ']_+^(1/(α-1)) with τ' = (α - 1) τ - 1, written in the units of
the scores. That form is why this module exists next to the `entmax` package (whose
`entmax_bisect` we checked and do not use):

* α → 1: with ε = α - 1, p_i = exp(log1p(ε (z_i - τ)) / ε) tends to exp(z_i - τ), i.e. softmax,
  and log1p keeps it accurate for any small ε (ε = 0 is accepted and *is* softmax). The package
  computes y ** (1 / (α - 1)), which is undefined at α = 1 and loses precision near it.
* the α gradient, (p - p̃)/ε² - (p log p - p̃ H)/ε in its textbook form (Correia et al. 2019),
  cancels catastrophically as ε → 0; we evaluate the same quantity through a series that has
  the finite softmax limit (see `_p_dlogp_deps`).
* speed: BiSHop calls entmax ~20 times per forward pass on small rows; the threshold is found by
  bisection (the reference, as in the thesis) or by Newton's method from a lower bound of the
  root (Jensen's), which converges monotonically because Σ_i p_i(τ) is convex and decreasing in
  τ for α ≤ 2 (the same root, to float precision, in 3-7 instead of ~30 iterations: ~3x faster
  than our bisection and ~6x faster than the package's 50-step `entmax_bisect` on BiSHop's
  shapes). Both work with the normalised axis first, where its sums are vectorised.

Both solvers end by renormalising p to sum to one. The backward pass is closed form and never
differentiates through the iterations: with g = p^(2-α) on the support,

    ∂L/∂z = g ⊙ dp - g (Σ g ⊙ dp) / Σ g,
    ∂L/∂α = Σ_i dp_i [p_i h_i - g̃_i Σ_j p_j h_j],   g̃ = g / Σ g,
    h_i = ∂ log p_i / ∂ε at fixed τ = -(log p_i)² φ(-ε log p_i),   φ(x) = (eˣ - 1 - x) / x².

The learnable α of a layer is α = 1 + sigmoid(θ) (`AlphaEntmax`): always inside (1, 2), smooth,
and θ = 0 gives α = 1.5. The module hands ε = sigmoid(θ) to the kernel directly, so α close to 1
keeps its precision (1 + sigmoid(θ) rounds to 1 in float32 once sigmoid(θ) < 6e-8).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import Tensor, nn

__all__ = ["entmax", "entmax_bisect", "AlphaEntmax", "alpha_from_logit", "logit_from_alpha", "Solver"]

Solver = Literal["bisect", "newton"]

_EPS_FLOOR = 1e-20  # ε below this is treated as this (indistinguishable from softmax in fp32/fp64)
_SERIES_LIMIT = 0.5  # φ(x) by its Taylor series below this, in closed form above
_CLOSED_FORM_EPS = 0.1  # from this ε on, the α gradient needs no series at all
_NEWTON_MAX_ITER = 100


def _log_floor(dtype: torch.dtype) -> float:
    """Smallest log-probability kept: exp of anything lower is flushed to 0.

    Speed, not accuracy: on x86 CPUs exp() of -inf, of an underflowing or a subnormal result is
    5-30x slower than of an ordinary argument, and entmax rows are full of them (everything
    outside the support). Probabilities below e^-80 (fp32) / e^-700 (fp64) are far below the
    rounding error of the others.
    """
    return -700.0 if dtype == torch.float64 else -80.0


def _bisect_iterations(dtype: torch.dtype) -> int:
    """Halvings of a bracket no wider than log(d) <= 30 down to the dtype's resolution."""
    return 60 if dtype == torch.float64 else 32


def _log_probabilities(scaled: Tensor, tau: Tensor, eps: Tensor, inv_eps: Tensor) -> tuple[Tensor, Tensor]:
    """(log p floored at _log_floor, 1 + ε (u - τ) clamped at 0) with u = z - max z, given
    scaled = ε u (formed once per call: ε (u - τ) is then ε u - ε τ, one pass over the row).

    p = [1 + ε (u - τ)]_+^(1/ε) = exp(log1p(ε (u - τ)) / ε), exact as ε -> 0.
    """
    q = (scaled - tau * eps).clamp_(min=-1.0)
    log_p = torch.log1p(q).mul_(inv_eps).clamp_(min=_log_floor(scaled.dtype))
    return log_p, q.add_(1.0)


def _mass(scaled: Tensor, tau: Tensor, eps: Tensor, inv_eps: Tensor, dim: int) -> Tensor:
    """Σ p(τ) - 1 along `dim` (entries outside the support add e^floor each: negligible)."""
    log_p, _ = _log_probabilities(scaled, tau, eps, inv_eps)
    return log_p.exp_().sum(dim, keepdim=True).sub_(1.0)


def _newton_start(u: Tensor, hi: Tensor, dim: int) -> Tensor:
    """A lower bound of the threshold τ, closer to it than 0 (the bracket's left end).

    The map x -> [1 + εx]_+^(1/ε) is convex (1/ε >= 1), so by Jensen Σ p_i(τ) >= d p(mean u - τ),
    which is 1 at τ = mean u + hi: there Σ p >= 1, i.e. τ is left of the root. On BiSHop's score
    rows Newton needs about a third fewer iterations from here than from 0.
    """
    return (u.mean(dim, keepdim=True) + hi).clamp_(min=0.0)


def _solve(u: Tensor, scaled: Tensor, eps: Tensor, dim: int, solver: Solver) -> Tensor:
    """The threshold τ (relative to max z) with Σ p = 1, shape of u with `dim` reduced to 1;
    scaled = ε u."""
    inv_eps = eps.reciprocal()
    d = u.shape[dim]
    # Bracket: τ = 0 gives p_max = 1 (sum >= 1); τ = (1 - d^-ε)/ε gives p_max = 1/d (sum <= 1).
    hi = -torch.expm1(-eps * math.log(d)) * inv_eps
    if solver == "bisect":
        lo = torch.zeros_like(u.narrow(dim, 0, 1))
        width = hi.expand_as(lo).clone()
        for _ in range(_bisect_iterations(u.dtype)):
            width.mul_(0.5)
            mid = lo + width
            lo = torch.where(_mass(scaled, mid, eps, inv_eps, dim) >= 0, mid, lo)
        return lo + 0.5 * width
    if solver != "newton":
        raise ValueError(f"unknown entmax solver {solver!r}")
    # Newton from a point left of the root: f(τ) = Σ p(τ) - 1 is convex and decreasing
    # (1/ε >= 1), so the iterates increase monotonically towards the root and never overshoot it
    # (up to rounding).
    # Stops once no row moves by more than a few ulps; the convergence is quadratic there.
    tau = _newton_start(u, hi, dim)
    tol = 8 * torch.finfo(u.dtype).eps
    for _ in range(_NEWTON_MAX_ITER):
        log_p, base = _log_probabilities(scaled, tau, eps, inv_eps)
        p = log_p.exp_()
        # -f'(τ) = Σ p^(1-ε) = Σ p / base; a floored p over a floored base stays negligible
        slope = (p / base.clamp_(min=1e-10)).sum(dim, keepdim=True)
        step = (p.sum(dim, keepdim=True) - 1.0) / slope
        tau = torch.minimum(tau + step, hi)
        if float(step.abs().max()) <= tol:
            break
    return tau


def _phi_series(x: Tensor) -> Tensor:
    """φ(x) = (eˣ - 1 - x)/x² for 0 <= x <= _SERIES_LIMIT by its Taylor series Σ xᵏ/(k+2)!."""
    result = torch.full_like(x, 1.0 / math.factorial(9))
    for k in range(6, -1, -1):
        result = result.mul_(x).add_(1.0 / math.factorial(k + 2))
    return result


def _p_dlogp_deps(p: Tensor, log_p: Tensor, g: Tensor, eps: Tensor) -> Tensor:
    """p_i h_i with h_i = ∂ log p_i / ∂ε at fixed τ; exact limit -p (log p)²/2 at ε = 0.

    Zero outside the support because p and g are. Both branches are finite everywhere (x is
    clamped for the series; ε is floored for the closed form, which is only selected where
    x = -ε log p >= 0.5, i.e. ε >= 0.5 / 700), so they are blended without torch.where. When every
    ε of the call is at least _CLOSED_FORM_EPS (BiSHop's α start at 1.5), one closed form through
    expm1 stays within 9e-7 of the largest term (fp64 reference), like the blend, in one pass
    instead of about twenty.
    """
    x = -eps * log_p  # >= 0
    if float(eps.min()) >= _CLOSED_FORM_EPS:
        # p x² φ(x) = p (eˣ - 1 - x), with eˣ - 1 by expm1: one pass instead of the series'
        # dozen; its rounding for small x stays below ~1e-6 of the largest term (fp64
        # reference, tests/unit/test_bishop.py)
        return (torch.expm1(x) - x).mul_(p).div_(-(eps * eps))
    series = -p * log_p.square() * _phi_series(x.clamp(max=_SERIES_LIMIT))
    closed = -(g - p - p * x) / eps.clamp(min=1e-4).square()
    use_closed = torch.sign(x - x.clamp(max=_SERIES_LIMIT))  # 1 where x > limit, else 0
    return series + use_closed * (closed - series)


def _sum_to(t: Tensor, shape: torch.Size) -> Tensor:
    """Reduce a broadcast gradient back to `shape` (the inverse of broadcasting)."""
    while t.dim() > len(shape):
        t = t.sum(0)
    for i, size in enumerate(shape):
        if size == 1 and t.shape[i] != 1:
            t = t.sum(i, keepdim=True)
    return t


def _to_front(t: Tensor, dim: int) -> Tensor:
    """t with axis `dim` first, dense. Why: a sum over a dense leading axis adds whole rows
    (vectorised), where one over the last axis reduces 3-30 neighbours at a time; on BiSHop's
    score tensors the leading-axis sum measured 2.5-7x faster, and entmax is mostly such sums
    and element-wise passes."""
    return t.movedim(dim, 0).contiguous()


def _from_front(t: Tensor, dim: int) -> Tensor:
    """The inverse of `_to_front`, dense in the caller's layout."""
    return t.movedim(0, dim).contiguous()


class _EntmaxFunction(torch.autograd.Function):
    """Works with the normalised axis moved to the front (`_to_front`); takes and returns
    tensors in the caller's layout."""

    @staticmethod
    def forward(ctx: Any, z: Tensor, eps: Tensor, dim: int, solver: Solver) -> Tensor:
        dim = dim % z.dim()
        eps_c = eps.detach().to(z.dtype).clamp(min=_EPS_FLOOR, max=1.0)
        eps_c = _to_front(eps_c.reshape((1,) * (z.dim() - eps_c.dim()) + eps_c.shape), dim)
        inv_eps = eps_c.reciprocal()
        z_front = _to_front(z, dim)
        u = z_front - z_front.amax(0, keepdim=True)
        scaled = u * eps_c
        tau = _solve(u, scaled, eps_c, 0, solver)
        log_p, base = _log_probabilities(scaled, tau, eps_c, inv_eps)
        p = log_p.exp().mul_(torch.sign(base))  # exact zeros outside the support
        total = p.sum(0, keepdim=True)
        p = p.div_(total)
        log_p = log_p.sub_(total.log())
        ctx.save_for_backward(p, log_p, eps_c)
        ctx.dim = dim
        ctx.eps_shape = eps.shape
        return _from_front(p, dim)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
        p, log_p, eps = ctx.saved_tensors
        grad = _to_front(grad, ctx.dim)
        # g = p^(1-ε) on the support, 0 elsewhere (= 1/g''(p) of the Tsallis regulariser)
        g = (log_p * (1.0 - eps)).exp_().mul_(torch.sign(p))
        g_tilde = g / g.sum(0, keepdim=True)
        grad_z = grad_eps = None
        if ctx.needs_input_grad[0]:
            gd = g * grad
            grad_z = _from_front(gd.sub_(g_tilde * gd.sum(0, keepdim=True)), ctx.dim)
        if ctx.needs_input_grad[1]:
            ph = _p_dlogp_deps(p, log_p, g, eps)
            dp_deps = ph - g_tilde * ph.sum(0, keepdim=True)
            per_row = _from_front((grad * dp_deps).sum(0, keepdim=True), ctx.dim)
            grad_eps = _sum_to(per_row, ctx.eps_shape)
        return grad_z, grad_eps, None, None


def entmax(scores: Tensor, alpha_minus_one: Tensor | float, dim: int = -1, solver: Solver = "newton") -> Tensor:
    """α-entmax along `dim` given ε = α - 1 in [0, 1] (a float or a tensor broadcastable to
    `scores` with size 1 along `dim`, e.g. one value per head). Differentiable in both.

    Computed in at least float32 (bfloat16/float16 scores are upcast and the result cast back).
    """
    dim = dim % scores.dim()
    if not isinstance(alpha_minus_one, Tensor):
        alpha_minus_one = torch.tensor(float(alpha_minus_one), device=scores.device)
    if alpha_minus_one.dim() == scores.dim() and alpha_minus_one.shape[dim] != 1:
        raise ValueError("alpha must have size 1 along the normalised dimension")
    work = scores if scores.dtype in (torch.float32, torch.float64) else scores.float()
    out = _EntmaxFunction.apply(work, alpha_minus_one, dim, solver)
    return out.to(scores.dtype)


def entmax_bisect(scores: Tensor, alpha: Tensor | float, dim: int = -1) -> Tensor:
    """α-entmax with α in [1, 2] by bisection (the reference algorithm): α = 1 is softmax, α = 2
    sparsemax."""
    if isinstance(alpha, Tensor):
        return entmax(scores, alpha - 1.0, dim, solver="bisect")
    if not 1.0 <= alpha <= 2.0:
        raise ValueError(f"alpha must lie in [1, 2], got {alpha}")
    return entmax(scores, alpha - 1.0, dim, solver="bisect")


def alpha_from_logit(theta: Tensor) -> Tensor:
    """α = 1 + sigmoid(θ): the reparametrisation that keeps a learnable α inside (1, 2)."""
    return 1.0 + torch.sigmoid(theta)


def logit_from_alpha(alpha: float) -> float:
    """θ with 1 + sigmoid(θ) = α, for α strictly inside (1, 2)."""
    if not 1.0 < alpha < 2.0:
        raise ValueError(f"an initial alpha must lie strictly inside (1, 2), got {alpha}")
    e = alpha - 1.0
    return math.log(e / (1.0 - e))


class AlphaEntmax(nn.Module):
    """α-entmax over the last dimension with one learnable α = 1 + sigmoid(θ) per module
    (BiSHop: per GSH layer, shared by its heads, as in the authors' code)."""

    def __init__(self, alpha_init: float = 1.5, solver: Solver = "newton"):
        super().__init__()
        self.theta = nn.Parameter(torch.tensor(logit_from_alpha(alpha_init)))
        self.solver: Solver = solver

    @property
    def alpha(self) -> Tensor:
        return alpha_from_logit(self.theta.detach())

    def forward(self, scores: Tensor) -> Tensor:
        return entmax(scores, torch.sigmoid(self.theta), -1, self.solver)

    def extra_repr(self) -> str:
        return f"alpha={float(self.alpha):.4f}, solver={self.solver}"
