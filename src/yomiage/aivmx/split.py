"""Cutting an AIVMX graph (SBV2's whole ``SynthesizerTrn.infer``) into a bundle's three.

A yomiage bundle runs the encoder (with the duration predictors), the flow and
the decoder as separate graphs so that durations come first and the flow and
decoder run span by span (streaming, bounded memory, timings). The AIVMX graph
holds all three; the exporter kept module paths in node names (``/enc_p/``,
``/sdp/``, ``/flow/``, ``/dec/``) and state-dict names for most weights, and
the cut points are found by structure, not by the exporter's tensor numbers:

* ``g``: the ``Unsqueeze`` of the speaker embedding (``Gather`` of ``emb_g.weight``);
* ``z_p``: the ``Add`` of the prior mean and its scaled ``RandomNormalLike`` noise
  (the one outside ``/sdp/``); the token-level mean and log-scale are the
  inputs of the two ``MatMul``s that spread them over frames;
* ``durations``: the ``Ceil`` of the scaled duration;
* the decoder's input: the tensor its nodes read besides ``g``;
* the frame mask the flow reads: the ``Less`` of SBV2's ``sequence_mask`` over
  frame counts, made all true here (a bundle's flow runs on whole spans).

The graph draws its own noise (``RandomNormalLike``); a bundle takes noise as
input so a seed reproduces the audio, so the duration predictor's scaled noise
becomes the encoder's ``sdp_noise`` input and the prior's noise is drawn by
the runtime, as for a converted voice.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from yomiage.aivmx.reader import AivmxError

MODULES = ("/enc_p/", "/sdp/", "/dp/", "/flow/", "/dec/")
# Our encoder's inputs for the AIVMX graph's; the scalars become [1]-shaped.
RENAMED_INPUTS = {"x_tst": "phone_ids", "tones": "tone_ids", "language": "language_ids",
                  "style_vec": "style", "sid": "sid", "bert": "bert"}  # fmt: skip
SCALARS = ("sdp_ratio", "length_scale")


@dataclass(frozen=True)
class CutPoints:
    """Names of the AIVMX graph's tensors where the bundle's graphs meet."""

    g: str
    m_p: str  # token level
    logs_p: str
    durations: str
    z_p: str
    frame_mask: str  # bool [B, frames], from the frame counts
    decoder_input: str
    sdp_noise: str  # the duration predictor's noise, already scaled by noise_scale_w
    audio: str


def find_cut_points(graph: Any) -> CutPoints:
    """The cut points of an SBV2 JP-Extra ``infer`` export (AivmxError if one is missing)."""
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = collections.defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)

    def top(node: Any) -> bool:
        return not node.name.startswith(MODULES)

    def one(nodes: Iterable[Any], what: str) -> Any:
        found = list(nodes)
        if len(found) != 1:
            raise AivmxError(
                f"the graph is not an SBV2 JP-Extra export: expected one {what}, found {len(found)}"
            )
        return found[0]

    embedding = one(
        (n for n in graph.node if n.op_type == "Gather" and n.input[0] == "emb_g.weight"),
        "speaker embedding (Gather of emb_g.weight)",
    )
    g = one(
        (c for c in consumers[embedding.output[0]] if c.op_type == "Unsqueeze"),
        "Unsqueeze of the speaker embedding",
    ).output[0]
    noise = one(
        (n for n in graph.node if n.op_type == "RandomNormalLike" and top(n)), "prior noise"
    )
    mean = noise.input[0]
    z_p = one(
        (c for c in consumers[mean] if c.op_type == "Add" and top(c)), "prior sample (Add)"
    ).output[0]
    scale_mul = one(
        (c for c in consumers[noise.output[0]] if c.op_type == "Mul"), "noise scaling (Mul)"
    )
    exp = one(
        (producer[i] for i in scale_mul.input if i in producer and producer[i].op_type == "Exp"),
        "Exp of the prior log-scale",
    )
    m_p, logs_p = _token_level(mean, producer), _token_level(exp.input[0], producer)
    durations = one((n for n in graph.node if n.op_type == "Ceil" and top(n)), "Ceil").output[0]
    decoder_nodes = [n for n in graph.node if n.name.startswith("/dec/")]
    inside = {o for n in decoder_nodes for o in n.output}
    weights = {i.name for i in graph.initializer}
    outer = {i for n in decoder_nodes for i in n.input if i and i not in inside | weights}
    decoder_input = one(outer - {g}, "decoder input besides g")
    audio = one((o.name for o in graph.output if o.name in inside), "audio output")
    sdp = one(
        (n for n in graph.node if n.op_type == "RandomNormalLike" and n.name.startswith("/sdp/")),
        "duration predictor noise",
    )
    sdp_noise = one(
        (c for c in consumers[sdp.output[0]] if c.op_type == "Mul" and "noise_scale_w" in c.input),
        "duration noise scaling (Mul by noise_scale_w)",
    ).output[0]
    frame_mask = _frame_mask(graph, producer, decoder_input, {z_p, g}, weights)
    return CutPoints(g, m_p, logs_p, durations, z_p, frame_mask, decoder_input, sdp_noise, audio)


def _token_level(spread: str, producer: dict[str, Any]) -> str:
    """``spread`` is ``Transpose(MatMul(attn, Transpose(x)))``: returns ``x``."""
    outer = producer.get(spread)
    matmul = producer.get(outer.input[0]) if outer is not None else None
    inner = producer.get(matmul.input[1]) if matmul is not None else None
    ops = [n.op_type if n is not None else None for n in (outer, matmul, inner)]
    if inner is None or ops != ["Transpose", "MatMul", "Transpose"]:
        raise AivmxError(
            "the graph is not an SBV2 JP-Extra export: no frame expansion of the prior"
        )
    return str(inner.input[0])


def _frame_mask(
    graph: Any, producer: dict[str, Any], output: str, inputs: set[str], weights: set[str]
) -> str:
    """The ``Less`` that makes the flow's frame mask: with it fed, the flow needs
    nothing but ``z_p`` and ``g``."""
    candidates = [n for n in graph.node if n.op_type == "Less" and not n.name.startswith(MODULES)]
    for node in candidates:
        if not _reaches_graph_inputs(output, inputs | {node.output[0]}, producer, weights):
            return str(node.output[0])
    raise AivmxError("the graph is not an SBV2 JP-Extra export: no frame mask for the flow")


def _reaches_graph_inputs(
    output: str, stops: set[str], producer: dict[str, Any], weights: set[str]
) -> bool:
    seen: set[str] = set()
    stack = [output]
    while stack:
        name = stack.pop()
        if not name or name in seen or name in stops or name in weights:
            continue
        seen.add(name)
        node = producer.get(name)
        if node is None:
            return True  # a graph input
        stack.extend(node.input)
    return False


def split_graphs(model: Any) -> dict[str, Any]:
    """``{"encoder", "flow", "decoder"}`` models with a converted bundle's inputs and outputs."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    cut = find_cut_points(graph)
    del model.metadata_props[:]  # the bundle's manifest carries what matters

    def rename_uses(old: str, new: str) -> None:
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name == old:
                    node.input[i] = new

    # Encoder inputs: our names, [1]-shaped scalars, lengths from the ids' shape.
    bt = ["batch", "T"]
    for old, new in RENAMED_INPUTS.items():
        rename_uses(old, new)
    for scalar in SCALARS:
        rename_uses(scalar, f"{scalar}__scalar")
        graph.node.insert(0, helper.make_node("Squeeze", [scalar], [f"{scalar}__scalar"]))
    rename_uses("x_tst_lengths", "x_tst_lengths__shape")
    graph.node.insert(
        0, helper.make_node("Shape", ["phone_ids"], ["x_tst_lengths__shape"], start=1, end=2)
    )
    rename_uses(cut.sdp_noise, "sdp_noise")
    bert_dim = _dim(graph, "bert", 1)
    new_inputs = [
        helper.make_tensor_value_info("phone_ids", TensorProto.INT64, bt),
        helper.make_tensor_value_info("tone_ids", TensorProto.INT64, bt),
        helper.make_tensor_value_info("language_ids", TensorProto.INT64, bt),
        helper.make_tensor_value_info("bert", TensorProto.FLOAT, ["batch", bert_dim, "T"]),
        helper.make_tensor_value_info("style", TensorProto.FLOAT, ["batch", 256]),
        helper.make_tensor_value_info("sid", TensorProto.INT64, ["batch"]),
        helper.make_tensor_value_info("sdp_noise", TensorProto.FLOAT, ["batch", 2, "T"]),
        *(helper.make_tensor_value_info(s, TensorProto.FLOAT, [1]) for s in SCALARS),
    ]
    # The flow's frame mask: all true over z_p's frames (sorted into place below).
    mask_nodes = [
        helper.make_node("Shape", [cut.z_p], ["frame_mask__shape"]),
        helper.make_node("Gather", ["frame_mask__shape", "frame_mask__axes"],
                         ["frame_mask__dims"], axis=0),
        helper.make_node("ConstantOfShape", ["frame_mask__dims"], ["frame_mask__all"],
                         value=helper.make_tensor("one", TensorProto.BOOL, [1], [True])),
    ]  # fmt: skip
    graph.node.extend(mask_nodes)
    graph.initializer.append(helper.make_tensor("frame_mask__axes", TensorProto.INT64, [2], [0, 2]))
    rename_uses(cut.frame_mask, "frame_mask__all")
    del graph.input[:]
    graph.input.extend(new_inputs)
    outputs = {
        "encoder": {cut.m_p: "m_p", cut.logs_p: "logs_p", cut.g: "g", cut.durations: "durations"},
        "flow": {cut.decoder_input: "z"},
        "decoder": {cut.audio: "audio"},
    }
    inputs = {
        "encoder": [i.name for i in new_inputs],
        "flow": [cut.z_p, cut.g],
        "decoder": [cut.decoder_input, cut.g],
    }
    renamed_in = {
        "flow": {cut.z_p: "z_p", cut.g: "g"},
        "decoder": {cut.decoder_input: "z", cut.g: "g"},
    }
    known = {v.name for v in (*graph.value_info, *graph.input, *graph.output)}
    for name in {cut.z_p, cut.g, cut.decoder_input, cut.m_p, cut.logs_p, cut.durations}:
        if name not in known:
            raise AivmxError(f"the graph's shapes could not be inferred at {name}")
    extractor = onnx.utils.Extractor(model)
    parts = {}
    for part in ("encoder", "flow", "decoder"):
        sub = extractor.extract_model(inputs[part], list(outputs[part]))
        _rename_io(sub.graph, renamed_in.get(part, {}), outputs[part])
        _sort_nodes(sub.graph)
        del sub.opset_import[:]
        sub.opset_import.extend(model.opset_import)
        sub.ir_version = model.ir_version
        onnx.checker.check_model(sub)
        parts[part] = sub
    return parts


def _dim(graph: Any, name: str, axis: int) -> int | str:
    for value in (*graph.input, *graph.value_info):
        if value.name == name:
            dim = value.type.tensor_type.shape.dim[axis]
            return int(dim.dim_value) if dim.HasField("dim_value") else str(dim.dim_param or "C")
    return "C"


def _rename_io(graph: Any, inputs: dict[str, str], outputs: dict[str, str]) -> None:
    """Give a cut-out graph the bundle's names: inputs renamed where read, outputs
    through Identity nodes (an inner tensor may also feed other nodes)."""
    from onnx import helper

    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in inputs:
                node.input[i] = inputs[name]
    for value in graph.input:
        if value.name in inputs:
            value.name = inputs[value.name]
    for value in graph.output:
        new = outputs[value.name]
        graph.node.append(helper.make_node("Identity", [value.name], [new]))
        value.name = new


def _sort_nodes(graph: Any) -> None:
    """Order the nodes so each comes after what it reads (ONNX requires it; the
    nodes added above were appended at the end)."""
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending = list(graph.node)
    ordered = []
    while pending:
        rest = []
        for node in pending:
            if all(name in ready for name in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise AivmxError(f"the cut graph has a cycle or a missing input at {rest[0].name!r}")
        pending = rest
    copies = [type(n)() for n in ordered]
    for copy, node in zip(copies, ordered, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)
