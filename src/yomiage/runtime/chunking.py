"""Cutting a sentence's frames for the flow and the decoder (no torch).

The generator is a stack of convolutions, so each output sample depends on a
bounded number of latent frames around it: its receptive field, derived here
from the hyperparameters. Decoding a window padded by that many frames on each
side and cropping the padding gives the same samples as decoding the whole
utterance, in bounded memory, and lets the first audio leave early.

The flow is different: its attention spans the whole sentence, so its cost
grows with the square of the length (measured on a full-size voice, ONNX
Runtime, 2 threads: 0.9 ms per frame up to 1,024 frames, 3.8 ms at 2,048,
5.6 ms and +1.2 GB at 2,873). A sentence longer than :data:`FLOW_SPAN_FRAMES`
goes through the flow in spans cut at clause boundaries (:func:`flow_spans`);
shorter ones, nearly all, go whole, exactly as SBV2 reads them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yomiage.sbv2.config import ModelHyperparameters
from yomiage.text.symbols import SYMBOL_TO_ID

# Decoder windows: the first is small so audio starts soon, each next one twice
# the one before, up to DEFAULT_WINDOW_FRAMES; each is padded by the receptive
# field (15 frames) on both sides, recomputed. A longer window costs less per useful
# frame but OpenVINO keeps memory for every length it meets; past 256 frames (286
# padded) the time per frame hardly falls while the memory kept keeps growing
# (measured: benchmarks/history/issue-13.md). A plan measured on the machine may
# choose another (:mod:`yomiage.runtime.plan.schedules`).
DEFAULT_WINDOW_FRAMES = 256
DEFAULT_FIRST_WINDOW_FRAMES = 32
# About 10 s of speech at 44.1 kHz / 512 hop; the flow's cost is still linear here. Not
# 1,024: on OpenVINO (bfloat16) a longer flow takes other kernels with another copy of
# some weights, held for good once one such sentence has run (measured:
# benchmarks/history/issue-32.md, eleventh pass).
FLOW_SPAN_FRAMES = 896
# The first span of a sentence that is cut anyway: 0.2 s of flow before its first audio.
FIRST_FLOW_SPAN_FRAMES = 256
_CLAUSE_END_IDS = np.array([SYMBOL_TO_ID[s] for s in (",", ".", "!", "?", "…")], np.int64)


def clause_ends(phone_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Which tokens end a clause (punctuation): where :func:`flow_spans` prefers to cut."""
    return np.isin(np.asarray(phone_ids, np.int64), _CLAUSE_END_IDS)


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


def upsampler_margins(hp: ModelHyperparameters) -> tuple[int, ...]:
    """Samples on each side of a region, at the input of each upsampler (the
    transposed convolutions, first to last), that can influence its final samples.

    Walks the generator backwards: the reach in samples at each stage's rate
    grows by the resblocks' reach, and a transposed conv of stride r and
    kernel k maps a reach of n output samples to ceil((n + k) / r) inputs.
    Rounded up, so each is an upper bound; tests check exactness of the output.
    """
    reach = (_CONV_POST_KERNEL - 1) // 2
    block = _resblock_reach(hp)
    margins = []
    for rate, kernel in reversed(
        list(zip(hp.upsample_rates, hp.upsample_kernel_sizes, strict=True))
    ):
        reach += block
        reach = math.ceil((reach + kernel) / rate)
        margins.append(reach)
    return tuple(reversed(margins))


def receptive_field_frames(hp: ModelHyperparameters) -> int:
    """Latent frames on each side that can influence a frame's samples (an upper bound)."""
    return upsampler_margins(hp)[0] + (_CONV_PRE_KERNEL - 1) // 2


@dataclass(frozen=True)
class Window:
    """Decode frames ``[start, stop)`` of the padded span ``[pad_start, pad_stop)``."""

    start: int
    stop: int
    pad_start: int
    pad_stop: int

    def crop(self, hop: int, lost: int = 0) -> slice:
        """Samples of the padded span's audio that belong to ``[start, stop)``; ``lost``:
        samples the decoder left out of the span's start (its stage trims)."""
        first = (self.start - self.pad_start) * hop - lost
        return slice(first, first + (self.stop - self.start) * hop)


def windows(n_frames: int, size: int, context: int, first: int | None = None) -> Iterator[Window]:
    """Cover ``n_frames`` with windows, each padded by ``context`` frames where it can be.

    Without ``first`` every window has ``size`` frames. With it the first has
    ``first`` frames (streaming starts sooner) and each next one twice the one
    before, up to ``size``: the padding recomputed per window then costs a
    shrinking share (2 x 15 frames are 23% of a 128-frame window, 6% of 512).
    """
    if size < 1 or context < 0 or (first is not None and first < 1):
        raise ValueError("window size must be positive and context non-negative")
    start = 0
    step = min(first or size, size)
    while start < n_frames:
        stop = min(n_frames, start + step)
        yield Window(start, stop, max(0, start - context), min(n_frames, stop + context))
        start, step = stop, min(size, 2 * step)


def window_lengths(size: int, context: int, first: int | None = None) -> tuple[int, ...]:
    """The padded lengths of a schedule's full windows, smallest first: ``first``, twice
    that, ... up to ``size``, each plus ``context`` frames on both sides."""
    lengths, step = [], min(first or size, size)
    while True:
        lengths.append(step + 2 * context)
        if step >= size:
            return tuple(lengths)
        step = min(size, 2 * step)


def fixed_windows(
    n_frames: int,
    size: int,
    context: int,
    first: int | None = None,
    start: int | None = None,
    min_padding: int = 0,
) -> Iterator[tuple[Window, int]]:
    """:func:`windows` whose padded spans all have one of :func:`window_lengths`, with the
    number of zero frames to append to reach it (0 but for short sentences).

    For OpenVINO, which specializes its kernels to each input shape it sees and
    keeps them (measured: 40-45 MB and a slower first run per new length on the
    full-size decoder; openvinotoolkit/openvino#20633 reports the same growth,
    unaffected by ``CPU_RUNTIME_CACHE_CAPACITY``), so a server must only ever
    show it a few shapes. A span grows with more real frames around the window,
    which changes nothing (the receptive field is finite); a window that cannot
    grow to a length within the sentence is halved. ``start``: the first
    window's frames when it is not ``first`` (one of the schedule's steps).
    ``min_padding``: frames every span holds beyond its window (zeros
    appended count), at most ``2 * context``: what balanced stage trims need
    (:meth:`~yomiage.runtime.stage_trims.StageTrims.balanced`).

    A sentence that fits in the first window's length is decoded in one call,
    padded with zero frames to the smallest length that holds it with
    ``min_padding`` more: one call instead of several smaller ones that
    recompute their context. Only its last ``context`` frames differ from
    decoding it whole, and by little on a trained decoder, to which a zero latent
    is silence (measured with ``benchmarks/decoder_precision.py``:
    benchmarks/history/issue-13.md, second pass). The same holds for a
    sentence's last window where ``min_padding`` leaves it no length within the
    sentence.
    """
    if not 0 <= min_padding <= 2 * context:
        raise ValueError("min_padding must be between 0 and twice the context")
    lengths = window_lengths(size, context, first)
    smallest_step = min(first or size, size)
    begin, step = 0, min(size, max(smallest_step, start or smallest_step))
    # A sentence no longer than the first length goes whole even where its padding
    # takes the next one: one call is faster than two, and its audio still comes soon.
    limit = max(lengths[0], step + 2 * context) if n_frames > lengths[0] else lengths[-1]
    holds = [n for n in lengths if n_frames + min_padding <= n <= limit]
    if holds:
        yield Window(0, n_frames, 0, n_frames), holds[0] - n_frames
        return
    while begin < n_frames:
        while True:
            stop = min(n_frames, begin + step)
            lo, hi = max(0, begin - context), min(n_frames, stop + context)
            fitting = [n for n in lengths if n >= hi - lo and n - (stop - begin) >= min_padding]
            length = next((n for n in fitting if n <= n_frames), None)
            if length is not None or step == smallest_step:
                break
            step = max(smallest_step, step // 2)
        if length is None:  # a sentence shorter than any length that holds this window
            yield Window(begin, stop, 0, n_frames), fitting[0] - n_frames
        else:
            hi = min(n_frames, max(hi, lo + length))
            yield Window(begin, stop, hi - length, hi), 0
        begin, step = stop, min(size, 2 * step)


@dataclass(frozen=True)
class Windowing:
    """Frames per decoder window (the first is smaller, the next ones grow up to
    ``window_frames``) and per flow span."""

    window_frames: int = DEFAULT_WINDOW_FRAMES
    first_window_frames: int = DEFAULT_FIRST_WINDOW_FRAMES
    flow_frames: int = FLOW_SPAN_FRAMES
    first_flow_frames: int = FIRST_FLOW_SPAN_FRAMES

    def __post_init__(self) -> None:
        if min(self.window_frames, self.first_window_frames, self.flow_frames,
               self.first_flow_frames) < 1:  # fmt: skip
            raise ValueError("decoder windows and flow spans need at least one frame")


def flow_spans(
    durations: npt.NDArray[np.int64],
    breaks: npt.NDArray[np.bool_],
    max_frames: int,
    first_frames: int | None = None,
) -> list[tuple[int, int]]:
    """Frame ranges ``[start, stop)`` the flow reads one at a time, none over ``max_frames``.

    ``durations`` are frames per token and ``breaks`` marks the tokens after
    which a clause ends (punctuation). A sentence that fits is one span. A
    longer one is cut after the last clause end that fits, else after the
    last whole token that fits, else (a single token longer than the span)
    inside it; no cut comes in the first quarter of a span. A sentence that
    is cut anyway has its first span at most ``first_frames`` long, so its
    audio starts as soon as a short sentence's would.
    """
    if max_frames < 1 or (first_frames is not None and first_frames < 1):
        raise ValueError("a flow span needs at least one frame")
    ends = np.cumsum(np.asarray(durations, np.int64))
    total = int(ends[-1]) if len(ends) else 0
    if total <= max_frames:
        return [(0, total)]
    spans: list[tuple[int, int]] = []
    start = 0
    size = min(max_frames, first_frames or max_frames)
    while total - start > size:
        limit = start + size
        fits = (ends > start + size // 4) & (ends <= limit)
        clause_ends = ends[fits & breaks]
        token_ends = ends[fits]
        if len(clause_ends):
            cut = int(clause_ends[-1])
        elif len(token_ends):
            cut = int(token_ends[-1])
        else:
            cut = limit
        spans.append((start, cut))
        start, size = cut, max_frames
    spans.append((start, total))
    return spans
