"""Whether kept plan measurements make sense, before a plan is chosen from them.

A plan file is read back as the measurements it holds, and those decide what a
voice runs on and how much memory it is said to need: one whose memory figures
were zero made the plan "~1 MB peak", and the memory budget meant nothing. So
each measuring step's figures (:func:`step_problem`) and the measurements put
together from them (:func:`measurements_problem`) are checked for sense: times
finite and positive, memory positive and within what one process can hold,
thread counts among those measured for. Figures that fail are measured again
(``runtime/plan/planner.py`` says so at WARNING, naming the file).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from yomiage.runtime.decoder_layouts import LAYOUT_CHOICES
from yomiage.runtime.plan.measurements import Measurements

# Less than Python with numpy and ONNX Runtime holds before any graph: a smaller floor
# (the peak of a whole process) was not measured.
MIN_PROCESS_MB = 20.0
# A TiB: far over what one voice's process holds on any machine.
MAX_MB = float(1 << 20)
# An hour for one decoder or flow call: far over the slowest CPU's longest window.
MAX_CALL_MS = 3_600_000.0
# A layout timed against the bundle's own runs the same arithmetic: under a fifth or
# over five times the other's time is a broken measurement, not a layout.
MIN_RATIO = 0.2


def measurements_problem(
    measured: Measurements, *, context: int | None, thread_counts: Iterable[int]
) -> str | None:
    """What makes ``measured`` unusable (None: nothing): ``context``, the decoder's
    receptive field the measurements must be for (None: any); ``thread_counts``, the
    counts a decoder may have been timed at."""
    counts = set(thread_counts)
    problem = _mb(measured.floor_mb, "the floor", MIN_PROCESS_MB)
    if problem:
        return problem
    if context is not None and measured.context != context:
        return f"measured for a context of {measured.context} frames, not {context}"
    seen = set()
    for e in measured.engines:
        what = f"{e.engine} {e.precision}" + (f" (2-D from {e.layout})" if e.layout else "")
        if (e.engine, e.precision, e.layout) in seen:
            return f"{what} is there twice"
        seen.add((e.engine, e.precision, e.layout))
        if e.layout not in (0, *LAYOUT_CHOICES):
            return f"{what}: no layout of the decoder is {e.layout}"
        if not e.call_ms or set(e.memory_mb) - set(e.call_ms):
            return f"{what}: memory measured at lengths that were not timed"
        if set(e.threads_ms) - counts:
            return f"{what}: timed at {sorted(e.threads_ms)} threads, not among {sorted(counts)}"
        problem = (
            _figures(e.call_ms, f"{what}'s calls", _ms)
            or _figures(e.memory_mb, f"{what}'s memory", _added_mb)
            or _figures(e.threads_ms, f"{what}'s thread counts", _ms)
        )
        if problem:
            return problem
    problem = _figures(measured.ort_peak_mb, "ONNX Runtime's whole peak", _peak_mb)
    for f in measured.flows:
        problem = (
            problem
            or _figures(f.call_ms, f"the flow on {f.placement}", _ms)
            or _figures(f.peak_mb, f"the whole peak with the flow on {f.placement}", _peak_mb)
            or _figures(f.held_mb, f"what was held with the flow on {f.placement}", _peak_mb)
        )
    return problem


def step_problem(result: Mapping[str, Any]) -> str | None:
    """What makes one measuring process's ``result`` (its JSON line, as
    :mod:`yomiage.runtime.plan.measure` keeps it) unusable; None: nothing."""
    checks = {
        "call_ms": _ms,
        "threads_ms": _ms,
        "flow_ms": _ms,
        "memory_mb": _added_mb,
        "ort_peak_mb": _peak_mb,
        "held_mb": _peak_mb,  # a whole process's resident memory, per flow length
    }
    for name, value in result.items():
        if name == "peak_mb":  # the floor's one figure, or a flow's peak per window size
            problem = (
                _figures(value, name, _peak_mb)
                if isinstance(value, Mapping)
                else _mb(value, name, MIN_PROCESS_MB)
            )
        elif name == "paired_ratio":  # another layout's time over the bundle's own
            problem = None if value is None else _ratio(value, name)
        elif name in checks:
            problem = _figures(value, name, checks[name])
        else:
            continue
        if problem:
            return problem
    if "call_ms" in result and not result["call_ms"]:
        return "no call was timed"
    return None


def _figures(values: Any, what: str, check: Any) -> str | None:
    """The first problem of a mapping of lengths, window sizes or thread counts (whole
    numbers from 1, as JSON keys or ints) to figures, each checked by ``check``."""
    if not isinstance(values, Mapping):
        return f"{what} is not a table of figures"
    for key, value in values.items():
        try:
            number = int(key)
        except (TypeError, ValueError):
            return f"{what}: {key!r} is not a length or a count"
        if number < 1:
            return f"{what}: {number} is not a length or a count"
        problem = check(value, f"{what} at {number}")
        if problem:
            return str(problem)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ms(value: Any, what: str) -> str | None:
    ms = _number(value)
    if ms is None or not 0 < ms <= MAX_CALL_MS:
        return f"{what} took {value!r} ms"
    return None


def _mb(value: Any, what: str, least: float) -> str | None:
    mb = _number(value)
    if mb is None or not least <= mb <= MAX_MB:
        return f"{what} is {value!r} MB"
    return None


def _added_mb(value: Any, what: str) -> str | None:
    """Memory a decoder added to its process: more than nothing (loading a graph and
    running it adds its weights and buffers), less than :data:`MAX_MB`."""
    mb = _number(value)
    if mb is None or not 0 < mb <= MAX_MB:
        return f"{what} is {value!r} MB"
    return None


def _ratio(value: Any, what: str) -> str | None:
    """One layout's time over another's for the same arithmetic: a few times either way
    at most."""
    ratio = _number(value)
    if ratio is None or not MIN_RATIO <= ratio <= 1 / MIN_RATIO:
        return f"{what} is {value!r}"
    return None


def _peak_mb(value: Any, what: str) -> str | None:
    return _mb(value, what, MIN_PROCESS_MB)
