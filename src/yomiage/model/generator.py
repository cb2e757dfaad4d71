"""The HiFi-GAN generator (``dec``) that turns latent frames into audio (spec §5.9).

Weight norm is folded into plain ``weight`` tensors when a checkpoint is
loaded, so these are ordinary convolutions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from yomiage.sbv2.config import ModelHyperparameters

STAGE_SLOPE = 0.1
FINAL_SLOPE = 0.01


def _same_padding(kernel_size: int, dilation: int) -> int:
    return (kernel_size * dilation - dilation) // 2


class ResBlock1(nn.Module):
    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(
            nn.Conv1d(
                channels, channels, kernel_size, dilation=d, padding=_same_padding(kernel_size, d)
            )
            for d in dilations
        )
        self.convs2 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, padding=_same_padding(kernel_size, 1))
            for _ in dilations
        )

    def forward(self, x: Tensor) -> Tensor:
        for c1, c2 in zip(self.convs1, self.convs2, strict=True):
            t = c1(F.leaky_relu(x, STAGE_SLOPE))
            x = x + c2(F.leaky_relu(t, STAGE_SLOPE))
        return x


class ResBlock2(nn.Module):
    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(
                channels, channels, kernel_size, dilation=d, padding=_same_padding(kernel_size, d)
            )
            for d in dilations[:2]
        )

    def forward(self, x: Tensor) -> Tensor:
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, STAGE_SLOPE))
        return x


class Generator(nn.Module):
    def __init__(self, hp: ModelHyperparameters) -> None:
        super().__init__()
        c0 = hp.upsample_initial_channel
        self.conv_pre = nn.Conv1d(hp.inter_channels, c0, 7, padding=3)
        self.cond = nn.Conv1d(hp.gin_channels, c0, 1)
        block = ResBlock1 if hp.resblock == "1" else ResBlock2
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for i, (rate, kernel) in enumerate(
            zip(hp.upsample_rates, hp.upsample_kernel_sizes, strict=True)
        ):
            c_in, c_out = c0 // 2**i, c0 // 2 ** (i + 1)
            self.ups.append(
                nn.ConvTranspose1d(c_in, c_out, kernel, rate, padding=(kernel - rate) // 2)
            )
            for k, d in zip(hp.resblock_kernel_sizes, hp.resblock_dilation_sizes, strict=True):
                self.resblocks.append(block(c_out, k, d))
        self.n_kernels = len(hp.resblock_kernel_sizes)
        self.conv_post = nn.Conv1d(c0 // 2 ** len(hp.upsample_rates), 1, 7, padding=3, bias=False)

    def forward(self, z: Tensor, g: Tensor) -> Tensor:
        """Latent ``[B, I, F]`` to audio ``[B, 1, F * hop]`` in ``[-1, 1]``."""
        x = self.conv_pre(z) + self.cond(g)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, STAGE_SLOPE))
            blocks = self.resblocks[i * self.n_kernels : (i + 1) * self.n_kernels]
            total = blocks[0](x)
            for block in blocks[1:]:
                total = total + block(x)
            x = total / self.n_kernels
        x = self.conv_post(F.leaky_relu(x, FINAL_SLOPE))
        return torch.tanh(x)
