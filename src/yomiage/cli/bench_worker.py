"""One configuration of ``yomiage bench``, measured in a process of its own.

Load time and peak memory only mean something in a fresh process: a second
engine in the same one finds the libraries imported, the files in the page
cache of this process's allocator and the high-water mark already set by the
first. So ``yomiage bench`` starts ``python -m yomiage.cli.bench_worker`` once
per configuration, writes it a pickled :class:`BenchJob` on stdin, and reads
one JSON event per line on stdout (``loaded``, ``measured`` per text, then
``done``, or ``error`` with a one-line message; ``log`` whenever yomiage warns,
such as each step of measuring a plan, which takes minutes the first time).
Anything else a library prints on stdout is not JSON and is ignored; stderr is
the parent's to keep for a crash.

Only the public API is used: ``EngineSpec.build()`` (``TTS(...).load().prepare()``),
``Speaker.generate`` and ``Speaker.stream``.
"""

from __future__ import annotations

import json
import logging
import pickle
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yomiage.engine_spec import EngineSpec
from yomiage.errors import YomiageError
from yomiage.runtime.engines.placement import ORT_FP32
from yomiage.runtime.plan.choose import REFERENCE_SENTENCE_FRAMES

if TYPE_CHECKING:
    from yomiage.options import SynthesisOptions
    from yomiage.speaker import Speaker

SEED = 0  # every run reads the same audio, so runs differ only in time
# The loggers of the plan's modules (yomiage.runtime.plan.planner, .measure, ...): a
# measurement begins with their first warning and ends with their last record, the
# planner's "plan for ..." once it has chosen.
PLAN_LOGGERS = "yomiage.runtime.plan"
_EMIT_LOCK = threading.Lock()  # a measuring thread may log while the main one emits


@dataclass(frozen=True)
class BenchJob:
    """What one worker measures: the engine, the ``(name, text)`` pairs to read, and how
    many timed runs of each after one warm-up (``texts`` empty: load only, which is how
    the parent prepares the voice once before measuring: downloads, conversion, the
    disk cache)."""

    spec: EngineSpec
    texts: tuple[tuple[str, str], ...]
    repeat: int


def measure(job: BenchJob) -> None:
    """Load the engine, then time each text: ``generate`` for the speed, ``stream`` up to
    its first chunk for the first audio (medians of ``job.repeat`` runs, each after one
    warm-up of both, since first calls pay for allocations and, on OpenVINO, compiling
    each window length)."""
    started = time.perf_counter()
    plan_log = PlanLog()
    logger = logging.getLogger("yomiage")
    level = logger.level
    logger.addHandler(plan_log)
    logger.setLevel(logging.INFO)  # the planner's "plan for ..." ends a measurement
    try:
        tts = job.spec.build()
    finally:
        logger.removeHandler(plan_log)
        logger.setLevel(level)
    total_s = time.perf_counter() - started
    with tts:
        [speaker] = tts.speakers.values()
        measure_s = plan_log.measure_s
        _emit(event="loaded", load_s=total_s - measure_s, plan_measure_s=measure_s,
              runtime=speaker.runtime, **plan_event(speaker))  # fmt: skip
        options = speaker.options(seed=SEED)
        for name, text in job.texts:
            speaker.generate(text, options)
            _first_audio(speaker, text, options)
            walls, audio_s = [], 0.0
            for _ in range(job.repeat):
                began = time.perf_counter()
                audio_s = speaker.generate(text, options).duration
                walls.append(time.perf_counter() - began)
            firsts = [_first_audio(speaker, text, options) for _ in range(job.repeat)]
            wall_s = statistics.median(walls)
            _emit(
                event="measured",
                text=name,
                audio_s=audio_s,
                wall_s=wall_s,
                speed=audio_s / max(wall_s, 1e-9),
                first_audio_s=statistics.median(firsts),
            )
    _emit(event="done", peak_mb=peak_memory_mb())


def plan_event(speaker: Speaker) -> dict[str, Any]:
    """The voice's plan and the alternatives it was chosen from, as plain data."""
    plan = speaker.plan
    if plan is None:
        return {}
    options = [
        {"decoder": str(o), "predicted_decode_s": round(o.total_s, 3),
         "peak_mb": round(o.peak_mb), "refused": o.refused}
        for o in plan.options
    ]  # fmt: skip
    threads = [[count, ms] for count, ms in plan.threads_ms]
    flow = f", flow {plan.flow}" if plan.flow != ORT_FP32 else ""
    return {"plan": plan.describe(), "plan_decoder": f"{plan.decoder}{flow}",
            "plan_peak_mb": plan.peak_mb, "plan_options": options, "plan_threads": threads,
            "memory_budget_mb": plan.request.memory_budget_mb,
            "plan_reference_frames": list(REFERENCE_SENTENCE_FRAMES)}  # fmt: skip


class PlanLog(logging.Handler):
    """Passes yomiage's warnings to the parent as ``log`` events as they happen (each
    step of measuring a plan, a graph an engine refused), and times the plan's
    measurement from the records of :data:`PLAN_LOGGERS`, so the parent can show the
    steps and keep their minutes out of the load time."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self._began: float | None = None
        self._last = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        now = time.perf_counter()
        if record.name.startswith(PLAN_LOGGERS):
            if self._began is None and record.levelno >= logging.WARNING:
                self._began = now  # measuring is the only thing the planner warns before
            self._last = now
        if record.levelno >= logging.WARNING:
            _emit(event="log", level=record.levelname.lower(), message=record.getMessage())

    @property
    def measure_s(self) -> float:
        """Seconds from the plan's first warning to its last record; 0 if it warned of
        nothing (a plan kept from before, or none measured)."""
        return 0.0 if self._began is None else self._last - self._began


def _first_audio(speaker: Speaker, text: str, options: SynthesisOptions) -> float:
    """Seconds from the call to the first chunk of a stream (then the stream is closed:
    a listener's wait, not the whole text's)."""
    began = time.perf_counter()
    chunks = speaker.stream(text, options)
    try:
        next(chunks)
        return time.perf_counter() - began
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def peak_memory_mb() -> float | None:
    """This process's peak resident memory in MB (10**6 bytes): VmHWM on Linux, else the
    rusage high-water mark (KB on Linux and BSD, bytes on macOS); None where neither exists."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6


def _emit(**event: Any) -> None:
    with _EMIT_LOCK:
        print(json.dumps(event, ensure_ascii=False), flush=True)


def main() -> int:
    job = pickle.load(sys.stdin.buffer)
    if not isinstance(job, BenchJob):
        raise TypeError(f"expected a BenchJob on stdin, not {type(job).__name__}")
    try:
        measure(job)
    except (YomiageError, ValueError, OSError, ImportError) as exc:
        _emit(event="error", message=str(exc))
        return 1
    return 0


if __name__ == "__main__":
    # Run as the module's real name, so the pickled BenchJob is this module's class.
    from yomiage.cli import bench_worker

    sys.exit(bench_worker.main())
