"""Measuring, on this machine, what :func:`~yomiage.runtime.plan_choice.choose_plan` needs.

Each measurement runs in a fresh process (:mod:`yomiage.runtime.plan_worker`),
because memory is what a plan is judged on and a process never gives its
high-water mark back: OpenVINO keeps the kernels of every length it has seen,
ONNX Runtime's arena keeps its largest working set. Where OpenVINO's compiled
graphs are cached, one process first compiles the decoder into the cache, so the
others load it from there, as every process that runs the plan will (one that
compiles it holds ~55 MB more). One process per engine and
precision (and per other layout of the decoder's stages, on ONNX Runtime: see
:mod:`yomiage.runtime.decoder_layouts`) times the decoder alone at each window
length of the schedules
(smallest first, as a server meets them) and records the memory it has added
after each, then one full window at each thread count the plan may choose
(:func:`yomiage.runtime.cpu.thread_choices`). One more runs the whole engine on
a paragraph with the decoder left out, for the floor every plan shares (the
plan's peak is the two added: exact for OpenVINO, which keeps its own memory,
and a little over for ONNX Runtime, whose decoder reuses the arena the other
graphs freed, so its whole peak is measured on the paragraph with the decoder
too), and times the flow. Where a bfloat16 decoder is a candidate, a last one
runs the flow in bfloat16 on OpenVINO beside that decoder, for the flow's time
there and the whole peak of each schedule with both. On a 2-core AVX2-only Zen 3
this takes 160 s (100 s on a Zen 5 with bfloat16), once per CPU model, voice
architecture and engine versions (:mod:`yomiage.runtime.plan_store` keeps it).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from yomiage.runtime.placement import ORT_F32, Placement
from yomiage.runtime.plan import EngineTimings, FlowTimings, Measurements
from yomiage.runtime.plan_schedules import openvino_first_window

log = logging.getLogger(__name__)

# Set in the measuring processes (and by a user: "0") so no plan is measured there.
MEASURE_ENV = "YOMIAGE_PLAN_MEASURE"
CALL_TIMEOUT_S = 600.0


class MeasureError(RuntimeError):
    """A measuring process failed or timed out (the plan then falls back)."""


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
    lengths: Mapping[tuple[str, str], tuple[int, ...]]
    thread_choices: tuple[int, ...]  # counts to time ``threads_length`` at (``threads`` too)
    threads_length: int
    ort_windows: tuple[int, ...]  # ONNX Runtime schedules whose whole peak to measure
    context: int
    compiled_dir: Path | None
    layouts: Mapping[int, Path] = field(default_factory=dict)
    # Engines and precisions to time the flow on besides ONNX Runtime float32, each with
    # the decoder in bfloat16 on OpenVINO in windows of ``openvino_windows`` (each size
    # with its schedule's first window: plan_schedules.openvino_first_window).
    flows: tuple[tuple[str, str], ...] = ()
    openvino_windows: tuple[int, ...] = ()
    # For an engine that keeps every length it meets: its lengths in groups
    # (plan_schedules.schedule_families), each timed in a process of its own so that no group's
    # lengths count in another's memory. None given: all of ``lengths`` in one process.
    families: Mapping[tuple[str, str], tuple[tuple[int, ...], ...]] = field(default_factory=dict)


def measure(job: MeasureJob, progress: Callable[[str], None] = log.warning) -> Measurements:
    """The decoder on each engine and precision of ``job.lengths`` (and in each of
    ``job.layouts``), and the floor, each in a fresh process."""
    ort = ("onnxruntime", "f32")
    runs = [
        (engine, precision, 0, group)
        for (engine, precision), lengths in sorted(job.lengths.items())
        for group in job.families.get((engine, precision)) or (lengths,)
    ]
    runs += [
        (*ort, layout, job.lengths[ort]) for layout in sorted(job.layouts) if ort in job.lengths
    ]
    compiles = sorted(p for e, p in job.lengths if e == "openvino") if job.compiled_dir else []
    flow_groups = _flow_groups(job.openvino_windows)
    steps = len(runs) + 1 + len(job.flows) * len(flow_groups) + bool(compiles)
    step = 0
    if compiles:
        step += 1
        progress(f"compiling the decoder on OpenVINO ({step}/{steps}, once per CPU)")
        try:
            _child({"what": "compile", "precisions": compiles, **_plain(job)})
        except MeasureError as exc:  # each process then compiles it, and counts that
            log.warning("the decoder could not be compiled ahead (%s)", exc)
    measured: dict[tuple[str, str, int], EngineTimings] = {}
    unavailable: list[tuple[str, str]] = []
    for engine, precision, layout, lengths in runs:
        step += 1
        what = f"{engine} {precision}" + (f", 2-D from {layout} channels" if layout else "")
        if (engine, precision) in job.families and not layout:
            what += f", lengths {lengths[0]}-{lengths[-1]}"
        progress(f"measuring the decoder on {what} ({step}/{steps}, once per CPU)")
        if (engine, precision) in unavailable:
            continue
        earlier = measured.get((engine, precision, layout))
        decoder = job.layouts[layout] if layout else job.decoder
        # The thread counts once per engine: a later group's process times its lengths only.
        counts = list(job.thread_choices) if earlier is None else [job.threads]
        try:
            raw = _child({"what": "decoder", "engine": engine, "precision": precision,
                          **_plain(job), "decoder": str(decoder), "thread_choices": counts,
                          "lengths": list(lengths)})  # fmt: skip
        except MeasureError as exc:
            if (engine, precision, layout) == (*ort, 0):
                raise  # the reference every plan is judged against
            if layout or earlier is not None:  # that layout or group is no option; the rest is
                log.warning("%s left out of the plan: %s", what, exc)
                continue
            # An engine that cannot run here (OpenVINO installed but broken, say) is
            # no option; the others still are.
            log.warning("%s %s left out of the plan: %s", engine, precision, exc)
            unavailable.append((engine, precision))
            continue
        timings = EngineTimings(
            engine,  # type: ignore[arg-type]
            precision,  # type: ignore[arg-type]
            _int_keys(raw["call_ms"]),
            _int_keys(raw["memory_mb"]),
            _int_keys(raw.get("threads_ms", {})),
            layout,
            bool(raw.get("balanced_trims", False)),
        )
        if earlier is not None:
            timings = replace(
                earlier,
                call_ms={**earlier.call_ms, **timings.call_ms},
                memory_mb={**earlier.memory_mb, **timings.memory_mb},
            )
        measured[engine, precision, layout] = timings
    step += 1
    progress(f"measuring the memory of the rest of the engine ({step}/{steps})")
    raw = _child({"what": "floor", "ort_windows": list(job.ort_windows), **_plain(job)})
    ort_peaks = _int_keys(raw["ort_peak_mb"])
    flows = [FlowTimings(ORT_F32, _int_keys(raw["flow_ms"]))]
    for engine, precision in job.flows:
        flow = Placement(engine, precision)  # type: ignore[arg-type]
        flow_ms: dict[int, float] = {}
        peaks: dict[int, float] = {}
        for windows in flow_groups:
            step += 1
            progress(f"measuring the flow on {flow}, with the decoder ({step}/{steps})")
            try:
                other = _child({"what": "flow", "flow": [flow.engine, flow.precision],
                                **_plain(job), "windows": list(windows)})  # fmt: skip
            except MeasureError as exc:  # the flow stays on ONNX Runtime
                log.warning("the flow on %s left out of the plan: %s", flow, exc)
                flow_ms = {}
                break
            flow_ms = flow_ms or _int_keys(other["flow_ms"])  # the first group's timings
            peaks.update(_int_keys(other["peak_mb"]))
        if flow_ms:
            flows.append(FlowTimings(flow, flow_ms, peaks))
    return Measurements(float(raw["peak_mb"]), tuple(measured.values()), job.context, ort_peaks,
                        tuple(unavailable), tuple(flows))  # fmt: skip


def _flow_groups(windows: tuple[int, ...]) -> list[tuple[int, ...]]:
    """``windows`` grouped by their schedules' first window, each group smallest first:
    the whole peaks of one group are measured in one process, in that order, as each
    schedule's lengths are the smaller ones' and one more (at least one group)."""
    groups: dict[int, list[int]] = {}
    for window in sorted(windows):
        groups.setdefault(openvino_first_window(window), []).append(window)
    return [tuple(g) for _, g in sorted(groups.items())] or [()]


def _int_keys(values: Mapping[str, Any]) -> dict[int, float]:
    """A JSON object of lengths or window sizes to figures, keyed by int again."""
    return {int(k): float(v) for k, v in values.items()}


def _plain(job: MeasureJob) -> dict[str, Any]:
    return {
        "decoder": str(job.decoder),
        "bundle": str(job.bundle),
        "bert": str(job.bert),
        "tokenizer": str(job.tokenizer) if job.tokenizer else None,
        "bert_precision": job.bert_precision,
        "threads": job.threads,
        "thread_choices": list(job.thread_choices),
        "threads_length": job.threads_length,
        "context": job.context,
        "compiled_dir": str(job.compiled_dir) if job.compiled_dir else None,
    }


def _child(args: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ, **{MEASURE_ENV: "0"})
    command = [sys.executable, "-m", "yomiage.runtime.plan_worker", json.dumps(args)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=CALL_TIMEOUT_S, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise MeasureError(f"measuring {args['what']} took over {CALL_TIMEOUT_S:.0f} s") from exc
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise MeasureError(f"measuring {args['what']} failed: {tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result
