"""DeBERTa's relative-position tables cut to the positions a call reads.

Exported and folded, each attention layer of the BERT holds its two position
projections as constants ``[heads, 512, head_size]`` (2 MB each, 44 of them in the
full-size BERT), repeats them once per sentence of the batch (a ``Tile``), multiplies
the queries or keys by all 512 positions (a ``FusedMatMul``) and then picks, for each
pair of tokens, the one column of their relative position (a ``GatherElements`` whose
indices are the relative positions clipped to the table). A call of ``n`` tokens reads
at most ``2n - 1`` of the 512: for a 40-token sentence the copies and products of the
other 433 are thrown away, and every page of every table is read on every call, so
all 88 MB stay resident.

Here each such table is sliced first to the span of indices the call's positions
cover (``ReduceMin`` .. ``ReduceMax`` of the indices, computed once per index tensor
and shared by every layer), and the indices are shifted by the span's start (before
the ``Expand`` that copies them per head and sentence, where one does). Each
product that is kept is the same dot product of the same numbers, and the column
``GatherElements`` picks is the same one: the features come out bit for bit the same
(``tests/test_bert_positions.py``; every call has two tokens or more, its ``[CLS]``
and ``[SEP]``: a one-token call's single column would be summed in another order by
ONNX Runtime's matrix-vector path), for less work and fewer pages read on all but
the longest calls.

Applied by ``yomiage convert`` to every BERT graph it writes; a graph without the
pattern is left as it is.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from yomiage.atomic import write_atomic
from yomiage.runtime.sliced_berts import SPAN_PREFIX

_PREFIX = SPAN_PREFIX
# Between the clipped positions and the index tensor: shape changes only.
_SHAPE_ONLY = ("Squeeze", "Unsqueeze", "Reshape", "Expand")


@dataclass(frozen=True)
class _Chain:
    """One table's ``Tile`` and the ``GatherElements`` that picks from its product."""

    tile: onnx.NodeProto
    gather: onnx.NodeProto


def slice_position_tables(path: Path) -> int:
    """Rewrite the graph file at ``path`` in place (its weights file is not touched);
    returns how many tables are sliced now (0: nothing of the kind, the file as it
    was)."""
    model = onnx.load(str(path), load_external_data=False)
    count = slice_in(model.graph)
    if count:  # the weights stay where the graph's references say: only the graph changes
        write_atomic(path, model.SerializeToString())
    return count


def slice_in(graph: onnx.GraphProto) -> int:
    """:func:`slice_position_tables` on ``graph`` in memory."""
    tables = {t.name for t in graph.initializer if len(t.dims) == 3}
    producers = {out: node for node in graph.node for out in node.output}
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    constants = _small_constants(graph)
    chains = [
        chain
        for node in graph.node
        if node.op_type == "Tile" and node.input[0] in tables
        for chain in [_chain(node, users)]
        if chain is not None and _never_negative(chain.gather.input[1], producers, constants)
    ]
    if not chains:
        return 0
    spans: dict[str, list[onnx.NodeProto]] = {}  # an index tensor -> the nodes of its span
    shifted_at_expand: set[str] = set()
    for chain in chains:
        index = chain.gather.input[1]
        if index in spans:
            continue
        values = _values_of(index, producers)
        pickers = [c.gather for c in chains if c.gather.input[1] == index]
        if values != index and all(
            any(u is g for g in pickers) for u in users.get(index, [])
        ):  # shift what the Expand broadcasts (tokens x tokens), not its copies
            spans[index] = _span_nodes(values, values, len(spans))
            producers[index].input[0] = spans[index][5].output[0]
            shifted_at_expand.add(index)
        else:
            spans[index] = _span_nodes(index, values, len(spans))
    before: dict[str, list[onnx.NodeProto]] = {}  # a node's name -> nodes to put before it
    for number, chain in enumerate(chains):
        index = chain.gather.input[1]
        span = spans[index]
        start, end, shifted = span[1].output[0], span[4].output[0], span[5].output[0]
        table = chain.tile.input[0]
        sliced = f"{_PREFIX}table{number}"
        cut = helper.make_node("Slice", [table, start, end, f"{_PREFIX}axis"], [sliced],
                               name=sliced)  # fmt: skip
        before.setdefault(chain.tile.name, []).append(cut)
        chain.tile.input[0] = sliced
        if index not in shifted_at_expand:
            chain.gather.input[1] = shifted
    graph.initializer.extend([
        numpy_helper.from_array(np.array([1], np.int64), f"{_PREFIX}axis"),
        numpy_helper.from_array(np.array([1], np.int64), f"{_PREFIX}one"),
    ])  # fmt: skip
    ordered: list[onnx.NodeProto] = []
    for node in graph.node:
        ordered += before.get(node.name, [])
        ordered.append(node)
    for nodes in spans.values():
        ordered += nodes
    del graph.node[:]
    graph.node.extend(_in_order(ordered))
    return len(chains)


def _chain(tile: onnx.NodeProto, users: dict[str, list[onnx.NodeProto]]) -> _Chain | None:
    """The table's chain if it is the exported DeBERTa's: the tiled table multiplied,
    transposed, as the second input of one ``FusedMatMul`` (nothing else set), whose
    product only a ``GatherElements`` on its last axis reads."""
    readers = users.get(tile.output[0], [])
    if len(readers) != 1:
        return None
    product = readers[0]
    if product.op_type != "FusedMatMul" or list(product.input[1:]) != [tile.output[0]]:
        return None
    attributes = {a.name: helper.get_attribute_value(a) for a in product.attribute}
    if any(attributes.get(name, 0) for name in ("transA", "transBatchA", "transBatchB")):
        return None
    if attributes.get("transB", 0) != 1 or attributes.get("alpha", 1.0) != 1.0:
        return None
    pickers = users.get(product.output[0], [])
    if len(pickers) != 1 or pickers[0].op_type != "GatherElements":
        return None
    gather = pickers[0]
    axis = next((helper.get_attribute_value(a) for a in gather.attribute if a.name == "axis"), 0)
    if gather.input[0] != product.output[0] or axis != -1:
        return None
    return _Chain(tile, gather)


def _values_of(index: str, producers: dict[str, onnx.NodeProto]) -> str:
    """The smallest tensor with the same values as ``index``: what an ``Expand``
    broadcast (its minimum and maximum are the index's)."""
    node = producers.get(index)
    return node.input[0] if node is not None and node.op_type == "Expand" else index


def _never_negative(
    index: str, producers: dict[str, onnx.NodeProto], constants: dict[str, np.ndarray]
) -> bool:
    """Whether ``index`` is positions clipped from below at 0 or more, reshaped only: a
    negative index counts from the end, which a shift would not keep."""
    node = producers.get(index)
    while node is not None and node.op_type in _SHAPE_ONLY:
        node = producers.get(node.input[0])
    if node is None or node.op_type != "Clip" or len(node.input) < 2:
        return False
    low = constants.get(node.input[1])
    return low is not None and low.size == 1 and float(low.reshape(())) >= 0


def _span_nodes(index: str, values: str, number: int) -> list[onnx.NodeProto]:
    """Nodes making ``[start]``, ``[end]`` (the span of ``values``) and ``index`` (the
    indices, or the values an ``Expand`` broadcasts into them) less ``start``; in this
    order: lowest, start, highest, top, end, shifted."""

    def n(part: str) -> str:
        return f"{_PREFIX}{number}_{part}"

    shape = f"{_PREFIX}one"
    return [
        helper.make_node("ReduceMin", [values], [n("lowest")], keepdims=0, name=n("lowest")),
        helper.make_node("Reshape", [n("lowest"), shape], [n("start")], name=n("start")),
        helper.make_node("ReduceMax", [values], [n("highest")], keepdims=0, name=n("highest")),
        helper.make_node("Add", [n("highest"), f"{_PREFIX}axis"], [n("top")], name=n("top")),
        helper.make_node("Reshape", [n("top"), shape], [n("end")], name=n("end")),
        helper.make_node("Sub", [index, n("start")], [n("shifted")], name=n("shifted")),
    ]


def _in_order(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """``nodes`` so that each comes after those making its inputs, otherwise in their
    order (a span's nodes go where its index is first ready)."""
    producer = {out: i for i, node in enumerate(nodes) for out in node.output}
    waiting = [{name for name in node.input if name and name in producer} for node in nodes]
    readers: dict[int, list[int]] = {}
    for i, needs in enumerate(waiting):
        for name in needs:
            readers.setdefault(producer[name], []).append(i)
    missing = [len(needs) for needs in waiting]
    ready = [i for i, count in enumerate(missing) if count == 0]
    heapq.heapify(ready)
    out: list[onnx.NodeProto] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(nodes[i])
        for reader in readers.get(i, []):
            missing[reader] -= 1
            if missing[reader] == 0:
                heapq.heappush(ready, reader)
    if len(out) != len(nodes):
        raise ValueError("the BERT graph has a cycle after slicing its position tables")
    return out


def _small_constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Initializers and ``Constant`` outputs of a few values, by name."""
    found = {
        t.name: numpy_helper.to_array(t)
        for t in graph.initializer
        if t.data_location != onnx.TensorProto.EXTERNAL and int(np.prod(t.dims)) <= 16
    }
    for node in graph.node:
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and int(np.prod(value.dims)) <= 16:
                found[node.output[0]] = numpy_helper.to_array(value)
    return found
