"""The transformer-coupling flow (``flow``), reverse direction only (spec §5.8)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from yomiage.model.attention import AttentionEncoder, masked

FLOW_LAYERS = 6
FLOW_KERNEL = 5
# Coupling layers by checkpoint index; the odd indices are parameter-free flips.
COUPLING_KEYS = ("0", "2", "4", "6")


class TransformerCouplingLayer(nn.Module):
    """Mean-only coupling: the first half of the channels shifts the second half."""

    def __init__(
        self, channels: int, hidden: int, filter_channels: int, n_heads: int, gin: int
    ) -> None:
        super().__init__()
        half = channels // 2
        self.pre = nn.Conv1d(half, hidden, 1)
        self.enc = AttentionEncoder(hidden, filter_channels, n_heads, FLOW_LAYERS, FLOW_KERNEL, gin)
        self.post = nn.Conv1d(hidden, half, 1)

    def reverse(self, x: Tensor, mask: Tensor | None, g: Tensor) -> Tensor:
        half = x.shape[1] // 2
        x0, x1 = x[:, :half], x[:, half:]
        h = self.enc(masked(self.pre(x0), mask), mask, g)
        mean = masked(self.post(h), mask)
        return torch.cat([x0, masked(x1 - mean, mask)], dim=1)


class TransformerCouplingFlow(nn.Module):
    def __init__(
        self, channels: int, hidden: int, filter_channels: int, n_heads: int, gin: int
    ) -> None:
        super().__init__()
        self.flows = nn.ModuleDict(
            {
                key: TransformerCouplingLayer(channels, hidden, filter_channels, n_heads, gin)
                for key in COUPLING_KEYS
            }
        )

    def reverse(self, z: Tensor, mask: Tensor | None, g: Tensor) -> Tensor:
        """Prior sample ``[B, I, F]`` to decoder input; starts with a flip (spec §11.10).
        ``mask`` ``[B, 1, F]``, or None for one unpadded sentence."""
        for key in reversed(COUPLING_KEYS):
            z = torch.flip(z, [1])
            layer = self.flows[key]
            z = layer.reverse(z, mask, g)  # type: ignore[operator]
        return z
