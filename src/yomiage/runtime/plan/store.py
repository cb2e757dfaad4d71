"""Measurements for choosing a plan, kept in the cache as FFTW keeps its wisdom.

A measurement holds for one CPU model (with the instruction sets that decide the
kernels), one voice architecture (the sizes of its graphs and its BERT: every
full-size SBV2 JP-Extra voice shares one), one thread count (and the other
counts the plan may choose among) and one set of engine versions;
:class:`PlanKey` is all of that, and its digest names the file
(``<cache>/plans/<digest>.json``). A different CPU, voice size, thread count or
a new ONNX Runtime or OpenVINO is a different key, so it is measured anew; the
file holds the measurements, not the choice, so a new memory budget re-chooses
without measuring again. Beside them it keeps each measuring step's outcome as the
step ends (:mod:`yomiage.runtime.plan.steps`), so a measuring that was stopped
resumes, and one whose step failed for a cause that may pass measures that step
again. A file that cannot be read, or whose figures make no sense
(:mod:`yomiage.runtime.plan.checks`), is measured over, with a warning naming it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from yomiage.atomic import write_atomic
from yomiage.json_file import read_json_object
from yomiage.runtime.bundle import graph_bytes
from yomiage.runtime.engines.cpu import cpu_flags
from yomiage.runtime.plan.checks import measurements_problem
from yomiage.runtime.plan.measurements import (
    Measurements,
    measurements_from_json,
    measurements_json,
)

log = logging.getLogger(__name__)

# Bumped when what is measured, or how, changes: older files are then ignored.
# 2: first-window calls timed; the whole peak includes a stream. 3: the decoder timed at
# each thread count the plan may choose. 4: OpenVINO's memory includes loading OpenVINO
# itself (a plan on ONNX Runtime no longer loads it at all). 5: a decoder that takes
# trims is timed with the trims a request's windows get (runtime/stage_trims.py).
# 6: decoders converted since run their wide stages 2-D (export/decoder_layout.py), which
# changes both their time and their memory per window. 7: the decoder is timed in other
# layouts of its stages too (runtime/decoder_layouts.py). 8: OpenVINO's decoder is timed
# with balanced stage trims, as requests now feed it (runtime/stage_trims.py). 9: the flow
# is timed on each engine it may run on, and OpenVINO's whole peak measured with it
# (runtime/flow_lengths.py). 10: OpenVINO's decoder is compiled into the cache before it
# is measured, so its memory is that of a voice loading it from there
# (yomiage/plan_child/measure.py). (Each measuring step's outcome kept beside the
# measurements, plan/steps.py, changed neither: a file from before holds no steps and is
# read as it was.) 11: float32 is spelt "fp32", as the flag and the rest of the plan spell
# it; nothing measured changed, so a file of format 10 is translated once
# (:func:`_from_format_10`), not measured again.
FORMAT_VERSION = 11
# Format 10's word for float32, the one word format 11 spells otherwise.
_FORMAT_10_FLOAT32 = {"f32": "fp32"}
# The instruction sets that decide which kernels the engines pick.
PLAN_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8",
          "asimd", "bf16", "i8mm", "sve")  # fmt: skip


@dataclass(frozen=True)
class PlanKey:
    """What a measurement depends on."""

    cpu: str
    cpu_flags: tuple[str, ...]
    threads: int
    thread_choices: tuple[int, ...]
    architecture: tuple[tuple[str, int], ...]  # graph -> bytes of weights, and the shapes
    engines: tuple[tuple[str, str], ...]  # engine -> version
    format: int = FORMAT_VERSION

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PlanKey:
        """The key a plan file (or a shipped prior) names (KeyError, TypeError or
        ValueError for what is not one)."""
        return cls(
            cpu=str(raw["cpu"]),
            cpu_flags=tuple(str(f) for f in raw["cpu_flags"]),
            threads=int(raw["threads"]),
            thread_choices=tuple(int(t) for t in raw["thread_choices"]),
            architecture=tuple((str(n), int(v)) for n, v in raw["architecture"]),
            engines=tuple((str(n), str(v)) for n, v in raw["engines"]),
            format=int(raw["format"]),
        )


def cpu_identity() -> tuple[str, tuple[str, ...]]:
    """The CPU's model name and the instruction sets of :data:`PLAN_FLAGS` it has (Linux's
    ``/proc/cpuinfo``; elsewhere the platform's processor string and no flags)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or platform.machine(), ()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first CPU is enough
            continue
        fields.setdefault(name.strip(), value.strip())
    parts = [fields.get(k, "") for k in ("model name", "cpu family", "model", "stepping")]
    model = " / ".join(p for p in parts if p) or platform.machine()
    flags = cpu_flags() or frozenset()
    return model, tuple(f for f in PLAN_FLAGS if f in flags)


def voice_architecture(
    graphs: Mapping[str, Path], *, context: int, inter_channels: int, hop_length: int
) -> tuple[tuple[str, int], ...]:
    """A voice's architecture as the sizes of its graphs (weights included) and the
    decoder's shape numbers: equal for every voice of one size, whatever its weights."""
    sizes = [(name, graph_bytes(path)) for name, path in sorted(graphs.items())]
    return (*sizes, ("context", context), ("inter_channels", inter_channels), ("hop", hop_length))


class PlanStore:
    """The measurements kept under ``root`` (``<cache>/plans``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: PlanKey) -> Path:
        return self.root / f"{key.digest()}.json"

    def lock_path(self, key: PlanKey) -> Path:
        """The lock a process measuring ``key`` holds (:mod:`yomiage.runtime.plan.lock`)."""
        return self.root / f"{key.digest()}.lock"

    def note_path(self, key: PlanKey) -> Path:
        """Where that process says which step it is at, for those that wait on it."""
        return self.root / f"{key.digest()}.measuring"

    def load(self, key: PlanKey, *, quiet: bool = False) -> tuple[Measurements, str] | None:
        """The measurements kept for ``key`` and when they were taken, or None: none
        kept, only some of their steps (a measuring stopped, or a step that failed
        for a cause that may pass: measured again), or a file that cannot be read or
        whose figures make no sense (it is measured over, with a warning unless
        ``quiet``)."""
        path = self.path(key)
        data = self._read(key, quiet=quiet)
        if data is None or "measurements" not in data:
            return None
        retry = data.get("retry")
        if retry:
            log.info("measuring again what failed at an earlier start (%s), kept in %s",
                     "; ".join(str(r) for r in retry), path)  # fmt: skip
            return None
        warn = log.info if quiet else log.warning
        try:
            measured = measurements_from_json(data["measurements"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            warn("ignoring the plan measurements in %s (%s); measuring again", path, exc)
            return None
        context = dict(key.architecture).get("context")
        problem = measurements_problem(
            measured, context=context, thread_counts=(key.threads, *key.thread_choices)
        )
        if problem:
            warn("ignoring the plan measurements in %s: %s; measuring again", path, problem)
            return None
        return measured, str(data.get("measured_at", ""))

    def steps(self, key: PlanKey) -> dict[str, Any]:
        """The measuring steps' outcomes kept for ``key`` (empty: none)."""
        data = self._read(key, quiet=True)
        steps = data.get("steps") if data is not None else None
        return steps if isinstance(steps, dict) else {}

    def save(
        self,
        key: PlanKey,
        measured: Measurements,
        measured_at: str,
        steps: Mapping[str, Any] | None = None,
        retry: Sequence[str] = (),
    ) -> OSError | None:
        """Keep ``measured`` for ``key`` (atomically), with the outcomes of the steps it
        was measured in (:mod:`yomiage.runtime.plan.steps`) and those to measure again
        at the next start; the error where the cache cannot be written (nothing is
        kept then: the next start measures again)."""
        data = {
            "key": _plain(asdict(key)),
            "measured_at": measured_at,
            "measurements": measurements_json(measured),
            "steps": dict(steps if steps is not None else self.steps(key)),
            "retry": list(retry),
        }
        try:
            self._write(key, data)
        except OSError as exc:
            return exc
        return None

    def save_steps(self, key: PlanKey, steps: Mapping[str, Any]) -> None:
        """Keep the steps' outcomes for ``key`` as they are now (what else the file holds
        stays); a cache that cannot be written keeps nothing (the caller was told so
        by :meth:`unwritable`)."""
        data = self._read(key, quiet=True) or {"key": _plain(asdict(key))}
        data["steps"] = dict(steps)
        try:
            self._write(key, data)
        except OSError as exc:
            log.debug("cannot keep the measuring steps in %s: %s", self.root, exc)

    def unwritable(self) -> OSError | None:
        """Why nothing can be kept here (None: it can be), found by writing a file."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".probe.", dir=self.root)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            return exc
        return None

    def _read(self, key: PlanKey, *, quiet: bool) -> dict[str, Any] | None:
        """The file for ``key`` as JSON, or None: none, another key's (a digest collision,
        a file edited by hand) or one that cannot be read (logged unless ``quiet``)."""
        path = self.path(key)
        try:
            data = read_json_object(path)
        except FileNotFoundError:
            return self._translated(key, quiet=quiet)
        except (OSError, ValueError) as exc:  # JsonFileError: damaged, nested too deep, ...
            if not quiet:
                log.warning("ignoring the plan measurements in %s (%s); measuring again",
                            path, exc)  # fmt: skip
            return None
        return data if data.get("key") == _plain(asdict(key)) else None

    def _translated(self, key: PlanKey, *, quiet: bool) -> dict[str, Any] | None:
        """The file of format 10 for ``key`` (the same key in every other part) in
        format 11, written back as that and the old one removed; None where there is
        none. Where the new one cannot be written, the old stays and is translated
        again at the next read."""
        if key.format != FORMAT_VERSION:
            return None
        old = replace(key, format=10)
        path = self.path(old)
        try:
            data = read_json_object(path)
        except (OSError, ValueError):  # none (the usual case), or one that cannot be read
            return None
        if data.get("key") != _plain(asdict(old)):
            return None
        try:
            data = _from_format_10(data, key)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            warn = log.info if quiet else log.warning
            warn("ignoring the plan measurements in %s (%s); measuring again", path, exc)
            return None
        try:
            self._write(key, data)
        except OSError as exc:
            log.debug("cannot write %s in the new format: %s", path, exc)
            return data
        path.unlink(missing_ok=True)
        log.info("plan measurements in %s rewritten in format %d as %s", path, FORMAT_VERSION,
                 self.path(key))  # fmt: skip
        return data

    def _write(self, key: PlanKey, data: Mapping[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path(key), json.dumps(data, indent=1, ensure_ascii=False))


def _from_format_10(data: Mapping[str, Any], key: PlanKey) -> dict[str, Any]:
    """A plan file of format 10 as format 11 writes it for ``key``: each precision, in
    the measurements and in the names of the measuring steps kept, spelt anew."""

    def word(text: str) -> str:
        return _FORMAT_10_FLOAT32.get(text, text)

    def name(step: str) -> str:  # steps are named by words (plan/steps.py: step_name)
        return " ".join(word(w) for w in step.split(" "))

    out = {**data, "key": _plain(asdict(key))}
    if "measurements" in data:
        measurements = dict(data["measurements"])
        for part in ("engines", "flows"):
            measurements[part] = [{**e, "precision": word(e["precision"])}
                                  for e in measurements.get(part, [])]  # fmt: skip
        unavailable = measurements.get("unavailable", [])
        measurements["unavailable"] = [
            [engine, word(precision)] for engine, precision in unavailable
        ]
        out["measurements"] = measurements
    if isinstance(data.get("steps"), dict):
        out["steps"] = {name(str(n)): record for n, record in data["steps"].items()}
    if isinstance(data.get("retry"), list):
        out["retry"] = [name(str(n)) for n in data["retry"]]
    return out


def _plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists), to compare a key with a file's."""
    return json.loads(json.dumps(value))
