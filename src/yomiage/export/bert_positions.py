"""DeBERTa's relative-position tables broadcast over the batch instead of tiled.

Exported and folded, each of the BERT's attention layers holds its two position
projections as constants ``[heads, positions, head_size]`` and repeats them once
per sentence of the batch (a ``Tile``) before multiplying them with the queries or
keys ``[batch * heads, tokens, head_size]``. That copy is 44 x 2 MB per call on the
full-size BERT, 18% of a 60-token call on ONNX Runtime (measured: 17.7 of 89 ms, the
Xeon with AMX, 2 threads). Multiplying ``[batch, heads, tokens, head_size]`` by the
table itself broadcasts it instead, with the same products in the same order (the
features come out bit for bit the same): each such ``Tile`` and its
``FusedMatMul`` become a ``Reshape``, the ``FusedMatMul`` on the table, and a
``Reshape`` back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from yomiage.atomic import write_atomic

_PREFIX = "broadcast_positions_"


def broadcast_position_tables(path: Path) -> int:
    """Rewrite the graph file at ``path`` in place (its weights file is not touched);
    returns how many tables are broadcast now (0: nothing of the kind, the file as
    it was)."""
    model = onnx.load(str(path), load_external_data=False)
    count = broadcast_in(model.graph)
    if count:  # the weights stay where the graph's references say: only the graph changes
        write_atomic(path, model.SerializeToString())
    return count


def broadcast_in(graph: onnx.GraphProto) -> int:
    """:func:`broadcast_position_tables` on ``graph`` in memory."""
    tables = {t.name: t for t in graph.initializer if len(t.dims) == 3}
    inline = [t for t in graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL]
    constants = {t.name: numpy_helper.to_array(t) for t in inline if list(t.dims) == [1]}
    producers = {out: node for node in graph.node for out in node.output}
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    tiles = {}  # each Tile's name -> the one node multiplying by what it makes
    for node in graph.node:
        readers = users.get(node.output[0], []) if node.op_type == "Tile" else []
        if (
            node.input[0] in tables
            and len(readers) == 1
            and _takes_table_as_b(readers[0], node.output[0])
            and _repeats_the_batch(producers.get(node.input[1]), constants)
        ):
            tiles[node.name] = readers[0]
    if not tiles:
        return 0
    graph.initializer.extend(
        numpy_helper.from_array(np.array([value], np.int64), f"{_PREFIX}{value}")
        for value in (-1, 1, 2)
    )
    made_dims: set[int] = set()
    replaced = {product.name: tile for tile in graph.node if tile.name in tiles
                for product in [tiles[tile.name]]}  # fmt: skip
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.name in tiles:
            continue
        tile = replaced.get(node.name)
        if tile is None:
            nodes.append(node)
            continue
        table = tile.input[0]
        heads, positions, size = tables[table].dims
        for value in (heads, positions, size):
            if value not in made_dims and value not in (-1, 1, 2):
                made_dims.add(value)
                graph.initializer.append(
                    numpy_helper.from_array(np.array([value], np.int64), f"{_PREFIX}{value}")
                )
        nodes += _broadcast(node, table, heads, positions, size)
    del graph.node[:]
    graph.node.extend(nodes)
    return len(tiles)


def _takes_table_as_b(node: onnx.NodeProto, tiled: str) -> bool:
    """Whether ``node`` multiplies its first input by the tiled table, transposed, as
    the exported DeBERTa does (ONNX Runtime's ``FusedMatMul``, nothing else set)."""
    if node.op_type != "FusedMatMul" or len(node.input) != 2 or node.input[1] != tiled:
        return False
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    plain = all(not attributes.get(name, 0) for name in ("transA", "transBatchA", "transBatchB"))
    return plain and attributes.get("transB", 0) == 1 and attributes.get("alpha", 1.0) == 1.0


def _repeats_the_batch(repeats: onnx.NodeProto | None, constants: dict[str, np.ndarray]) -> bool:
    """Whether a ``Tile``'s repeats are ``[batch, 1, 1]``: a ``Concat`` of something and
    two constant ones."""
    if repeats is None or repeats.op_type != "Concat" or len(repeats.input) != 3:
        return False
    ones = [constants.get(name) for name in repeats.input[1:]]
    return all(one is not None and one.tolist() == [1] for one in ones)


def _broadcast(
    product: onnx.NodeProto, table: str, heads: int, positions: int, size: int
) -> list[onnx.NodeProto]:
    """``product``'s first input ``[batch * heads, tokens, size]`` reshaped to ``[batch,
    heads, tokens, size]``, multiplied by ``table`` (broadcast), reshaped back to
    ``[batch * heads, tokens, positions]`` under ``product``'s own output name."""
    name, queries = product.name, product.input[0]

    def n(part: str) -> str:
        return f"{_PREFIX}{name}_{part}"

    def c(value: int) -> str:
        return f"{_PREFIX}{value}"

    multiply = helper.make_node("FusedMatMul", [n("by_head"), table], [n("broadcast")],
                                name=name, domain=product.domain)  # fmt: skip
    multiply.attribute.extend(product.attribute)
    return [
        helper.make_node("Shape", [queries], [n("shape")], name=n("shape")),
        helper.make_node("Slice", [n("shape"), c(1), c(2)], [n("tokens")], name=n("tokens")),
        helper.make_node(
            "Concat",
            [c(-1), c(heads), n("tokens"), c(size)],
            [n("shape4")],
            axis=0,
            name=n("shape4"),
        ),
        helper.make_node(
            "Concat", [c(-1), n("tokens"), c(positions)], [n("shape3")], axis=0, name=n("shape3")
        ),
        helper.make_node("Reshape", [queries, n("shape4")], [n("by_head")], name=n("by_head")),
        multiply,
        helper.make_node(
            "Reshape", [n("broadcast"), n("shape3")], list(product.output), name=n("back")
        ),
    ]
