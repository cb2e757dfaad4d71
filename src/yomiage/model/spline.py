"""Monotonic rational-quadratic spline with linear tails (spec §5.6).

The stochastic duration predictor inverts it in its flows. Kept in float32
or wider: below that the quadratic root is unstable (spec §11).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

MIN_BIN_WIDTH = 1e-3
MIN_BIN_HEIGHT = 1e-3
MIN_DERIVATIVE = 1e-3


def _knots(
    unnormalized: Tensor, lower: float, upper: float, minimum: float
) -> tuple[Tensor, Tensor]:
    bins = unnormalized.shape[-1]
    sizes = torch.softmax(unnormalized, dim=-1)
    sizes = minimum + (1 - minimum * bins) * sizes
    knots = F.pad(torch.cumsum(sizes, dim=-1), (1, 0), value=0.0)
    knots = (upper - lower) * knots + lower
    knots = torch.cat([torch.full_like(knots[..., :1], lower), knots[..., 1:-1],
                       torch.full_like(knots[..., :1], upper)], dim=-1)  # fmt: skip
    return knots, knots[..., 1:] - knots[..., :-1]


def _bin_index(knots: Tensor, values: Tensor) -> Tensor:
    shifted = torch.cat([knots[..., :-1], knots[..., -1:] + 1e-6], dim=-1)
    return (torch.sum(values[..., None] >= shifted, dim=-1) - 1).unsqueeze(-1)


def rational_quadratic_spline(
    inputs: Tensor,
    unnormalized_widths: Tensor,
    unnormalized_heights: Tensor,
    unnormalized_derivatives: Tensor,
    *,
    inverse: bool,
    tail_bound: float = 5.0,
) -> tuple[Tensor, Tensor]:
    """Transform ``inputs`` (any shape ``S``) with per-element splines.

    Widths and heights are ``S + [K]``, inner derivatives ``S + [K - 1]``.
    Values outside ``[-tail_bound, tail_bound]`` pass through unchanged.
    Returns the outputs and log|det| (negated for the inverse).
    """
    inside = (inputs >= -tail_bound) & (inputs <= tail_bound)
    boundary = math.log(math.exp(1 - MIN_DERIVATIVE) - 1)
    edge = torch.full_like(unnormalized_derivatives[..., :1], boundary)
    derivatives = MIN_DERIVATIVE + F.softplus(torch.cat([edge, unnormalized_derivatives, edge], -1))

    x_knots, widths = _knots(unnormalized_widths, -tail_bound, tail_bound, MIN_BIN_WIDTH)
    y_knots, heights = _knots(unnormalized_heights, -tail_bound, tail_bound, MIN_BIN_HEIGHT)
    # Clamp outside values into range so the arithmetic below stays finite;
    # their results are replaced by the identity at the end.
    values = torch.where(inside, inputs, torch.zeros_like(inputs))
    idx = _bin_index(y_knots if inverse else x_knots, values)

    def pick(t: Tensor) -> Tensor:
        return t.gather(-1, idx)[..., 0]

    x_k, w_k, y_k, h_k = pick(x_knots), pick(widths), pick(y_knots), pick(heights)
    d_k, d_k1 = pick(derivatives), pick(derivatives[..., 1:])
    s = h_k / w_k
    slope_sum = d_k + d_k1 - 2 * s

    if inverse:
        delta = values - y_k
        a = delta * slope_sum + h_k * (s - d_k)
        b = h_k * d_k - delta * slope_sum
        c = -s * delta
        theta = (2 * c) / (-b - torch.sqrt(b.pow(2) - 4 * a * c))
        out = theta * w_k + x_k
    else:
        theta = (values - x_k) / w_k
        t1 = theta * (1 - theta)
        out = y_k + h_k * (s * theta.pow(2) + d_k * t1) / (s + slope_sum * t1)
    t1 = theta * (1 - theta)
    numerator = s.pow(2) * (d_k1 * theta.pow(2) + 2 * s * t1 + d_k * (1 - theta).pow(2))
    logdet = torch.log(numerator) - 2 * torch.log(s + slope_sum * t1)
    if inverse:
        logdet = -logdet
    outputs = torch.where(inside, out, inputs)
    logabsdet = torch.where(inside, logdet, torch.zeros_like(logdet))
    return outputs, logabsdet
