"""What choosing a plan needs measured on the machine: the decoder's time and memory per
window length on each engine, the flow's, the peak of everything else
(:mod:`yomiage.runtime.plan.measure` takes them, :mod:`yomiage.runtime.plan.store`
keeps them)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from yomiage.runtime.engines.placement import (
    OPENVINO_BF16,
    ORT_FP32,
    Engine,
    Placement,
    Precision,
)
from yomiage.runtime.flow_lengths import flow_bucket, flow_floor
from yomiage.runtime.plan.value import DecoderChoice


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

    @property
    def placement(self) -> Placement:
        return Placement(self.engine, self.precision)

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
    OpenVINO itself twice and over-predicted by ~30 MB besides), every bucket of the
    flow run; ``held_mb``, for an engine that keeps shapes, what the process held after
    running the flow at each bucket from the longest down, from which its floor is
    chosen (:func:`~yomiage.runtime.flow_lengths.flow_floor`)."""

    placement: Placement
    call_ms: Mapping[int, float]
    peak_mb: Mapping[int, float] = field(default_factory=dict)
    held_mb: Mapping[int, float] = field(default_factory=dict)

    @cached_property
    def _floor(self) -> tuple[int | None, float]:
        return flow_floor(self.held_mb)

    @property
    def floor(self) -> int | None:
        """The smallest length a span is padded to (None: the first bucket)."""
        return self._floor[0]

    @property
    def floor_saving_mb(self) -> float:
        """What the floor saves against the peaks measured with every bucket run."""
        return self._floor[1]

    def ms_for(self, frames: int) -> float:
        """ms for a sentence of ``frames`` frames (run at its bucket on OpenVINO)."""
        if not self.placement.keeps_shapes:
            return ms_between(self.call_ms, frames)
        return ms_between(self.call_ms, flow_bucket(frames, self.floor))


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
    unavailable: tuple[Placement, ...] = ()
    flows: tuple[FlowTimings, ...] = ()

    def flow_on(self, placement: Placement) -> FlowTimings | None:
        return next((f for f in self.flows if f.placement == placement), None)

    def flow_with(self, choice: DecoderChoice) -> FlowTimings | None:
        """Where the flow may run with decoder ``choice``, when not on ONNX Runtime in
        float32: on OpenVINO in bfloat16 where the decoder runs so (its arithmetic is
        then taken already), if the flow was measured there (and on ONNX Runtime, to
        compare with). :func:`~yomiage.runtime.plan.choose.judge` moves it only where
        that is faster and fits."""
        if choice.placement != OPENVINO_BF16 or self.flow_on(ORT_FP32) is None:
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
        tried = {e.placement for e in self.engines} | set(self.unavailable)
        return all(c.placement in tried for c in choices)


def measurements_json(measured: Measurements) -> dict[str, Any]:
    """``measured`` as a plan file (and a shipped prior) hold it."""
    return {
        "floor_mb": measured.floor_mb,
        "ort_peak_mb": {str(w): mb for w, mb in sorted(measured.ort_peak_mb.items())},
        "context": measured.context,
        "unavailable": [[p.engine, p.precision] for p in measured.unavailable],
        "engines": [
            {
                "engine": e.engine,
                "precision": e.precision,
                "call_ms": {str(n): ms for n, ms in sorted(e.call_ms.items())},
                "memory_mb": {str(n): mb for n, mb in sorted(e.memory_mb.items())},
                "threads_ms": {str(t): ms for t, ms in sorted(e.threads_ms.items())},
                "layout": e.layout,
                "balanced_trims": e.balanced_trims,
            }
            for e in measured.engines
        ],
        "flows": [
            {
                "engine": f.placement.engine,
                "precision": f.placement.precision,
                "call_ms": {str(n): ms for n, ms in sorted(f.call_ms.items())},
                "peak_mb": {str(w): mb for w, mb in sorted(f.peak_mb.items())},
                "held_mb": {str(n): mb for n, mb in sorted(f.held_mb.items())},
            }
            for f in measured.flows
        ],
    }


def measurements_from_json(data: Mapping[str, Any]) -> Measurements:
    """The measurements a plan file (or a shipped prior) holds (ValueError, KeyError or
    TypeError for what is not: an engine or a precision the table has no row for, say)."""
    engines = []
    for e in data["engines"]:
        placement = Placement.parse(e["engine"], e["precision"])  # ValueError: unknown
        engines.append(
            EngineTimings(
                placement.engine,
                placement.precision,
                {int(n): float(ms) for n, ms in e["call_ms"].items()},
                {int(n): float(mb) for n, mb in e["memory_mb"].items()},
                {int(t): float(ms) for t, ms in e.get("threads_ms", {}).items()},
                int(e.get("layout", 0)),
                bool(e.get("balanced_trims", False)),
            )
        )
    ort_peaks = {int(w): float(mb) for w, mb in data.get("ort_peak_mb", {}).items()}
    unavailable = tuple(Placement.parse(str(e), str(p)) for e, p in data.get("unavailable", []))
    flows = tuple(
        FlowTimings(
            Placement.parse(f["engine"], f["precision"]),
            {int(n): float(ms) for n, ms in f["call_ms"].items()},
            {int(w): float(mb) for w, mb in f["peak_mb"].items()},
            {int(n): float(mb) for n, mb in f.get("held_mb", {}).items()},
        )
        for f in data.get("flows", [])
    )
    return Measurements(float(data["floor_mb"]), tuple(engines), int(data["context"]), ort_peaks,
                        unavailable, flows)  # fmt: skip
