"""The plan a voice runs by: each graph's engine and precision, the decoder's window
lengths, the threads; one frozen value, chosen in one place.

Which decoder plan is fastest is a property of the CPU, not of a flag it reports:
on Zen 4 (AVX-512 BF16, no AMX) OpenVINO's bfloat16 decoder costs 4.3 ms per
frame in a 62-frame window and 2.1 in a 286-frame one, while with AMX it is
2.1-2.5 ms at every length but holds ~100-300 MB more per length it has seen;
on AVX2-only CPUs there is no bfloat16 at all. So a plan is chosen from
measurements taken on the machine (:mod:`yomiage.runtime.plan_measure`), kept
per CPU model, voice architecture and library versions
(:mod:`yomiage.runtime.plan_store`), and
:func:`~yomiage.runtime.plan_choice.choose_plan` is the whole rule: the fastest
option whose predicted peak memory fits the budget (the lightest of those it
cannot tell apart from the fastest), never slower than plain ONNX Runtime
float32 on any sentence length. Without measurements (measuring off, or
impossible) :func:`yomiage.runtime.planner.fallback_plan` gives a fixed answer from
the CPU's features.

The encoder stays on ONNX Runtime in float32 in every plan (OpenVINO was no
faster on it: :mod:`yomiage.runtime.placement`); the decoder, 75-85% of the work,
is where the plans differ most. The flow may follow the decoder: where the
decoder runs bfloat16 on OpenVINO, the flow does too if that makes the option
faster and the peak measured with both fits, padded to a few lengths so OpenVINO
keeps little per length (:mod:`yomiage.runtime.flow_lengths`; full-size voice,
Zen 5, 2 threads: 24 ms against 37 for a 141-frame sentence, 54.8 dB SNR on its
output).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from yomiage.runtime.chunking import (
    DEFAULT_FIRST_WINDOW_FRAMES,
    DEFAULT_WINDOW_FRAMES,
    Windowing,
    fixed_windows,
    window_lengths,
    windows,
)
from yomiage.runtime.cpu import THREADS_WORTH
from yomiage.runtime.flow_lengths import flow_bucket
from yomiage.runtime.placement import (
    DECODER_GRAPHS,
    ORT_F32,
    Engine,
    Placement,
    Precision,
    VoicePlacement,
)

# The default budget: peak resident memory of one process with one voice and its BERT.
DEFAULT_MEMORY_BUDGET_MB = 1000
# Sentence lengths (decoder frames, ~11.6 ms each at 44.1 kHz) a plan is judged on: a
# word, a short reply, a typical sentence, a long one, one near the flow's span.
REFERENCE_SENTENCE_FRAMES = (40, 120, 250, 450, 700, 1000)
# A stream's first decoder window, largest first. Its call waits before any audio, and
# it has no frames before it, so it is padded on one side only. Measured on an AVX2-only
# Zen 3 (ONNX Runtime f32, 2 threads): 32 frames (47 padded) 280-320 ms, 16 (31) ~200 ms,
# 8 (23) ~165 ms; on Zen 4 and AMX, bf16, 32 frames take about half of that. A smaller
# first window costs one more call, on the stream's first sentence only.
FIRST_WINDOW_CHOICES = (DEFAULT_FIRST_WINDOW_FRAMES, 16, 8)
# What a 0.3 s first audio leaves the first decoder call: BERT, the encoder and the flow
# of a short sentence took ~260 ms before it on an AVX2-only Zen 3 and ~200 ms on an AMX
# Xeon (ONNX Runtime, 2 threads). With its padding trimmed between stages
# (runtime/stage_trims.py) the 8-frame call takes ~80 ms on that Zen 3, the 16-frame one
# ~120 ms (150 ms, the target before the trims, took the 16 there and started later).
FIRST_CALL_TARGET_MS = 100.0
# A plan that holds more memory must be predicted at least this much faster than a
# lighter one to be taken; closer than that the two are even, and the lighter wins.
# The same decoder measured twice (Zen 3, 2 threads, two measurings minutes apart)
# put its 128- and 256-frame schedules 0.9% apart one way and 2.8% the other, and
# the nearer one once cost +74 MB of peak for no speed that could be told apart.
SPEED_WORTH_MEMORY = 0.03


@dataclass(frozen=True, order=True)
class DecoderChoice:
    """How the decoder runs: engine, precision, the window schedule (the first
    window's frames, doubling up to ``window_frames``) and ``layout``, the channels
    from which its stages run 2-D (:mod:`yomiage.runtime.decoder_layouts`; 0: as
    the bundle's graph has them)."""

    engine: Engine
    precision: Precision
    window_frames: int = DEFAULT_WINDOW_FRAMES
    first_window_frames: int = DEFAULT_FIRST_WINDOW_FRAMES
    layout: int = 0

    @property
    def placement(self) -> Placement:
        return Placement(self.engine, self.precision)

    @property
    def keeps_shapes(self) -> bool:
        """OpenVINO keeps kernels per input length: show it only the schedule's lengths."""
        return self.engine == "openvino"

    def lengths(self, context: int) -> tuple[int, ...]:
        """The padded window lengths this schedule runs the decoder at, smallest first."""
        return window_lengths(self.window_frames, context, self.first_window_frames)

    def key(self) -> str:
        key = f"{self.engine}-{self.precision}-{self.first_window_frames}-{self.window_frames}"
        return f"{key}-2d{self.layout}" if self.layout else key

    def __str__(self) -> str:
        first = min(self.first_window_frames, self.window_frames)
        layout = f", 2-D from {self.layout} channels" if self.layout else ""
        windows = f"windows {first}-{self.window_frames} frames"
        if first == self.window_frames:
            windows = f"windows of {first} frames"
        return f"{self.engine} {self.precision}, {windows}{layout}"


@dataclass(frozen=True)
class EngineTimings:
    """The decoder measured on one engine and precision, in one fresh process: ms per
    call at each padded length, and the resident memory it had added once it had run
    every length up to that one (lengths met in increasing order, as a server meets
    them; OpenVINO keeps each, ONNX Runtime's arena grows to the largest); and
    ``threads_ms``, one full-window call on each thread count measured (empty
    where only one count could run); ``layout``, the decoder graph's as
    :attr:`DecoderChoice.layout` names it; ``balanced_trims``, whether its calls
    were timed with the balanced stage trims a request's windows then get
    (:meth:`~yomiage.runtime.stage_trims.StageTrims.balanced`), which pad every
    window by the whole context."""

    engine: Engine
    precision: Precision
    call_ms: Mapping[int, float]
    memory_mb: Mapping[int, float]
    threads_ms: Mapping[int, float] = field(default_factory=dict)
    layout: int = 0
    balanced_trims: bool = False

    def ms_at(self, length: int) -> float:
        """ms for one call at ``length`` frames (:func:`ms_between`)."""
        return ms_between(self.call_ms, length)

    def memory_up_to(self, length: int) -> float | None:
        """Memory added once every measured length up to ``length`` has run (None when
        ``length`` was not measured)."""
        return self.memory_mb.get(length)


def ms_between(call_ms: Mapping[int, float], length: int) -> float:
    """ms for one call at ``length`` frames: measured, or linear between the measured
    lengths around it (beyond them, at the nearest one's cost per frame)."""
    known = sorted(call_ms)
    if length in call_ms:
        return call_ms[length]
    i = bisect.bisect_left(known, length)
    if i == 0:
        return call_ms[known[0]] * length / known[0]
    if i == len(known):
        return call_ms[known[-1]] * length / known[-1]
    lo, hi = known[i - 1], known[i]
    share = (length - lo) / (hi - lo)
    return call_ms[lo] + share * (call_ms[hi] - call_ms[lo])


@dataclass(frozen=True)
class FlowTimings:
    """The flow measured on one engine and precision, in a fresh process: ms per call
    at a few lengths (padded ones, where the engine keeps shapes); and, for a flow off
    ONNX Runtime, ``peak_mb``: the whole engine's peak with the flow there and the
    decoder in bfloat16 on OpenVINO, per window size of its schedules (measured whole,
    smallest first, as OpenVINO keeps every length: a sum of the parts counted
    OpenVINO itself twice and over-predicted by ~30 MB besides)."""

    placement: Placement
    call_ms: Mapping[int, float]
    peak_mb: Mapping[int, float] = field(default_factory=dict)

    def ms_for(self, frames: int) -> float:
        """ms for a sentence of ``frames`` frames (run at its bucket on OpenVINO)."""
        padded = self.placement.engine == "openvino"
        return ms_between(self.call_ms, flow_bucket(frames) if padded else frames)


@dataclass(frozen=True)
class Measurements:
    """What choosing a plan needs, measured on this machine for one voice architecture:
    the decoder per engine; ``floor_mb``, the peak of everything else (BERT, the
    encoder and flow, their activations on a paragraph, the libraries); and
    ``ort_peak_mb``, the whole peak with the decoder on ONNX Runtime per window size
    (its decoder shares the arena the other graphs use, so it is measured whole);
    ``unavailable``, the engines and precisions tried that could not run here."""

    floor_mb: float
    engines: tuple[EngineTimings, ...]
    context: int  # the decoder's receptive field in frames (each window's padding)
    ort_peak_mb: Mapping[int, float] = field(default_factory=dict)
    unavailable: tuple[tuple[str, str], ...] = ()
    flows: tuple[FlowTimings, ...] = ()

    def flow_on(self, placement: Placement) -> FlowTimings | None:
        return next((f for f in self.flows if f.placement == placement), None)

    def flow_with(self, choice: DecoderChoice) -> FlowTimings | None:
        """Where the flow may run with decoder ``choice``, when not on ONNX Runtime in
        float32: on OpenVINO in bfloat16 where the decoder runs so (its arithmetic is
        then taken already), if the flow was measured there (and on ONNX Runtime, to
        compare with). :func:`~yomiage.runtime.plan_choice.judge` moves it only where
        that is faster and fits."""
        if choice.placement != Placement("openvino", "bf16") or self.flow_on(ORT_F32) is None:
            return None
        return self.flow_on(choice.placement)

    def engine(self, engine: str, precision: str, layout: int = 0) -> EngineTimings | None:
        return next(
            (
                e
                for e in self.engines
                if e.engine == engine and e.precision == precision and e.layout == layout
            ),
            None,
        )

    def covers(self, choices: Iterable[DecoderChoice]) -> bool:
        """Whether every engine and precision of ``choices`` was measured or tried (a
        plan measured under ``auto`` on a CPU without bfloat16 holds no bfloat16 timings
        for an explicit ``bf16`` to be chosen from)."""
        tried = {(e.engine, e.precision) for e in self.engines} | set(self.unavailable)
        return all((c.engine, c.precision) in tried for c in choices)


@dataclass(frozen=True)
class PlanOption:
    """One decoder choice judged: predicted seconds of the flow and the decoder per
    reference sentence, predicted peak memory, and why it was passed over (None:
    eligible)."""

    choice: DecoderChoice
    seconds: tuple[float, ...]
    peak_mb: float
    refused: str | None = None
    flow: Placement = ORT_F32  # where the flow runs with it (Measurements.flow_with)

    @property
    def total_s(self) -> float:
        return sum(self.seconds)

    def __str__(self) -> str:
        return str(self.choice) + (f", flow {self.flow}" if self.flow != ORT_F32 else "")


@dataclass(frozen=True)
class Plan:
    """Where a voice's graphs run and how its decoder is windowed.

    ``basis`` says where the plan came from ("measured on ..." or "fallback: ...");
    ``options`` are the alternatives judged (empty for a fallback), the chosen first;
    ``threads_ms``, the thread counts ``threads`` was chosen from (ms of one decoder
    call each; empty when there was no choice); ``fits_budget``, False where no
    option was predicted to fit ``budget_mb`` and the lightest was taken.
    """

    decoder: DecoderChoice
    budget_mb: int
    basis: str
    threads: int
    encoder: Placement = ORT_F32
    flow: Placement = ORT_F32
    peak_mb: float | None = None
    options: tuple[PlanOption, ...] = field(default=(), compare=False)
    threads_ms: tuple[tuple[int, float], ...] = field(default=(), compare=False)
    fits_budget: bool = True

    def placement(self, precision: str, *, automatic: bool) -> VoicePlacement:
        """The graphs' placement for a bundle (``precision``: the decoder's, fp32/bf16/int8)."""
        return VoicePlacement(
            self.encoder,
            self.flow,
            self.decoder.placement,
            DECODER_GRAPHS[precision],
            precision,
            automatic,
        )

    @property
    def windowing(self) -> Windowing:
        return Windowing(
            window_frames=self.decoder.window_frames,
            first_window_frames=self.decoder.first_window_frames,
        )

    def in_bundle_layout(self) -> Plan:
        """This plan with the decoder's stages as its bundle has them."""
        return replace(self, decoder=replace(self.decoder, layout=0))

    def describe(self) -> str:
        peak = f", ~{self.peak_mb:.0f} MB peak" if self.peak_mb is not None else ""
        flow = f", flow {self.flow}" if self.flow != ORT_F32 else ""
        return (
            f"decoder {self.decoder}{flow}, {self.threads} thread{'s' * (self.threads != 1)}"
            f"{peak} "
            f"(budget {self.budget_mb} MB; {self.basis})"
        )


def decoder_calls(
    choice: DecoderChoice, frames: int, context: int, *, balanced_trims: bool = False
) -> list[int]:
    """The padded lengths of the decoder calls that decode a sentence of ``frames``
    frames under ``choice`` (as :class:`~yomiage.runtime.onnx_voice.BundleVoice`
    makes them when audio streams from the start; ``balanced_trims``: as it makes
    them for a decoder fed those)."""
    first = min(choice.first_window_frames, choice.window_frames)
    if choice.keeps_shapes:
        padding = 2 * context if balanced_trims else 0
        return [
            window.pad_stop - window.pad_start + zeros
            for window, zeros in fixed_windows(
                frames, choice.window_frames, context, first, min_padding=padding
            )
        ]
    return [w.pad_stop - w.pad_start for w in windows(frames, choice.window_frames, context, first)]


def choose_threads(threads_ms: Mapping[int, float], default: int) -> int:
    """The fewest threads within :data:`THREADS_WORTH` of the fastest measured count;
    ``default`` where fewer than two counts were measured."""
    if len(threads_ms) < 2:
        return default
    fastest = min(threads_ms.values())
    return min(t for t, ms in threads_ms.items() if ms <= fastest * (1 + THREADS_WORTH))


def first_call_lengths(context: int) -> tuple[int, ...]:
    """The padded lengths of the first-window choices' calls (padding after only)."""
    return tuple(sorted(f + context for f in FIRST_WINDOW_CHOICES))


def first_window(timings: EngineTimings, context: int) -> int:
    """The largest first window whose call was measured within
    :data:`FIRST_CALL_TARGET_MS`; the smallest where none was; the default where
    those lengths were not measured."""
    measured = [f for f in FIRST_WINDOW_CHOICES if f + context in timings.call_ms]
    if len(measured) < len(FIRST_WINDOW_CHOICES):
        return DEFAULT_FIRST_WINDOW_FRAMES
    within = [f for f in measured if timings.call_ms[f + context] <= FIRST_CALL_TARGET_MS]
    return max(within) if within else min(measured)
