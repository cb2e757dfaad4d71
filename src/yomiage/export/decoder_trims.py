"""Give a decoder graph the trim input of :mod:`yomiage.runtime.stage_trims`.

Done on the graph rather than in the PyTorch module so that the same rewrite
serves a converted SBV2 voice and a decoder cut from an AIVMX file. Before each
upsampler (``ConvTranspose``) after the first, the tensor it reads is sliced
along time by that upsampler's row of ``trim``. ``trim`` is both an input and a
zero initializer, so a caller that does not feed it (a parity check, the int8
calibration, OpenVINO) runs the graph as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from yomiage.runtime.stage_trims import TRIM_INPUT


def add_stage_trims(model: Any) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto`` of a decoder) in place; the number of
    trimmed upsamplers. ValueError when it has fewer than two or has trims already."""
    graph = model.graph
    upsamplers = [n for n in graph.node if n.op_type == "ConvTranspose"]
    if len(upsamplers) < 2:
        raise ValueError(f"a decoder has several upsamplers; this graph has {len(upsamplers)}")
    names = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    if TRIM_INPUT in names:
        raise ValueError(f"the decoder already has a tensor named {TRIM_INPUT!r}")
    count = len(upsamplers) - 1
    zeros = numpy_helper.from_array(np.zeros((count, 2), np.int64), TRIM_INPUT)
    graph.initializer.append(zeros)
    graph.input.append(helper.make_tensor_value_info(TRIM_INPUT, TensorProto.INT64, [count, 2]))

    def const(name: str, values: list[int]) -> str:
        graph.initializer.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], values))
        return name

    flat = "/trim/flat"
    nodes = [helper.make_node("Reshape", [TRIM_INPUT, const("/trim/flat_shape", [-1])], [flat])]
    time_axis = const("/trim/axis", [2])
    seen = 0  # upsamplers met so far, in graph order
    for node in graph.node:
        if node.op_type == "ConvTranspose":
            seen += 1
        if node.op_type == "ConvTranspose" and seen > 1:
            i = seen - 2  # this upsampler's row of trim
            p = f"/trim/{i}/"
            x = node.input[0]
            nodes += [
                helper.make_node("Slice", [flat, const(p + "a", [2 * i]),
                                           const(p + "b", [2 * i + 1])], [p + "left"]),
                helper.make_node("Slice", [flat, p + "b", const(p + "c", [2 * i + 2])],
                                 [p + "right"]),
                helper.make_node("Shape", [x], [p + "shape"], start=2, end=3),
                helper.make_node("Sub", [p + "shape", p + "right"], [p + "end"]),
                helper.make_node("Slice", [x, p + "left", p + "end", time_axis], [p + "kept"]),
            ]  # fmt: skip
            node.input[0] = p + "kept"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return count


def add_stage_trims_to_file(path: Path) -> None:
    """:func:`add_stage_trims` on the decoder graph saved at ``path`` (weights inside)."""
    import onnx

    model = onnx.load(str(path))
    add_stage_trims(model)
    onnx.save(model, str(path))
