"""A graph's weights kept in bfloat16 and widened to float32 as they are used.

The flow of a full-size voice is 157 MB of float32 weights, every byte of which
ONNX Runtime reads on every call, so all of it stays resident (mapped from the
graph's data file). Stored as bfloat16, each weight of a convolution or matrix
product is an initializer half the size followed by a ``Cast`` to float32: the
arithmetic stays float32, only each weight is rounded to bfloat16's 8 bits of
mantissa (to nearest, ties to even), as OpenVINO's bfloat16 does to them and more.
Measured on the full-size flow (Intel Xeon with AMX, 2 threads;
``benchmarks/flow_engines.py``, benchmarks/RESULTS.md): 61 MB less resident after
every length, 1.21x the flow's time (each call widens the weights), its output at
~65 dB SNR against float32's and the audio the decoder makes of it at ~93 dB.

The session must keep the ``Cast`` nodes: ONNX Runtime's constant folding would
widen the weights once at load, holding float32 copies
(:func:`~yomiage.runtime.engines.onnx_session.load_session`'s ``keep_casts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# The operators whose weight input (their second) is stored narrow.
WEIGHT_OPS = frozenset({"Conv", "FusedConv", "ConvTranspose", "MatMul", "FusedMatMul", "Gemm"})
# Smaller weights stay float32: they cost nothing resident, and a Cast each would cost time.
MIN_ELEMENTS = 1024
SUFFIX = "_bf16"


@dataclass(frozen=True)
class Narrowed:
    """What :func:`store_weights_bf16` did: the bytes it saved, and the largest weight's
    float32 bytes (held widened while it is used)."""

    saved_bytes: int
    widest_bytes: int


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """``values`` (float32) rounded to bfloat16, as its uint16 bit patterns: to nearest,
    ties to even; NaN stays NaN (its top mantissa bit kept set)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> 16
    nan = np.isnan(values)
    rounded = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded)
    return rounded.astype(np.uint16)


def store_weights_bf16(model: Any, min_elements: int = MIN_ELEMENTS) -> Narrowed:
    """Rewrite ``model`` (an ``onnx.ModelProto``, its weights loaded) in place: each float32
    weight of :data:`WEIGHT_OPS` with at least ``min_elements`` values becomes a bfloat16
    initializer and a Cast back to float32 under the weight's name."""
    import onnx
    from onnx import TensorProto, numpy_helper

    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    weights = {
        node.input[1]
        for node in graph.node
        if node.op_type in WEIGHT_OPS and len(node.input) > 1 and node.input[1] in initializers
    }
    casts = []
    saved = widest = 0
    for name in sorted(weights):
        tensor = initializers[name]
        if tensor.data_type != TensorProto.FLOAT or int(np.prod(tensor.dims)) < min_elements:
            continue
        values = numpy_helper.to_array(tensor)
        narrow = TensorProto(name=name + SUFFIX, data_type=TensorProto.BFLOAT16)
        narrow.dims.extend(tensor.dims)
        narrow.raw_data = to_bf16_bits(values).tobytes()
        graph.initializer.remove(tensor)
        graph.initializer.append(narrow)
        casts.append(onnx.helper.make_node("Cast", [narrow.name], [name], name=name + "_widen",
                                           to=TensorProto.FLOAT))  # fmt: skip
        saved += values.nbytes // 2
        widest = max(widest, values.nbytes)
    for cast in reversed(casts):  # before every node, so the graph stays in order
        graph.node.insert(0, cast)
    return Narrowed(saved, widest)
