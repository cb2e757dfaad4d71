"""Measurements for choosing a plan, kept in the cache as FFTW keeps its wisdom.

A measurement holds for one CPU model (with the instruction sets that decide the
kernels), one voice architecture (the sizes of its graphs and its BERT: every
full-size SBV2 JP-Extra voice shares one), one thread count (and the other
counts the plan may choose among) and one set of engine versions;
:class:`PlanKey` is all of that, and its digest names the file
(``<cache>/plans/<digest>.json``). A different CPU, voice size, thread count or
a new ONNX Runtime or OpenVINO is a different key, so it is measured anew; the
file holds the measurements, not the choice, so a new memory budget re-chooses
without measuring again. A file that cannot be read is measured over.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yomiage.atomic import write_atomic
from yomiage.runtime.cpu import cpu_flags
from yomiage.runtime.placement import Engine, Placement, Precision, graph_bytes
from yomiage.runtime.plan import EngineTimings, FlowTimings, Measurements

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
# is measured, so its memory is that of a voice loading it from there (plan_worker.py).
FORMAT_VERSION = 10
# The instruction sets that decide which kernels the engines pick.
_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8",
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


def cpu_identity() -> tuple[str, tuple[str, ...]]:
    """The CPU's model name and the instruction sets of :data:`_FLAGS` it has (Linux's
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
    return model, tuple(f for f in _FLAGS if f in flags)


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

    def load(self, key: PlanKey) -> tuple[Measurements, str] | None:
        """The measurements kept for ``key`` and when they were taken, or None (none
        kept, or a file that cannot be read: it is measured over)."""
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("key") != _plain(asdict(key)):
                return None  # a digest collision, or a file edited by hand
            return _measurements(data["measurements"]), str(data.get("measured_at", ""))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.info("ignoring the plan measurements in %s (%s); measuring again", path, exc)
            return None

    def save(self, key: PlanKey, measured: Measurements, measured_at: str) -> None:
        """Keep ``measured`` for ``key`` (atomically; a cache that cannot be written
        only means measuring again next time)."""
        data = {
            "key": _plain(asdict(key)),
            "measured_at": measured_at,
            "measurements": {
                "floor_mb": measured.floor_mb,
                "ort_peak_mb": {str(w): mb for w, mb in sorted(measured.ort_peak_mb.items())},
                "context": measured.context,
                "unavailable": [list(pair) for pair in measured.unavailable],
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
                    }
                    for f in measured.flows
                ],
            },
        }
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path(key), json.dumps(data, indent=1, ensure_ascii=False))
        except OSError as exc:
            log.info("cannot keep the plan measurements in %s (%s)", self.root, exc)


def _plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists), to compare a key with a file's."""
    return json.loads(json.dumps(value))


def _measurements(data: Mapping[str, Any]) -> Measurements:
    engines = []
    for e in data["engines"]:
        if e["engine"] not in ("onnxruntime", "openvino") or e["precision"] not in ("f32", "bf16"):
            raise ValueError(f"unknown engine {e['engine']!r} {e['precision']!r}")
        engines.append(
            EngineTimings(
                e["engine"],
                e["precision"],
                {int(n): float(ms) for n, ms in e["call_ms"].items()},
                {int(n): float(mb) for n, mb in e["memory_mb"].items()},
                {int(t): float(ms) for t, ms in e.get("threads_ms", {}).items()},
                int(e.get("layout", 0)),
                bool(e.get("balanced_trims", False)),
            )
        )
    ort_peaks = {int(w): float(mb) for w, mb in data.get("ort_peak_mb", {}).items()}
    unavailable = tuple((str(e), str(p)) for e, p in data.get("unavailable", []))
    flows = tuple(
        FlowTimings(
            Placement(_engine(f["engine"]), _precision(f["precision"])),
            {int(n): float(ms) for n, ms in f["call_ms"].items()},
            {int(w): float(mb) for w, mb in f["peak_mb"].items()},
        )
        for f in data.get("flows", [])
    )
    return Measurements(float(data["floor_mb"]), tuple(engines), int(data["context"]), ort_peaks,
                        unavailable, flows)  # fmt: skip


def _engine(name: str) -> Engine:
    if name not in ("onnxruntime", "openvino"):
        raise ValueError(f"unknown engine {name!r}")
    return name  # type: ignore[return-value]


def _precision(name: str) -> Precision:
    if name not in ("f32", "bf16"):
        raise ValueError(f"unknown precision {name!r}")
    return name  # type: ignore[return-value]
