"""ONNX Runtime sessions made the same way for every graph yomiage runs."""

from __future__ import annotations

from pathlib import Path

from yomiage.errors import ModelLoadError
from yomiage.runtime.cpu import physical_cores
from yomiage.runtime.telemetry import engines_without_telemetry

with engines_without_telemetry():  # ONNX Runtime decides at its start: see that module
    import onnxruntime as ort


def session_options(threads: int | None) -> ort.SessionOptions:
    """Options shared by every session (chosen for steady memory on varied lengths).

    The memory arena and memory patterns are off: with inputs of a new length
    every request, they grow instead of being reused. Graphs come optimized
    from ``yomiage convert``; only the CPU-specific passes run at load.
    """
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or physical_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    return options


def load_session(path: Path, options: ort.SessionOptions) -> ort.InferenceSession:
    """A CPU session for ``path``; ModelLoadError naming the file if it cannot load."""
    if not path.is_file():
        raise ModelLoadError(f"ONNX graph not found: {path}")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ModelLoadError(f"cannot load ONNX graph {path}: {exc}") from exc


def input_names(session: ort.InferenceSession) -> frozenset[str]:
    return frozenset(i.name for i in session.get_inputs())
