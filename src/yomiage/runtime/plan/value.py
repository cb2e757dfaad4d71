"""The plan's value: where each graph of a voice runs, how its decoder is windowed,
the threads, and what it was chosen from; frozen, made by the planner alone
(:mod:`yomiage.runtime.plan.planner`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from yomiage.runtime.bundle import DECODER_GRAPHS, VoiceManifest
from yomiage.runtime.chunking import (
    DEFAULT_FIRST_WINDOW_FRAMES,
    DEFAULT_WINDOW_FRAMES,
    Windowing,
    window_lengths,
)
from yomiage.runtime.engines.placement import ORT_FP32, Engine, Placement, Precision
from yomiage.runtime.plan.request import PlanRequest


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

    @classmethod
    def at(
        cls,
        placement: Placement,
        window_frames: int = DEFAULT_WINDOW_FRAMES,
        first_window_frames: int = DEFAULT_FIRST_WINDOW_FRAMES,
        layout: int = 0,
    ) -> DecoderChoice:
        """The decoder on ``placement`` with this schedule and layout."""
        return cls(placement.engine, placement.precision, window_frames, first_window_frames,
                   layout)  # fmt: skip

    @property
    def placement(self) -> Placement:
        return Placement(self.engine, self.precision)

    @property
    def keeps_shapes(self) -> bool:
        """Whether its engine keeps kernels per input length (it is then shown only the
        schedule's lengths)."""
        return self.placement.keeps_shapes

    def lengths(self, context: int) -> tuple[int, ...]:
        """The padded window lengths this schedule runs the decoder at, smallest first."""
        return window_lengths(self.window_frames, context, self.first_window_frames)

    def __str__(self) -> str:
        first = min(self.first_window_frames, self.window_frames)
        layout = f", 2-D from {self.layout} channels" if self.layout else ""
        windows = f"windows {first}-{self.window_frames} frames"
        if first == self.window_frames:
            windows = f"windows of {first} frames"
        return f"{self.engine} {self.precision}, {windows}{layout}"


@dataclass(frozen=True)
class PlanOption:
    """One decoder choice judged: predicted seconds of the flow and the decoder per
    reference sentence, predicted peak memory, and why it was passed over (None:
    eligible)."""

    choice: DecoderChoice
    seconds: tuple[float, ...]
    peak_mb: float
    refused: str | None = None
    flow: Placement = ORT_FP32  # where the flow runs with it (Measurements.flow_with)
    flow_floor: int | None = None  # the shortest span it pads the flow to (flow_lengths)

    @property
    def total_s(self) -> float:
        return sum(self.seconds)

    def __str__(self) -> str:
        return str(self.choice) + _flow_words(self.flow, self.flow_floor)


@dataclass(frozen=True)
class Plan:
    """How a voice runs, whole: where each graph runs, the decoder's graph file and
    windows, the threads; and what it was chosen from. Made by the planner alone
    (:class:`~yomiage.runtime.plan.planner.Planner`); a voice takes it as it is.

    ``request`` is what was asked (precision, budget, measuring, windows), echoed
    back; ``basis`` says where the plan came from ("measured on ..." or "fallback:
    ..."); ``options`` are the alternatives judged (empty for a fallback), the chosen
    first; ``threads_ms``, the thread counts ``threads`` was chosen from (ms of one
    decoder call each; empty when there was no choice); ``fits_budget``, False where
    no option was predicted to fit the budget and the lightest was taken;
    ``decoder_graph``, a decoder made in the plan's layout of its stages
    (:mod:`yomiage.runtime.decoder_layouts`), None where the bundle's own graph for
    the decoder's precision runs (:meth:`decoder_file`); ``flow_graph``, the flow made
    with bfloat16 weights where the plan runs it so (:mod:`yomiage.runtime.light_flows`);
    ``flow_floor``, the shortest length a flow run padded pads its spans to, where the
    plan measured that a lower one holds more (None: the first bucket;
    :func:`~yomiage.runtime.flow_lengths.flow_floor`).
    """

    decoder: DecoderChoice
    request: PlanRequest
    basis: str
    threads: int
    encoder: Placement = ORT_FP32
    flow: Placement = ORT_FP32
    peak_mb: float | None = None
    options: tuple[PlanOption, ...] = field(default=(), compare=False)
    threads_ms: tuple[tuple[int, float], ...] = field(default=(), compare=False)
    fits_budget: bool = True
    decoder_graph: Path | None = None
    flow_graph: Path | None = None
    flow_floor: int | None = None

    @property
    def windowing(self) -> Windowing:
        """The decoder's windows and the flow's spans: the request's, where it names
        them, else the chosen schedule's."""
        if self.request.windowing is not None:
            return self.request.windowing
        return Windowing(self.decoder.window_frames, self.decoder.first_window_frames)

    def decoder_file(self, bundle: VoiceManifest) -> Path:
        """The graph file the decoder of ``bundle`` loads under this plan."""
        if self.decoder_graph is not None:
            return self.decoder_graph
        return bundle.file(DECODER_GRAPHS[self.decoder.precision])

    def flow_file(self, bundle: VoiceManifest) -> Path:
        """The graph file the flow of ``bundle`` loads under this plan."""
        return self.flow_graph if self.flow_graph is not None else bundle.file("flow.onnx")

    def runs_otherwise_than(self, other: Plan) -> bool:
        """Whether a voice by this plan runs otherwise than by ``other``: another engine,
        precision, windows, layout, flow or thread count (not only another basis)."""

        def running(p: Plan) -> tuple[object, ...]:
            return (p.decoder, p.encoder, p.flow, p.flow_floor, p.threads, p.request.windowing)

        return running(self) != running(other)

    def describe(self) -> str:
        peak = f", ~{self.peak_mb:.0f} MB peak" if self.peak_mb is not None else ""
        flow = _flow_words(self.flow, self.flow_floor)
        return (
            f"decoder {self.decoder}{flow}, {self.threads} thread{'s' * (self.threads != 1)}"
            f"{peak} "
            f"(budget {self.request.memory_budget_mb} MB; {self.basis})"
        )


def _flow_words(flow: Placement, floor: int | None) -> str:
    """How a plan or an option names where its flow runs: nothing for the default."""
    if flow == ORT_FP32:
        return ""
    return f", flow {flow}" + (f" from {floor} frames" if floor else "")
