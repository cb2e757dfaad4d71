"""Run the decoder's wide stages as 2-D convolutions of height 1.

The same arithmetic, a faster path: ONNX Runtime moves 2-D convolutions, and the
activations and sums between them, into its channel-blocked layout (NCHWc) on
x86 CPUs, which its 1-D convolutions never get; the output stays within float
rounding of the 1-D graph's. Taking the 32- and 16-channel stages too was no
faster, so they stay 1-D. The best threshold depends on the CPU (the blocked
layout's block is 8 channels with AVX2, 16 with AVX-512); a bundle fixes one when
it is written, and the plan may time another
(:mod:`yomiage.runtime.decoder_layouts`). Measured with
``benchmarks/decoder_layout.py`` and ``benchmarks/graph_ab.py``:
benchmarks/history/issue-32.md, sixth and ninth passes.

Done on the graph, like :mod:`yomiage.export.decoder_trims`, so that one
rewrite serves a converted SBV2 voice and a decoder cut from an AIVMX file. A
stage starts at an upsampler's output: it gets one ``Unsqueeze`` there, then
every convolution, activation and sum that reads only the stage's tensors (and
scalar constants) works on the 4-D tensor; whatever else reads them (the trims,
the next upsampler, an output) gets one ``Squeeze`` back. Weights keep their
bytes: a ``[out, in, k]`` kernel is the ``[out, in, 1, k]`` one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onnx import TensorProto, helper

MIN_CHANNELS = 64
"""Stages this wide or wider run 2-D (see the module's measurements)."""

_AXIS = "/stages_2d/axis"
_CONVS = {("", "Conv"), ("com.microsoft", "FusedConv")}
_ELEMENTWISE = {"LeakyRelu", "Relu", "Add", "Sub", "Mul", "Div"}


def stages_as_2d(model: Any, min_channels: int | None = None) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto`` of a decoder) in place; the number of
    convolutions now 2-D (stages of ``min_channels``, by default :data:`MIN_CHANNELS`,
    or more). ValueError if it was rewritten already."""
    min_channels = MIN_CHANNELS if min_channels is None else min_channels
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    if _AXIS in weights:
        raise ValueError("the decoder's stages are 2-D already")
    constants = _constant_shapes(graph)
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    graph.initializer.append(helper.make_tensor(_AXIS, TensorProto.INT64, [1], [2]))

    as_2d: dict[str, str] = {}  # a stage tensor's name -> its 4-D twin's
    squeezed: set[str] = set()  # stage tensors whose 1-D name exists (made, or never gone)
    nodes: list[Any] = []
    convs = 0

    def squeeze_for(node: Any) -> None:
        for name in node.input:
            if name in as_2d and name not in squeezed:
                nodes.append(helper.make_node("Squeeze", [as_2d[name], _AXIS], [name]))
                squeezed.add(name)

    for node in graph.node:
        if node.op_type == "ConvTranspose" and node.domain in ("", "ai.onnx"):
            squeeze_for(node)
            nodes.append(node)
            kernel = weights.get(node.input[1])
            width = kernel.dims[1] if kernel is not None and len(kernel.dims) == 3 else 0
            if width >= min_channels:  # ConvTranspose weights: [in, out / group, k]
                out = node.output[0]
                as_2d[out] = f"{out}/2d"
                squeezed.add(out)  # the upsampler still writes it
                nodes.append(helper.make_node("Unsqueeze", [out, _AXIS], [as_2d[out]]))
            continue
        if _joins_stage(node, as_2d, constants, weights, readers):
            if (node.domain, node.op_type) in _CONVS:
                _conv_to_2d(node, weights[node.input[1]])
                convs += 1
            node.input[:] = [as_2d.get(name, name) for name in node.input]
            out = node.output[0]
            as_2d[out] = f"{out}/2d"
            node.output[0] = as_2d[out]
            nodes.append(node)
            continue
        squeeze_for(node)
        nodes.append(node)
    for output in graph.output:
        if output.name in as_2d and output.name not in squeezed:
            nodes.append(helper.make_node("Squeeze", [as_2d[output.name], _AXIS], [output.name]))
    read = {name for node in nodes for name in node.input} | {o.name for o in graph.output}
    ours_unread = [
        n.op_type == "Unsqueeze" and _AXIS in n.input and n.output[0] not in read for n in nodes
    ]  # a stage nothing joined: its Unsqueeze goes
    nodes = [n for n, drop in zip(nodes, ours_unread, strict=True) if not drop]
    del graph.node[:]
    graph.node.extend(nodes)
    stale = set(as_2d) - squeezed  # their recorded shapes were 3-D
    kept = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    return convs


def _joins_stage(
    node: Any,
    as_2d: dict[str, str],
    constants: dict[str, list[int]],
    weights: dict[str, Any],
    readers: dict[str, int],
) -> bool:
    """Whether ``node`` can work on its inputs' 4-D twins and give the same numbers."""
    if len(node.output) != 1:
        return False
    if (node.domain, node.op_type) in _CONVS:
        kernel = weights.get(node.input[1]) if len(node.input) > 1 else None
        return (
            node.input[0] in as_2d
            and kernel is not None
            and len(kernel.dims) == 3
            and readers.get(kernel.name) == 1  # its dims change with this node
            and all(name in weights for name in node.input[1:] if name)
        )
    if node.domain not in ("", "ai.onnx") or node.op_type not in _ELEMENTWISE:
        return False
    staged = [name for name in node.input if name in as_2d]
    others = [name for name in node.input if name and name not in as_2d]
    # A constant of shape [C, 1] would broadcast along the wrong axis once its partner
    # has four; only constants of one element broadcast the same way at any rank.
    return bool(staged) and all(
        name in constants and all(d == 1 for d in constants[name]) for name in others
    )


def _conv_to_2d(node: Any, kernel: Any) -> None:
    kernel.dims.insert(2, 1)
    for attribute in node.attribute:
        values = list(attribute.ints)
        if attribute.name in ("kernel_shape", "dilations", "strides"):
            attribute.ints[:] = [1, *values]
        elif attribute.name == "pads":
            attribute.ints[:] = [0, values[0], 0, values[1]]


def _constant_shapes(graph: Any) -> dict[str, list[int]]:
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                shapes[node.output[0]] = list(value.dims)
    return shapes


def two_d_from(model: Any) -> int | None:
    """The channels of the narrowest stage ``model`` runs 2-D (the ``min_channels`` it
    was rewritten with, as far as its stages tell), or None where every stage is 1-D."""
    graph = model.graph
    widths = {t.name: list(t.dims) for t in graph.initializer}
    upsampler_width = {
        node.output[0]: widths.get(node.input[1], [0, 0])[1]
        for node in graph.node
        if node.op_type == "ConvTranspose" and len(node.input) > 1
    }
    staged = [
        upsampler_width[node.input[0]]
        for node in graph.node
        if node.op_type == "Unsqueeze" and _AXIS in node.input[1:]
        and node.input[0] in upsampler_width
    ]  # fmt: skip
    return min(staged) if staged else None


def stages_as_1d(model: Any) -> int:
    """Undo :func:`stages_as_2d` on ``model`` in place: the graph it was made from, but
    for the shapes recorded of tensors it no longer has. The number of convolutions
    made 1-D again (0 for a decoder that had no 2-D stage)."""
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    if _AXIS not in weights:
        return 0
    as_2d: set[str] = set()  # the 4-D tensors, named "<1-D name>/2d" by the rewrite
    nodes: list[Any] = []
    convs = 0
    for node in graph.node:
        ours = node.op_type in ("Unsqueeze", "Squeeze") and _AXIS in node.input[1:]
        if ours and node.op_type == "Unsqueeze":
            as_2d.add(node.output[0])
            continue  # its 1-D input takes its place
        if ours:
            continue  # the 4-D tensor it read takes back its 1-D name
        if any(name in as_2d for name in node.input):
            if (node.domain, node.op_type) in _CONVS and node.input[0] in as_2d:
                _conv_to_1d(node, weights[node.input[1]])
                convs += 1
            as_2d.update(node.output)
        nodes.append(node)
    # An optimizer may have merged equal constants into the axis (a [2] is a [2]):
    # what else reads it keeps the value under another name, and the name is free.
    kept_axis = f"{_AXIS}/kept"
    for node in nodes:
        node.input[:] = [kept_axis if n == _AXIS else _name_1d(n, as_2d) for n in node.input]
        node.output[:] = [_name_1d(name, as_2d) for name in node.output]
    del graph.node[:]
    graph.node.extend(nodes)
    if any(kept_axis in node.input for node in nodes):
        weights[_AXIS].name = kept_axis
    else:
        kept = [t for t in graph.initializer if t.name != _AXIS]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return convs


def relayout(model: Any, min_channels: int) -> int:
    """``model`` in place with its stages of ``min_channels`` or more 2-D and the rest
    1-D, whatever its layout was; the number of 2-D convolutions."""
    stages_as_1d(model)
    return stages_as_2d(model, min_channels)


def _name_1d(name: str, as_2d: set[str]) -> str:
    if name not in as_2d:
        return name
    if not name.endswith("/2d"):
        raise ValueError(f"{name!r} is 4-D but not named as the 2-D rewrite names its tensors")
    return name[: -len("/2d")]


def _conv_to_1d(node: Any, kernel: Any) -> None:
    del kernel.dims[2]
    for attribute in node.attribute:
        values = list(attribute.ints)
        if attribute.name in ("kernel_shape", "dilations", "strides"):
            attribute.ints[:] = values[1:]
        elif attribute.name == "pads":
            attribute.ints[:] = [values[1], values[3]]


def stages_as_2d_in_file(path: Path) -> int:
    """:func:`stages_as_2d` on the decoder graph saved at ``path`` (weights inside)."""
    import onnx

    model = onnx.load(str(path))
    convs = stages_as_2d(model)
    onnx.save(model, str(path))
    return convs
