"""Decoding audio in windows of frames (no torch).

The generator is a stack of convolutions, so each output sample depends on a
bounded number of latent frames around it: its receptive field, derived here
from the hyperparameters. Decoding a window padded by that many frames on each
side and cropping the padding gives the same samples as decoding the whole
utterance, in bounded memory, and lets the first audio leave early.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from yomiage.sbv2.config import ModelHyperparameters

_CONV_PRE_KERNEL = 7
_CONV_POST_KERNEL = 7


def _resblock_reach(hp: ModelHyperparameters) -> int:
    """Samples one resblock stage looks at on each side (the widest kernel wins)."""
    reach = 0
    for kernel, dilations in zip(hp.resblock_kernel_sizes, hp.resblock_dilation_sizes, strict=True):
        half = (kernel - 1) // 2
        if hp.resblock == "1":  # a dilated conv then a plain one per dilation
            reach = max(reach, sum(half * d + half for d in dilations))
        else:
            reach = max(reach, sum(half * d for d in dilations[:2]))
    return reach


def receptive_field_frames(hp: ModelHyperparameters) -> int:
    """Latent frames on each side that can influence a frame's samples.

    Walks the generator backwards: the reach in samples at each stage's rate
    grows by the resblocks' reach, and a transposed conv of stride r and
    kernel k maps a reach of n output samples to ceil((n + k) / r) inputs.
    Rounded up, so it is an upper bound; tests check exactness of the output.
    """
    reach = (_CONV_POST_KERNEL - 1) // 2
    block = _resblock_reach(hp)
    for rate, kernel in reversed(
        list(zip(hp.upsample_rates, hp.upsample_kernel_sizes, strict=True))
    ):
        reach += block
        reach = math.ceil((reach + kernel) / rate)
    return reach + (_CONV_PRE_KERNEL - 1) // 2


@dataclass(frozen=True)
class Window:
    """Decode frames ``[start, stop)`` of the padded span ``[pad_start, pad_stop)``."""

    start: int
    stop: int
    pad_start: int
    pad_stop: int

    def crop(self, hop: int) -> slice:
        """Samples of the padded span's audio that belong to ``[start, stop)``."""
        return slice((self.start - self.pad_start) * hop, (self.stop - self.pad_start) * hop)


def windows(n_frames: int, size: int, context: int, first: int | None = None) -> Iterator[Window]:
    """Cover ``n_frames`` with windows of ``size`` frames (``first`` for the first one,
    so streaming can start sooner), each padded by ``context`` frames where it can be."""
    if size < 1 or context < 0:
        raise ValueError("window size must be positive and context non-negative")
    start = 0
    step = first or size
    while start < n_frames:
        stop = min(n_frames, start + step)
        yield Window(start, stop, max(0, start - context), min(n_frames, stop + context))
        start, step = stop, size
