"""What one voice's measuring asks for (:class:`MeasureJob`), made from the choices a
plan may take (:func:`measure_job`): the lengths to time on each engine, the schedules
whose whole peak to measure, the decoder's other layouts, where the flow may move."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from yomiage.runtime.bundle import VoiceManifest
from yomiage.runtime.chunking import DEFAULT_WINDOW_FRAMES
from yomiage.runtime.decoder_layouts import DecoderLayouts, LayoutError
from yomiage.runtime.derived import layout_key
from yomiage.runtime.engines.placement import OPENVINO_BF16, ORT_FP32, Placement
from yomiage.runtime.plan.choose import REFERENCE, first_call_lengths
from yomiage.runtime.plan.schedules import schedule_families
from yomiage.runtime.plan.value import DecoderChoice

if TYPE_CHECKING:
    from yomiage.runtime.engines.sessions import Sessions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BertGraph:
    """The BERT every voice of the backend shares: part of what the floor measures."""

    folder: Path
    graph: Path
    tokenizer: Path | None
    precision: str
    # Where its graph with sliced position tables is kept (runtime/sliced_berts.py): the
    # measuring processes run the BERT the voices run.
    sliced: Path | None = None


@dataclass(frozen=True)
class MeasureJob:
    """What to measure for one voice: its decoder graph, bundle and BERT, and the
    lengths to time on each engine and precision (the union of its candidate
    schedules' lengths); ``layouts``, the decoder in other layouts of its stages
    (:mod:`yomiage.runtime.decoder_layouts`: layout -> graph) to time on ONNX
    Runtime float32 as well."""

    decoder: Path
    bundle: Path
    bert: Path
    tokenizer: Path | None
    bert_precision: str
    threads: int
    lengths: Mapping[Placement, tuple[int, ...]]
    thread_choices: tuple[int, ...]  # counts to time ``threads_length`` at (``threads`` too)
    threads_length: int
    ort_windows: tuple[int, ...]  # ONNX Runtime schedules whose whole peak to measure
    context: int
    compiled_dir: Path | None
    layouts: Mapping[int, Path] = field(default_factory=dict)
    bert_sliced: Path | None = None  # BertGraph.sliced
    # Where to time the flow besides ONNX Runtime float32, each with the decoder in
    # bfloat16 on OpenVINO in windows of ``openvino_windows`` (each size with its
    # schedule's first window: schedules.openvino_first_window).
    flows: tuple[Placement, ...] = ()
    openvino_windows: tuple[int, ...] = ()
    # For an engine that keeps every length it meets: its lengths in groups
    # (schedules.schedule_families), each timed in a process of its own so that no group's
    # lengths count in another's memory. None given: all of ``lengths`` in one process.
    families: Mapping[Placement, tuple[tuple[int, ...], ...]] = field(default_factory=dict)


def measure_job(
    manifest: VoiceManifest,
    allowed: tuple[DecoderChoice, ...],
    sessions: Sessions,
    bert: BertGraph,
    layouts: DecoderLayouts | None,
    compiled_dir: Path | None,
) -> MeasureJob:
    """The job that measures what choosing among ``allowed`` needs for a bundle of
    ``manifest`` (decoders in other layouts made in ``layouts`` first; one that cannot
    be made is left out, with a warning)."""
    context = manifest.receptive_field_frames
    # The whole peak is measured for the ONNX Runtime schedules (its decoder shares
    # the arena the other graphs use).
    ort_windows = {c.window_frames for c in (*allowed, REFERENCE) if c.placement == ORT_FP32}
    lengths: dict[Placement, set[int]] = {}
    for c in (*allowed, REFERENCE):
        lengths.setdefault(c.placement, set()).update(c.lengths(context))
        if not c.keeps_shapes:  # its first window is chosen by its own call's time
            lengths[c.placement].update(first_call_lengths(context))
    families = {}
    for placement in lengths:
        kept = [c for c in allowed if c.keeps_shapes and c.placement == placement]
        groups = schedule_families(kept, context)
        if len(groups) > 1:  # lengths that interleave: a process per group
            families[placement] = tuple(groups.values())
    made: dict[int, Path] = {}
    decoder, key = manifest.file("decoder.onnx"), layout_key(manifest.files)
    if layouts is not None and key is not None:
        for layout in sorted({c.layout for c in allowed if c.layout}):
            try:
                graph = layouts.graph(decoder, key, layout)
            except LayoutError as exc:
                log.warning("%s; that layout is left out of the plan", exc)
                continue
            if graph != decoder:  # the bundle's own layout is timed as the bundle's
                made[layout] = graph
    bf16_windows = {c.window_frames for c in allowed if c.placement == OPENVINO_BF16}
    return MeasureJob(
        decoder=manifest.file("decoder.onnx"),
        bundle=manifest.path,
        bert=bert.folder,
        tokenizer=bert.tokenizer,
        bert_precision=bert.precision,
        bert_sliced=bert.sliced,
        threads=sessions.threads,
        lengths={k: tuple(sorted(v)) for k, v in lengths.items()},
        families=families,
        thread_choices=sessions.thread_choices,
        threads_length=DEFAULT_WINDOW_FRAMES + 2 * context,  # a full window, padded
        ort_windows=tuple(sorted(ort_windows)),
        context=context,
        compiled_dir=compiled_dir,
        layouts=made,
        # The flow may follow a bfloat16 decoder onto OpenVINO (Measurements.flow_with).
        flows=(OPENVINO_BF16,) if bf16_windows else (),
        openvino_windows=tuple(sorted(bf16_windows)),
    )
