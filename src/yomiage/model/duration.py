"""Duration predictors: deterministic (``dp``) and stochastic (``sdp``, reverse only).

Only inference modules are built. The SDP's posterior branch (``post_*``) and
its first ConvFlow (``flows.1``, skipped in reverse) are training-only, so
``flows`` is a dict keyed by the checkpoint's indices ``0, 3, 5, 7``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from yomiage.model.attention import ChannelLayerNorm
from yomiage.model.spline import rational_quadratic_spline

DP_FILTER_CHANNELS = 256
DP_KERNEL = 3
SDP_KERNEL = 3
SDP_LAYERS = 3
SPLINE_BINS = 10
SPLINE_TAIL_BOUND = 5.0
# Reverse order of the SDP flows by checkpoint index; flips sit between them.
SDP_REVERSE_ORDER = ("7", "5", "3")


class DurationPredictor(nn.Module):
    def __init__(self, in_channels: int, gin_channels: int) -> None:
        super().__init__()
        f, k = DP_FILTER_CHANNELS, DP_KERNEL
        self.conv_1 = nn.Conv1d(in_channels, f, k, padding=k // 2)
        self.norm_1 = ChannelLayerNorm(f)
        self.conv_2 = nn.Conv1d(f, f, k, padding=k // 2)
        self.norm_2 = ChannelLayerNorm(f)
        self.proj = nn.Conv1d(f, 1, 1)
        self.cond = nn.Conv1d(gin_channels, in_channels, 1)

    def forward(self, x: Tensor, mask: Tensor, g: Tensor) -> Tensor:
        """Log-durations ``[B, 1, T]``."""
        x = x + self.cond(g)
        x = self.norm_1(torch.relu(self.conv_1(x * mask)))
        x = self.norm_2(torch.relu(self.conv_2(x * mask)))
        return self.proj(x * mask) * mask


class DilatedDepthSeparableConv(nn.Module):
    """DDSConv: depthwise dilated convs (dilation 3^i), 1x1 convs, LayerNorm, exact GELU."""

    def __init__(self, channels: int, kernel_size: int, n_layers: int) -> None:
        super().__init__()
        self.convs_sep = nn.ModuleList()
        self.convs_1x1 = nn.ModuleList()
        self.norms_1 = nn.ModuleList()
        self.norms_2 = nn.ModuleList()
        for i in range(n_layers):
            dilation = kernel_size**i
            padding = (kernel_size * dilation - dilation) // 2
            self.convs_sep.append(
                nn.Conv1d(
                    channels,
                    channels,
                    kernel_size,
                    groups=channels,
                    dilation=dilation,
                    padding=padding,
                )
            )
            self.convs_1x1.append(nn.Conv1d(channels, channels, 1))
            self.norms_1.append(ChannelLayerNorm(channels))
            self.norms_2.append(ChannelLayerNorm(channels))

    def forward(self, x: Tensor, mask: Tensor, extra: Tensor | None = None) -> Tensor:
        if extra is not None:
            x = x + extra
        for sep, pw, n1, n2 in zip(
            self.convs_sep, self.convs_1x1, self.norms_1, self.norms_2, strict=True
        ):
            y = F.gelu(n1(sep(x * mask)))
            y = F.gelu(n2(pw(y)))
            x = x + y
        return x * mask


class ElementwiseAffine(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.m = nn.Parameter(torch.zeros(channels, 1))
        self.logs = nn.Parameter(torch.zeros(channels, 1))

    def reverse(self, x: Tensor, mask: Tensor) -> Tensor:
        return (x - self.m) * torch.exp(-self.logs) * mask


class ConvFlow(nn.Module):
    """Spline coupling: channel 0 conditions a spline applied to channel 1."""

    def __init__(self, filter_channels: int) -> None:
        super().__init__()
        self.filter_channels = filter_channels
        self.pre = nn.Conv1d(1, filter_channels, 1)
        self.convs = DilatedDepthSeparableConv(filter_channels, SDP_KERNEL, SDP_LAYERS)
        self.proj = nn.Conv1d(filter_channels, 3 * SPLINE_BINS - 1, 1)

    def reverse(self, x: Tensor, mask: Tensor, c: Tensor) -> Tensor:
        x0, x1 = x[:, :1], x[:, 1:]
        h = self.proj(self.convs(self.pre(x0), mask, extra=c)) * mask
        h = h.transpose(1, 2)  # [B, T, 29]
        scale = math.sqrt(self.filter_channels)
        widths = h[..., :SPLINE_BINS] / scale
        heights = h[..., SPLINE_BINS : 2 * SPLINE_BINS] / scale
        derivatives = h[..., 2 * SPLINE_BINS :]
        y1, _ = rational_quadratic_spline(
            x1[:, 0], widths, heights, derivatives, inverse=True, tail_bound=SPLINE_TAIL_BOUND
        )
        return torch.cat([x0, y1.unsqueeze(1)], dim=1) * mask


class StochasticDurationPredictor(nn.Module):
    def __init__(self, in_channels: int, gin_channels: int) -> None:
        super().__init__()
        channels = in_channels  # SBV2 overrides the filter size with the input size
        self.pre = nn.Conv1d(in_channels, channels, 1)
        self.proj = nn.Conv1d(channels, channels, 1)
        self.convs = DilatedDepthSeparableConv(channels, SDP_KERNEL, SDP_LAYERS)
        self.cond = nn.Conv1d(gin_channels, channels, 1)
        self.flows = nn.ModuleDict({"0": ElementwiseAffine(2)})
        for key in SDP_REVERSE_ORDER:
            self.flows[key] = ConvFlow(channels)

    def forward(self, x: Tensor, mask: Tensor, g: Tensor, noise: Tensor) -> Tensor:
        """Log-durations ``[B, 1, T]`` from ``noise`` ``[B, 2, T]`` (already scaled, unmasked)."""
        c = self.pre(x) + self.cond(g)
        c = self.proj(self.convs(c, mask)) * mask
        z = noise
        for key in SDP_REVERSE_ORDER:
            z = torch.flip(z, [1])
            flow = self.flows[key]
            z = flow.reverse(z, mask, c)  # type: ignore[operator]
        z = torch.flip(z, [1])
        affine = self.flows["0"]
        z = affine.reverse(z, mask)  # type: ignore[operator]
        return z[:, :1]
