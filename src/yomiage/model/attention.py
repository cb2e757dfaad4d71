"""Channel LayerNorm and the relative-position attention encoder (spec §5.4).

Used by the text encoder and by every flow layer. Parameter names follow SBV2
checkpoints (``attn_layers.N.conv_q``, ``norm_layers_1.N.gamma``, …).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

WINDOW = 4  # relative positions -4..4, shared by all heads
CONDITION_LAYER = 2  # speaker embedding enters before this layer


def masked(x: Tensor, mask: Tensor | None) -> Tensor:
    """``x * mask``. None stands for a mask of ones (one sentence, nothing padded): the
    exported graphs run one sentence a call, so they carry no multiply by ones."""
    return x if mask is None else x * mask


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channel axis of ``[B, C, T]``, stored as gamma/beta."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.channels = channels
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: Tensor) -> Tensor:
        y = F.layer_norm(x.transpose(1, -1), (self.channels,), self.gamma, self.beta, self.eps)
        return y.transpose(1, -1)


def _band_index(length: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """For query i and relative offset o (0..8 for -4..4): the key ``i + o - WINDOW``
    (clamped into the sentence) and whether it is inside it, both ``[T, 9]``."""
    keys = (
        torch.arange(length, device=device)[:, None]
        + torch.arange(2 * WINDOW + 1, device=device)[None, :]
        - WINDOW
    )
    valid = (keys >= 0) & (keys < length)
    return keys.clamp(0, length - 1), valid


def band_for(x: Tensor, n_heads: int) -> tuple[Tensor, Tensor]:
    """:func:`_band_index` for ``x`` ``[B, C, T]``, its keys expanded to ``[B, n_heads, T, 9]``
    (the shape a scatter over the scores needs): made once per attention stack, so an
    exported graph computes the expanded shape once, not in every layer."""
    b, _, t = x.shape
    keys, valid = _band_index(t, x.device)
    return keys.expand(b, n_heads, t, 2 * WINDOW + 1), valid


class RelativeMultiHeadAttention(nn.Module):
    """Self-attention with relative key and value embeddings within ±4 positions.

    Written over the band of 9 keys around each query instead of SBV2's
    pad-and-reshape trick; the two are exactly equivalent (spec §5.4): each score
    in the band gets its one relative term added, and each relative value weight
    is the one attention weight at its offset. Nothing of size ``[T, T]`` beyond
    the scores themselves is built: an earlier gather over a ``[T, T]`` index
    spent a large share of the flow's time in int64 index copies, scatters and
    masks (measured: benchmarks/history/issue-32.md, second pass).
    """

    def __init__(self, channels: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = channels // n_heads
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        scale = self.head_dim**-0.5
        self.emb_rel_k = nn.Parameter(torch.randn(1, 2 * WINDOW + 1, self.head_dim) * scale)
        self.emb_rel_v = nn.Parameter(torch.randn(1, 2 * WINDOW + 1, self.head_dim) * scale)

    def _heads(self, x: Tensor) -> Tensor:
        b, _, t = x.shape
        return x.view(b, self.n_heads, self.head_dim, t).transpose(2, 3)  # [B, n, T, d]

    def forward(
        self, x: Tensor, attn_mask: Tensor | None, band: tuple[Tensor, Tensor] | None = None
    ) -> Tensor:
        """``attn_mask`` ``[B, 1, T, T]``: 0 where a query may not see a key (padding),
        None for one unpadded sentence; ``band``: :func:`band_for` ``x``, which an encoder
        makes once for all its layers."""
        q = self._heads(self.conv_q(x)) / math.sqrt(self.head_dim)
        k = self._heads(self.conv_k(x))
        v = self._heads(self.conv_v(x))
        band_keys, valid = band if band is not None else band_for(x, self.n_heads)
        scores = q @ k.transpose(-2, -1)
        rel_k = q @ self.emb_rel_k[0].transpose(0, 1)  # [B, n, T, 9]
        # Outside the sentence an offset's term is 0, added to the clamped key: exact.
        scores = scores.scatter_add(-1, band_keys, rel_k * valid)
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask == 0, -1e4)
        p = torch.softmax(scores, dim=-1)
        out = p @ v
        # Attention weight of each relative offset, then mix the value embeddings.
        p_rel = p.gather(-1, band_keys) * valid
        out = out + p_rel @ self.emb_rel_v[0]
        # As x's shape: one Shape in an exported graph, where naming b, c and t took eight.
        out = out.transpose(2, 3).reshape_as(x)
        return self.conv_o(out)


class FeedForward(nn.Module):
    """Two "same"-padded convolutions with ReLU, masked before each.

    An odd kernel pads equally on both sides, so the convolutions pad themselves: an
    exported graph then has no Pad node (and no padded copy) before each of them."""

    def __init__(self, channels: int, filter_channels: int, kernel_size: int) -> None:
        super().__init__()
        odd = kernel_size % 2 == 1
        self.pad = None if odd else ((kernel_size - 1) // 2, kernel_size // 2)
        padding = kernel_size // 2 if odd else 0
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size, padding=padding)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel_size, padding=padding)

    def _padded(self, x: Tensor) -> Tensor:
        return x if self.pad is None else F.pad(x, self.pad)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        y = torch.relu(self.conv_1(self._padded(masked(x, mask))))
        return masked(self.conv_2(self._padded(masked(y, mask))), mask)


class AttentionEncoder(nn.Module):
    """The transformer stack with speaker conditioning at layer 2."""

    def __init__(
        self,
        hidden_channels: int,
        filter_channels: int,
        n_heads: int,
        n_layers: int,
        kernel_size: int,
        gin_channels: int,
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.attn_layers = nn.ModuleList(
            RelativeMultiHeadAttention(hidden_channels, n_heads) for _ in range(n_layers)
        )
        self.norm_layers_1 = nn.ModuleList(
            ChannelLayerNorm(hidden_channels) for _ in range(n_layers)
        )
        self.ffn_layers = nn.ModuleList(
            FeedForward(hidden_channels, filter_channels, kernel_size) for _ in range(n_layers)
        )
        self.norm_layers_2 = nn.ModuleList(
            ChannelLayerNorm(hidden_channels) for _ in range(n_layers)
        )
        self.spk_emb_linear = nn.Linear(gin_channels, hidden_channels)

    def forward(self, x: Tensor, mask: Tensor | None, g: Tensor) -> Tensor:
        """``mask`` ``[B, 1, T]``, or None for one unpadded sentence (see :func:`masked`).
        What depends only on the length is made here once, not in each of the layers:
        in the exported flow that was 24 copies of the band's index arithmetic."""
        attn_mask = None if mask is None else mask.unsqueeze(2) * mask.unsqueeze(-1)
        band = band_for(x, self.n_heads)
        x = masked(x, mask)
        layers = zip(
            self.attn_layers, self.norm_layers_1, self.ffn_layers, self.norm_layers_2, strict=True
        )
        for i, (attn, norm_1, ffn, norm_2) in enumerate(layers):
            if i == CONDITION_LAYER:
                x = masked(x + self.spk_emb_linear(g.transpose(1, 2)).transpose(1, 2), mask)
            x = norm_1(x + attn(x, attn_mask, band))
            x = norm_2(x + ffn(x, mask))
        return masked(x, mask)
