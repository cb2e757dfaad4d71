"""How much of a decoder window's padding each stage of the generator may drop.

A window is padded by the generator's receptive field (15 latent frames on
each side for SBV2's) so that its samples come out exactly as if the whole
sentence were decoded. Nearly all of that padding is there for the first
stage: the later stages, which run at 8-256 samples per frame and do ~80% of
the work, each need only a few dozen samples of it
(:func:`~yomiage.runtime.chunking.upsampler_margins`: 17, 58, 48 and 33 for
SBV2). A decoder graph written by ``yomiage convert`` takes, beside ``z`` and
``g``, an input :data:`TRIM_INPUT` saying how many samples to drop on each side
before each upsampler after the first; it defaults to none, so a caller that
does not feed it gets the whole window. Dropped that way the window's samples
are the same (the dropped ones lie outside every kept sample's reach) and a
first window of 8 frames decodes 1.7x faster, a 256-frame one ~1.15x
(full-size voice, ONNX Runtime, Zen 3, 2 threads).

OpenVINO is never fed trims: it keeps kernels for every input shape it meets,
and trims make more shapes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yomiage.runtime.chunking import upsampler_margins
from yomiage.sbv2.config import ModelHyperparameters

TRIM_INPUT = "trim"  # int64 [upsamplers - 1, 2]: samples dropped (left, right) before each


@dataclass(frozen=True)
class StageTrims:
    """The decoder's trimmable points: at each upsampler after the first, its rate in
    samples per latent frame and the context (samples) it still needs on each side."""

    rates: tuple[int, ...]
    margins: tuple[int, ...]
    hop: int

    def __post_init__(self) -> None:
        if not self.rates or len(self.rates) != len(self.margins):
            raise ValueError("one margin per trimmed upsampler")
        if any(m < 0 for m in self.margins) or any(r < 1 for r in self.rates):
            raise ValueError("rates must be positive and margins not negative")
        steps = (*self.rates, self.hop)
        if any(b % a for a, b in itertools.pairwise(steps)):
            raise ValueError("each rate must divide the next, and the last the hop length")

    @classmethod
    def of_model(cls, hp: ModelHyperparameters) -> StageTrims:
        """The trims of a generator with ``hp``'s upsamplers."""
        rates = tuple(math.prod(hp.upsample_rates[:i]) for i in range(1, len(hp.upsample_rates)))
        return cls(rates, upsampler_margins(hp)[1:], math.prod(hp.upsample_rates))

    def amounts(self, left: int, right: int) -> tuple[npt.NDArray[np.int64], int, int]:
        """For a window with ``left`` and ``right`` frames of padding: the samples each
        trimmed upsampler drops on each side (``[n, 2]``, the graph's input), and the
        samples its audio then lacks at the start and at the end."""
        out = np.zeros((len(self.rates), 2), np.int64)
        lost = [0, 0]
        for side, frames in enumerate((left, right)):
            done, previous_rate = 0, 1  # samples dropped so far, at the rate they were dropped
            for i, (rate, margin) in enumerate(zip(self.rates, self.margins, strict=True)):
                total = max(0, frames * rate - margin)
                carried = done * (rate // previous_rate)
                out[i, side] = max(0, total - carried)
                done, previous_rate = carried + int(out[i, side]), rate
            lost[side] = done * (self.hop // previous_rate)
        return out, lost[0], lost[1]
