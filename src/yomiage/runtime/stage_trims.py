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
are the same (the dropped ones lie outside every kept sample's reach) and the
work saved is largest on the small windows that start a stream (measured:
benchmarks/history/issue-32.md, fifth pass).

OpenVINO keeps kernels and buffers for every set of shapes it meets, so each new
amount trimmed at a length would cost it memory; it is fed
:meth:`StageTrims.balanced` trims: the same totals at every stage for every window
it decodes, however that window's padding falls on its two sides, so each input
length keeps one set of shapes while its later stages still skip most of the
padding (measured: benchmarks/history/issue-32.md, tenth pass).
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

    def balanced(
        self, left: int, right: int, context: int
    ) -> tuple[npt.NDArray[np.int64], int, int] | None:
        """Trims for a window with ``left`` and ``right`` frames of padding whose totals,
        stage by stage, are those of a window padded by ``context`` frames on each side,
        however they are split between the sides; None where the window's padding
        cannot give that much (less than ``2 * context`` frames in all, or nearly all
        of it on one side short of its margins). Same return as :meth:`amounts`.

        Every window of one input length then meets the decoder's stages at the same
        sizes, which is what an engine that keeps state per shape needs."""
        target = self._cumulative(context)
        most_left, most_right = self._cumulative(left), self._cumulative(right)
        out = np.zeros((len(self.rates), 2), np.int64)
        done_left = done_right = 0  # cumulative samples dropped so far, at the last rate
        previous_rate = 1
        for i, rate in enumerate(self.rates):
            step = rate // previous_rate
            carried_left, carried_right = done_left * step, done_right * step
            total = 2 * target[i]
            # As little on the left as the right can make up for, and never less than
            # is already dropped there.
            left_now = max(carried_left, total - most_right[i])
            if left_now > min(most_left[i], total - carried_right):
                return None
            right_now = total - left_now
            out[i] = (left_now - carried_left, right_now - carried_right)
            done_left, done_right, previous_rate = left_now, right_now, rate
        scale = self.hop // previous_rate
        return out, done_left * scale, done_right * scale

    def _cumulative(self, frames: int) -> list[int]:
        """The most samples each trimmed upsampler's input may have lost in all on a side
        with ``frames`` frames of padding, at that upsampler's rate (what :meth:`amounts`
        drops there, counted from the start)."""
        done, previous_rate, out = 0, 1, []
        for rate, margin in zip(self.rates, self.margins, strict=True):
            done = max(done * (rate // previous_rate), frames * rate - margin, 0)
            out.append(done)
            previous_rate = rate
        return out
