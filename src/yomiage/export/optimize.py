"""Save ONNX graphs already optimized, with their weights in a side file.

Measured on the full-size q8 BERT (524 MB): loading the plain graph with full
optimization took 2.4 s and 1,254 MB of RSS (the optimizer copies weights);
the graph optimized once here (ORT_ENABLE_EXTENDED) with external weights
loads in 0.34 s, to 520 MB, at the same speed. EXTENDED, not ALL: ALL adds
layout changes tied to the CPU that ran it; the runtime applies those itself.
"""

from __future__ import annotations

from pathlib import Path

from yomiage.runtime.engines.telemetry import engines_without_telemetry

with engines_without_telemetry():  # ONNX Runtime decides at its start: see that module
    import onnxruntime as ort

    from yomiage.runtime.engines.onnx_session import quiet_options

MIN_EXTERNAL_BYTES = 1024


def optimize_graph(source: Path, target: Path, *, basic: bool = False) -> Path:
    """Write ``target`` (+ ``target.data``) from ``source``; they may not be the same file.

    ``basic`` runs only the generic passes (constant folding, redundant node
    removal), the step before quantization: on the exported DeBERTa it turns
    the relative-position projections into constants, so each query/key
    weight has one consumer left and the quantizer takes it (unfolded, those
    44 weights stayed float32: a 610 MB q8 graph instead of 472 MB).
    """
    if source.resolve() == target.resolve():
        raise ValueError("optimize into a new file")
    options = quiet_options()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        if basic
        else ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    )
    options.optimized_model_filepath = str(target)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", f"{target.name}.data"
    )
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", str(MIN_EXTERNAL_BYTES)
    )
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    return target
