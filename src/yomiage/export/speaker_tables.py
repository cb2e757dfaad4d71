"""What the graphs compute from the speaker alone, computed once per speaker when a bundle is made.

The speaker enters each graph as one vector, ``g = emb_g[sid]``, which every graph
first projects: the text encoder and both duration predictors, each of the flow's
four attention stacks, the decoder's ``cond``. Those projections are the same for
every request of a speaker, yet their weights (~3.6 MB of a full-size voice, plus
ONNX Runtime's packed copies of the flow's) stay in memory for each voice loaded.
Here each value that depends on the speaker alone is computed for every speaker of
the voice and kept as one row of a table; the graph looks its row up by ``sid``.
A voice of a few speakers then holds a few KB instead of the weights, and a graph
whose tables would outweigh what they replace (a voice of hundreds of speakers) is
left as it was.

Runs on ModelProtos (weights inside), after export or the AIVMX cut and before
ONNX Runtime's optimizer: :func:`speaker_tables` for the three graphs together,
since the flow's and decoder's ``g`` rows come from the encoder's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.runtime.engines.telemetry import engines_without_telemetry

SPEAKER_INPUT = "sid"
TABLE_PREFIX = "speaker_table__"
# Ops whose output may differ from call to call: never computed ahead.
_NOT_AHEAD = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
              "Multinomial", "Bernoulli")  # fmt: skip


def speaker_tables(parts: Mapping[str, Any], n_speakers: int) -> dict[str, bool]:
    """Fold the speaker projections of ``parts`` (``encoder``, ``flow``, ``decoder``) into
    tables, in place; returns which graphs now take ``sid`` instead of ``g``.

    All or nothing: the graphs change together once every table is made. Each graph is
    judged on its own (one whose tables would not pay keeps ``g``), and the runtime feeds
    each the input it names. The encoder's outputs stay as they were, ``g`` now a row."""
    if n_speakers < 1:
        raise ValueError(f"a voice has at least one speaker, not {n_speakers}")
    sids = [np.array([s], np.int64) for s in range(n_speakers)]
    encoder = fold(parts["encoder"], SPEAKER_INPUT, sids)
    if encoder is not None and "g" in encoder.rows:
        g_rows = encoder.rows["g"]
    else:
        g_rows = _evaluate_g(parts["encoder"], sids)
    made = {
        "encoder": encoder,
        **{name: fold(parts[name], "g", g_rows) for name in ("flow", "decoder")},
    }
    for name, result in made.items():
        if result is not None:
            parts[name].CopyFrom(result.model)
    return {name: result is not None for name, result in made.items()}


def _evaluate_g(encoder: Any, sids: Sequence[npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
    """The encoder's ``g`` for each speaker, where folding the encoder did not pay."""
    cone = _cone(encoder.graph, SPEAKER_INPUT)
    if "g" not in cone.values:
        raise ValueError("the encoder's g output does not depend on sid alone")
    return _run_cone(encoder, SPEAKER_INPUT, cone, ["g"], sids)["g"]


@dataclass(frozen=True)
class _Cone:
    """The nodes of a graph whose inputs are the source, constants, or values derived
    from them: what can be computed knowing the source alone."""

    nodes: list[Any]
    values: set[str]  # the source and every output of the cone's nodes
    constants: set[str]  # initializers and outputs of constant-only nodes


def _has_subgraph(node: Any) -> bool:
    from onnx import AttributeProto

    return any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute)


def _cone(graph: Any, source: str) -> _Cone:
    constants = {i.name for i in graph.initializer}
    values = {source}
    nodes = []
    for node in graph.node:  # ONNX keeps nodes in topological order
        inputs = [i for i in node.input if i]
        if node.op_type in _NOT_AHEAD or _has_subgraph(node):
            continue
        if all(i in constants for i in inputs):
            constants.update(node.output)  # Constant and folds of constants
        elif all(i in constants or i in values for i in inputs):
            nodes.append(node)
            values.update(node.output)
    return _Cone(nodes, values, constants)


def _frontier(graph: Any, cone: _Cone) -> list[str]:
    """Cone values that something outside the cone reads: what the tables must hold."""
    inside = {id(n) for n in cone.nodes}
    read = {i for n in graph.node if id(n) not in inside for i in n.input}
    read.update(o.name for o in graph.output)
    return [v for v in _ordered(cone) if v in read and v != SPEAKER_INPUT]


def _ordered(cone: _Cone) -> Iterable[str]:
    seen: set[str] = set()
    for node in cone.nodes:
        for name in (*node.input, *node.output):
            if name in cone.values and name not in seen:
                seen.add(name)
                yield name


def _run_cone(
    model: Any, source: str, cone: _Cone, wanted: list[str], sources: Sequence[npt.NDArray[Any]]
) -> dict[str, list[npt.NDArray[Any]]]:
    """Each of ``wanted`` for each value of ``source``, by ONNX Runtime on the cone alone."""
    from onnx import ValueInfoProto, helper

    graph = model.graph
    producers = [n for n in graph.node if any(o in cone.constants for o in n.output)]
    # Walk back from the wanted values over the cone and the constant-making nodes.
    by_output = {o: n for n in [*producers, *cone.nodes] for o in n.output}
    stack = list(wanted)
    chosen: set[int] = set()
    while stack:
        node = by_output.get(stack.pop())
        if node is None or id(node) in chosen:
            continue
        chosen.add(id(node))
        stack.extend(i for i in node.input if i)
    kept = [n for n in graph.node if id(n) in chosen]
    used = {i for n in kept for i in n.input}
    source_info = next(i for i in graph.input if i.name == source)
    sub = helper.make_graph(
        kept,
        "speaker_cone",
        [source_info],
        [ValueInfoProto(name=name) for name in wanted],
        [i for i in graph.initializer if i.name in used],
    )
    cone_model = helper.make_model(sub, opset_imports=model.opset_import)
    cone_model.ir_version = model.ir_version
    with engines_without_telemetry():
        import onnxruntime as ort

        from yomiage.runtime.engines.onnx_session import quiet_options

    session = ort.InferenceSession(
        cone_model.SerializeToString(), quiet_options(), providers=["CPUExecutionProvider"]
    )
    out: dict[str, list[npt.NDArray[Any]]] = {name: [] for name in wanted}
    for value in sources:
        for name, result in zip(wanted, session.run(wanted, {source: value}), strict=True):
            out[name].append(np.asarray(result))
    return out


@dataclass(frozen=True)
class Folded:
    """A graph with speaker tables, and each folded value's row for each speaker."""

    model: Any
    rows: dict[str, list[npt.NDArray[Any]]]


def fold(model: Any, source: str, sources: Sequence[npt.NDArray[Any]]) -> Folded | None:
    """``model`` (left unchanged) with what it computes from graph input ``source`` alone
    replaced by rows looked up by ``sid``, given ``source``'s value for each speaker
    (``sources[sid]``).

    None when there is nothing to fold or the tables would hold more bytes than the
    weights they replace."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    if source not in {i.name for i in graph.input}:
        return None
    if any(_has_subgraph(n) for n in graph.node):
        return None  # values read inside a subgraph would escape the frontier
    cone = _cone(graph, source)
    frontier = _frontier(graph, cone)
    if not frontier:
        return None
    rows = _run_cone(model, source, cone, frontier, sources)

    folded = _copy(model)
    fgraph = folded.graph
    inside = {id(n) for n in cone.nodes}
    keep = [n for n, original in zip(fgraph.node, graph.node, strict=True)
            if id(original) not in inside]  # fmt: skip
    row = "speaker_row__sid"
    lookups = [_squeeze(row, folded)]
    for i, name in enumerate(frontier):
        table = f"{TABLE_PREFIX}{source}_{i}"
        fgraph.initializer.append(numpy_helper.from_array(np.stack(rows[name]), table))
        lookups.append(helper.make_node("Gather", [table, row], [name], axis=0))
    del fgraph.node[:]
    fgraph.node.extend([*lookups, *keep])
    inputs = [i for i in fgraph.input if i.name != source or source == SPEAKER_INPUT]
    if SPEAKER_INPUT not in {i.name for i in inputs}:
        inputs.append(helper.make_tensor_value_info(SPEAKER_INPUT, TensorProto.INT64, [1]))
    del fgraph.input[:]
    fgraph.input.extend(inputs)
    _prune(fgraph)
    if _initializer_bytes(fgraph) >= _initializer_bytes(graph):
        return None
    return Folded(folded, rows)


def _squeeze(row: str, model: Any) -> Any:
    """``sid`` ([1]) to the scalar index that makes Gather return a row of the table's shape."""
    from onnx import TensorProto, helper

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    if opset >= 13:
        axes = "speaker_row__axes"
        model.graph.initializer.append(helper.make_tensor(axes, TensorProto.INT64, [1], [0]))
        return helper.make_node("Squeeze", [SPEAKER_INPUT, axes], [row])
    return helper.make_node("Squeeze", [SPEAKER_INPUT], [row], axes=[0])


def _copy(model: Any) -> Any:
    from onnx import ModelProto

    copy = ModelProto()
    copy.CopyFrom(model)
    return copy


def _prune(graph: Any) -> None:
    """Drop nodes nothing reads and initializers no node reads."""
    needed = {o.name for o in graph.output}
    kept = []
    for node in reversed(graph.node):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(i for i in node.input if i)
    kept.reverse()
    del graph.node[:]
    graph.node.extend(kept)
    initializers = [i for i in graph.initializer if i.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    produced = {o for n in kept for o in n.output}
    info = [v for v in graph.value_info if v.name in produced]
    del graph.value_info[:]
    graph.value_info.extend(info)


def _initializer_bytes(graph: Any) -> int:
    from onnx import helper

    total = 0
    for tensor in graph.initializer:
        count = int(np.prod(tensor.dims)) if tensor.dims else 1
        total += count * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return total


def speaker_tables_in_files(paths: Mapping[str, Path], n_speakers: int) -> dict[str, bool]:
    """:func:`speaker_tables` on the graphs saved at ``paths`` (weights inside)."""
    import onnx

    parts = {name: onnx.load(str(path)) for name, path in paths.items()}
    folded = speaker_tables(parts, n_speakers)
    for name, model in parts.items():
        if folded[name]:
            onnx.save(model, str(paths[name]))
    return folded
