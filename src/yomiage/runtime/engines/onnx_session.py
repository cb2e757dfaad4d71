"""ONNX Runtime sessions made the same way for every graph yomiage runs."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from yomiage.errors import ModelLoadError
from yomiage.runtime.engines.cpu import physical_cores
from yomiage.runtime.engines.telemetry import engines_without_telemetry

with engines_without_telemetry():  # ONNX Runtime decides at its start: see that module
    import onnxruntime as ort

log = logging.getLogger(__name__)

# The CPU arena every session shares: chunks exactly as large as asked for, so
# memory follows the largest working set instead of doubling past it.
_ARENA_CONFIG = {
    "max_mem": 0,  # no limit of its own: requests are bounded by yomiage's limits
    "arena_extend_strategy": 1,  # kSameAsRequested
    "initial_chunk_size_bytes": 1 << 20,
    "max_dead_bytes_per_chunk": 1 << 20,
}


@functools.cache
def shared_cpu_arena() -> bool:
    """Register, once per process, the CPU arena all of yomiage's sessions allocate
    from; False where this ONNX Runtime cannot (sessions then use plain malloc).

    Why an arena: with each operator calling malloc (the arena off), every large
    tensor is a fresh mmap the kernel zero-fills, call after call: with the arena
    the float32 path was a few percent faster at the same or a lower peak
    (measured: benchmarks/history/issue-24.md, first pass). Why
    shared and same-as-requested: ONNX Runtime's default arena doubles each new
    chunk and keeps one per session, which is what once made memory grow with
    every new input length. ONNX Runtime's environment is one per process, so
    this registration is too.
    """
    try:
        memory = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                   ort.OrtMemType.DEFAULT)  # fmt: skip
        ort.create_and_register_allocator(memory, ort.OrtArenaCfg(_ARENA_CONFIG))
    except Exception as exc:  # an ONNX Runtime without shared allocators
        log.debug("no shared ONNX Runtime arena (%s): sessions allocate with malloc", exc)
        return False
    return True


def quiet_options() -> ort.SessionOptions:
    """Session options that keep ONNX Runtime's load-time warnings (not its errors) out
    of the user's terminal. A bundle's decoder raises one at every load: its trim
    input has a default (:mod:`yomiage.runtime.stage_trims`), which ONNX Runtime
    warns "may prevent some of the graph optimizations" (it is meant not to be
    folded)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors and worse
    return options


@contextmanager
def load_warnings_off() -> Iterator[None]:
    """The same for sessions that others' code makes with its own options (ONNX
    Runtime's quantizer calibrates on the decoder, whose ``trim`` input draws the
    warning), through ONNX Runtime's default logger. ONNX Runtime has no getter for
    its level, so it is set back to its default (warnings)."""
    ort.set_default_logger_severity(3)
    try:
        yield
    finally:
        ort.set_default_logger_severity(2)


def session_options(threads: int | None) -> ort.SessionOptions:
    """Options shared by every session.

    Memory comes from the process's shared arena (:func:`shared_cpu_arena`), or
    from malloc where there is none; memory patterns are off (they plan for one
    input shape, and every request has its own). Graphs come optimized from
    ``yomiage convert``; only the CPU-specific passes run at load.

    Idle pool threads sleep instead of spinning: every session has its own
    pool, and a request runs four graphs one after another, so the pool of the
    graph that just finished spun on the cores the next graph needed (and
    OpenVINO's decoder): sleeping, a one-sentence request took a fifth less time
    (measured: benchmarks/history/issue-24.md, second pass).
    """
    options = quiet_options()
    options.intra_op_num_threads = threads or physical_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_mem_pattern = False
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    arena = shared_cpu_arena()
    options.enable_cpu_mem_arena = arena
    if arena:
        options.add_session_config_entry("session.use_env_allocators", "1")
    return options


def load_session(
    path: Path,
    options: ort.SessionOptions,
    *,
    keep_casts: bool = False,
    weights_dir: Path | None = None,
) -> ort.InferenceSession:
    """A CPU session for ``path``; ModelLoadError naming the file if it cannot load.

    ``keep_casts``: constant folding is off, so that weights stored narrow and cast to
    float32 in the graph (:mod:`yomiage.export.bf16_weights`) stay narrow: folded, each
    would be held widened from the load on. The graphs come folded from ``yomiage
    convert``; what is left to fold is what the Casts are there for.

    ``weights_dir``: the graph's weights files are there rather than beside it (a graph
    the cache rewrote from a bundle's: :mod:`yomiage.runtime.sliced_berts`). The graph
    is read as bytes, and ``options`` (then the session's own) tell ONNX Runtime where
    its weights are; it maps them from there as from beside a graph."""
    if not path.is_file():
        raise ModelLoadError(f"ONNX graph not found: {path}")
    unfolded = {"disabled_optimizers": ["ConstantFolding"]} if keep_casts else {}
    try:
        model: str | bytes = str(path)
        if weights_dir is not None:
            model = path.read_bytes()
            options.add_session_config_entry(
                "session.model_external_initializers_file_folder_path", str(weights_dir)
            )
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"],
                                    **unfolded)  # fmt: skip
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ModelLoadError(f"cannot load ONNX graph {path}: {exc}") from exc


def input_names(session: ort.InferenceSession) -> frozenset[str]:
    return frozenset(i.name for i in session.get_inputs())


def taken(session: ort.InferenceSession, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """Those of ``feeds`` that ``session``'s graph takes: a flow or decoder takes the speaker
    as ``sid`` or, made before speaker tables (:mod:`yomiage.export.speaker_tables`), as
    ``g``; ONNX Runtime refuses a feed its graph does not name."""
    names = input_names(session)
    return {name: value for name, value in feeds.items() if name in names}
