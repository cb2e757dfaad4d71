"""Measuring, on this machine, what :func:`~yomiage.runtime.plan.choose.choose_plan` needs.

Each measurement runs in a fresh process (:mod:`yomiage.plan_child.measure`),
because memory is what a plan is judged on and a process never gives its high-water
mark back: OpenVINO keeps the kernels of every length it has seen, ONNX Runtime's
arena keeps its largest working set. Where OpenVINO's compiled graphs are cached,
one process first compiles the decoder into the cache, so the others load it from
there, as every process that runs the plan will (one that compiles it holds more:
benchmarks/history/issue-32.md, thirteenth pass). One process per engine and
precision (and per other layout of the decoder's stages, on ONNX Runtime: see
:mod:`yomiage.runtime.decoder_layouts`) times the decoder alone at each window
length of the schedules (smallest first, as a server meets them) and records the
memory it has added after each, then one full window at each thread count the plan
may choose (:func:`yomiage.runtime.engines.cpu.thread_choices`). One more runs the
whole engine on a paragraph with the decoder left out, for the floor every plan
shares (the plan's peak is the two added: exact for OpenVINO, which keeps its own
memory, and a little over for ONNX Runtime, whose decoder reuses the arena the other
graphs freed, so its whole peak is measured on the paragraph with the decoder too),
and times the flow. Where a bfloat16 decoder is a candidate, a last one runs the
flow in bfloat16 on OpenVINO beside that decoder, for the flow's time there and the
whole peak of each schedule with both. On a 2-core machine this takes a few minutes
(``docs/performance.md``, "The measuring"), once per CPU model, voice architecture
and engine versions (:mod:`yomiage.runtime.plan.store` keeps it, each process's
figures as it ends: :mod:`yomiage.runtime.plan.steps`). Each process dies with the
one that started it (:mod:`yomiage.lifeline`): one outlived ``yomiage serve`` by
minutes, holding ~1 GB and both cores.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from yomiage.lifeline import child_environment
from yomiage.runtime.engines.placement import OPENVINO_BF16, ORT_FP32, Placement
from yomiage.runtime.plan.disturbance import DISTURBED_CORES, CpuClock
from yomiage.runtime.plan.job import MeasureJob
from yomiage.runtime.plan.measurements import EngineTimings, FlowTimings, Measurements
from yomiage.runtime.plan.request import MEASURE_ENV, PlanRequest
from yomiage.runtime.plan.schedules import openvino_first_window
from yomiage.runtime.plan.steps import (
    MeasureDisturbed,
    MeasuredSteps,
    MeasureError,
    MeasureInterrupted,
    step_name,
)
from yomiage.runtime.plan.value import DecoderChoice, Plan

# Windows at whose padded lengths (where measured) another layout is timed beside the
# bundle's own: a 32-frame window and a full 128-frame one.
PAIRED_WINDOWS = (32, 128)

__all__ = ["CALL_TIMEOUT_S", "MeasureError", "MeasureJob", "MeasuredSteps",
           "measure"]  # fmt: skip

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 600.0
# Times a measuring process disturbed by other work is run again, a pause between,
# before the measuring gives up for now (nothing of it kept; the next call resumes).
DISTURBED_TRIES = 3
DISTURBED_PAUSE_S = 10.0
# The key of a measuring process's JSON line that says why it cannot measure here, for
# good (yomiage.plan_child.measure prints it for a MeasureError of its own).
REFUSED = "refused"


@dataclass(frozen=True)
class _Step:
    """One measuring process: its name in the kept steps, its arguments, what the
    progress line says, and where its figures go."""

    name: str
    args: dict[str, Any]
    what: str
    placement: Placement = ORT_FP32
    layout: int = 0
    first: bool = True  # the first group of its engine, precision and layout
    windows: tuple[int, ...] = ()


def _plan_steps(job: MeasureJob) -> tuple[list[_Step], _Step, list[list[_Step]]]:
    """The decoder's steps, the floor's, and the flow's groups per placement off ONNX
    Runtime, in the order they run."""
    runs = [
        (placement, 0, group)
        for placement, lengths in sorted(job.lengths.items())
        for group in job.families.get(placement) or (lengths,)
    ]
    runs += [(ORT_FP32, layout, job.lengths[ORT_FP32])
             for layout in sorted(job.layouts) if ORT_FP32 in job.lengths]  # fmt: skip
    decoders, seen = [], set()
    for placement, layout, lengths in runs:
        engine, precision = placement.engine, placement.precision
        first = (placement, layout) not in seen
        seen.add((placement, layout))
        # The thread counts once per engine: a later group's process times its lengths only.
        counts = list(job.thread_choices) if first else [job.threads]
        what = f"{placement}" + (f", 2-D from {layout} channels" if layout else "")
        if placement in job.families and not layout:
            what += f", lengths {lengths[0]}-{lengths[-1]}"
        decoder = job.layouts[layout] if layout else job.decoder
        args = {"what": "decoder", "engine": engine, "precision": precision, **_plain(job),
                "decoder": str(decoder), "thread_choices": counts,
                "lengths": list(lengths)}  # fmt: skip
        if layout:  # timed against the bundle's own in the same process: see _paired
            paired = [w + 2 * job.context for w in PAIRED_WINDOWS]
            args |= {"paired_with": str(job.decoder),
                     "paired_lengths": [n for n in paired if n in lengths]}  # fmt: skip
        name = step_name("decoder", engine, precision, layout, lengths, counts)
        decoders.append(_Step(name, args, what, placement, layout, first))
    floor = _Step(
        step_name("floor", job.ort_windows),
        {"what": "floor", "ort_windows": list(job.ort_windows), **_plain(job)},
        "the memory of the rest of the engine",
    )
    flows = []
    for placement in job.flows:
        group = []
        for windows in _flow_groups(job.openvino_windows):
            args = {"what": "flow", "flow": [placement.engine, placement.precision],
                    **_plain(job), "windows": list(windows)}  # fmt: skip
            what = f"the flow on {placement}, with the decoder"
            name = step_name("flow", placement.engine, placement.precision, windows)
            group.append(_Step(name, args, what, placement, windows=windows))
        flows.append(group)
    return decoders, floor, flows


def measure(
    job: MeasureJob,
    steps: MeasuredSteps | None = None,
    progress: Callable[[str], None] = log.warning,
    stop: threading.Event | None = None,
) -> Measurements:
    """The decoder on each engine and precision of ``job.lengths`` (and in each of
    ``job.layouts``), and the floor, each in a fresh process. ``steps``: the outcomes
    kept from earlier starts (a step with one is not run again) and where each new
    one is kept as it ends (:mod:`yomiage.runtime.plan.steps`; None: nothing kept).
    MeasureError where ONNX Runtime float32 or the floor, which every plan needs,
    could not be measured; MeasureDisturbed where other work kept disturbing a process
    (:mod:`yomiage.runtime.plan.disturbance`), MeasureInterrupted once ``stop`` is set:
    neither counts as a step's failure, and the steps kept so far stay kept."""
    steps = MeasuredSteps() if steps is None else steps
    decoders, floor, flow_groups = _plan_steps(job)
    every = [*decoders, floor, *(s for group in flow_groups for s in group)]
    todo = [s for s in every if steps.result(s.name) is None and steps.lasting(s.name) is None]
    # The precisions to compile ahead, where the engine's compiled graphs are cached.
    compiles = [p.precision for p in sorted(job.lengths) if p.kind.caches_compiled]
    compiles = compiles if job.compiled_dir else []
    compile_now = bool(compiles) and any(s.placement.kind.caches_compiled for s in todo)
    total, number = len(todo) + compile_now, 0
    if len(todo) < len(every):
        progress(f"{len(every) - len(todo)} of the {len(every)} measuring steps are kept from "
                 f"an earlier start; {len(todo)} to go")  # fmt: skip

    def say(message: str, *, once: bool = True) -> None:
        nonlocal number
        number += 1
        text = f"{message} ({number}/{total}{', once per CPU' if once else ''})"
        progress(text)
        steps.began(text)

    def outcome(step: _Step) -> tuple[dict[str, Any] | None, str, bool]:
        """The step's figures (kept, or measured now), else why not and whether for good."""
        kept = steps.result(step.name)
        if kept is not None:
            return kept, "", False
        lasting = steps.lasting(step.name)
        if lasting is not None:
            return None, f"{lasting} (at an earlier start)", True
        if step.args["what"] == "decoder":
            say(f"measuring the decoder on {step.what}")
        else:
            say(f"measuring {step.what}", once=False)
        try:
            raw = undisturbed(step.args)
        except (MeasureInterrupted, MeasureDisturbed):
            raise  # not the step's failure: measured again at the next call
        except MeasureError as exc:
            return None, str(exc), steps.failed(step.name, exc)
        try:
            return steps.finished(step.name, raw), "", False
        except MeasureError as exc:  # figures that make no sense: counted as failed
            return (
                None,
                f"measuring {step.args['what']}: {exc}",
                steps.lasting(step.name) is not None,
            )

    def undisturbed(args: dict[str, Any]) -> dict[str, Any]:
        """The step's figures from a process no other work disturbed, tried again
        after a pause where one was."""
        for attempt in range(1, DISTURBED_TRIES + 1):
            try:
                return _child(args) if stop is None else _child(args, stop=stop)
            except MeasureDisturbed as exc:
                if attempt == DISTURBED_TRIES:
                    raise
                progress(f"{exc}; measured again in {DISTURBED_PAUSE_S:.0f} s")
                if stop is not None and stop.wait(DISTURBED_PAUSE_S):
                    raise MeasureInterrupted("measuring stopped") from exc
                if stop is None:
                    time.sleep(DISTURBED_PAUSE_S)
        raise AssertionError("unreachable")

    if compile_now:
        say("compiling the decoder on OpenVINO")
        try:
            _child({"what": "compile", "precisions": compiles, **_plain(job)})
        except MeasureError as exc:  # each process then compiles it, and counts that
            log.warning("the decoder could not be compiled ahead (%s)", exc)
    measured: dict[tuple[Placement, int], EngineTimings] = {}
    unavailable: list[Placement] = []
    for step in decoders:
        placement, layout = step.placement, step.layout
        earlier = measured.get((placement, layout))
        if placement in unavailable or (not step.first and earlier is None):
            continue  # no option here, or its first group failed this time
        raw, why, lasting = outcome(step)
        if raw is None:
            if (placement, layout) == (ORT_FP32, 0):
                raise MeasureError(why, lasting=lasting)  # the reference every plan is judged by
            if layout or not step.first:  # that layout or group is no option; the rest is
                log.warning("%s left out of the plan: %s", step.what, why)
                continue
            # An engine that cannot run here (OpenVINO installed but broken, say) is
            # no option; the others still are. One that failed for a cause that may pass
            # is measured again at the next start.
            log.warning("%s left out of the plan: %s", placement, why)
            if lasting:
                unavailable.append(placement)
            continue
        timings = EngineTimings(
            placement.engine,
            placement.precision,
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
        if layout:
            timings = _paired(timings, measured.get((placement, 0)), raw.get("paired_ratio"))
        measured[placement, layout] = timings
    raw, why, lasting = outcome(floor)
    if raw is None:
        raise MeasureError(why, lasting=lasting)
    ort_peaks = _int_keys(raw["ort_peak_mb"])
    flows = [FlowTimings(ORT_FP32, _int_keys(raw["flow_ms"]))]
    for group in flow_groups:
        flow = group[0].placement
        flow_ms: dict[int, float] = {}
        peaks: dict[int, float] = {}
        held: dict[int, float] = {}
        for step in group:
            other, why, _ = outcome(step)
            if other is None:  # the flow stays on ONNX Runtime
                log.warning("the flow on %s left out of the plan: %s", flow, why)
                flow_ms = {}
                break
            flow_ms = flow_ms or _int_keys(other["flow_ms"])  # the first group's timings
            held = held or _int_keys(other.get("held_mb", {}))
            peaks.update(_int_keys(other["peak_mb"]))
        if flow_ms:
            flows.append(FlowTimings(flow, flow_ms, peaks, held))
    return Measurements(float(raw["peak_mb"]), tuple(measured.values()), job.context, ort_peaks,
                        tuple(unavailable), tuple(flows))  # fmt: skip


def _paired(
    timings: EngineTimings, bundles: EngineTimings | None, ratio: float | None
) -> EngineTimings:
    """Another layout's call times as the bundle's own layout's times ``ratio``, the
    two timed call for call in one process (:mod:`yomiage.plan_child.measure`).

    The layouts differ by some 5-20%, about what separates two measuring processes on
    a shared machine: the 2-D decoder, 7-10% faster than the 1-D one in alternating
    calls on the Xeon with AMX, was timed 18% slower in a process of its own there and
    shipped so (benchmarks/RESULTS.md, Xeon, fifth pass). Timed side by side both meet
    the same machine. Its own times stay where the bundle's layout was not timed or
    the ratio is missing."""
    if bundles is None or not ratio or ratio <= 0:
        return timings
    call_ms = {n: round(bundles.call_ms[n] * ratio, 2) if n in bundles.call_ms else ms
               for n, ms in timings.call_ms.items()}  # fmt: skip
    return replace(timings, call_ms=call_ms)


def flow_plan(flow: Placement, threads: int) -> Plan:
    """The plan a measuring process runs a voice by to time the flow on ``flow`` beside
    the decoder in bfloat16 on OpenVINO, as a plan that moves the flow there runs
    them (:mod:`yomiage.plan_child.measure`; its windows are set per schedule)."""
    request = PlanRequest("bf16", measure_plan=False)
    return Plan(DecoderChoice.at(OPENVINO_BF16), request, f"measuring the flow on {flow}",
                threads, flow=flow)  # fmt: skip


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
        "bert_sliced": str(job.bert_sliced) if job.bert_sliced else None,
        "threads": job.threads,
        "thread_choices": list(job.thread_choices),
        "threads_length": job.threads_length,
        "context": job.context,
        "compiled_dir": str(job.compiled_dir) if job.compiled_dir else None,
    }


def _child(args: dict[str, Any], stop: threading.Event | None = None) -> dict[str, Any]:
    """Run one measuring process; its JSON line. MeasureError where it could not measure:
    ``lasting`` where the process said why (the engine cannot run the graph here), not
    where it was killed, crashed or ran out of time (that may pass); MeasureDisturbed
    where other work ran beside it; MeasureInterrupted where ``stop`` was set (the
    process is ended at once)."""
    env = dict(child_environment(), **{MEASURE_ENV: "0"})  # it dies with this process
    command = [sys.executable, "-m", "yomiage.plan_child.measure", json.dumps(args)]
    what = args["what"]
    if stop is not None and stop.is_set():
        raise MeasureInterrupted(f"measuring {what} stopped")
    before = CpuClock.now()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)  # fmt: skip
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while True:
        try:
            stdout, stderr = process.communicate(timeout=0.25)
            break
        except subprocess.TimeoutExpired:
            ended = "stopped" if stop is not None and stop.is_set() else None
            if ended is None and time.monotonic() > deadline:
                ended = f"took over {CALL_TIMEOUT_S:.0f} s"
            if ended is not None:
                process.kill()
                process.communicate()
                if ended == "stopped":
                    raise MeasureInterrupted(f"measuring {what} stopped") from None
                raise MeasureError(f"measuring {what} {ended}") from None
    others = CpuClock.now().other_cores_since(before)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        how = f" ({describe_status(process.returncode)})" if process.returncode else ""
        raise MeasureError(f"measuring {what} failed{how}: {tail}")
    if what != "compile" and others is not None and others > DISTURBED_CORES:
        raise MeasureDisturbed(f"other work kept {others:.2f} cores busy while {what} was measured")
    result: dict[str, Any] = json.loads(lines[-1])
    if REFUSED in result:
        raise MeasureError(f"measuring {args['what']}: {result[REFUSED]}", lasting=True)
    return result


def describe_status(code: int) -> str:
    """A measuring process's exit status in words."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
