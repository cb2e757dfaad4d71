"""The BERT's relative-position tables broadcast over the batch instead of tiled
(:mod:`yomiage.export.bert_positions`): the same features bit for bit, on graphs made
here with DeBERTa's pattern and on the reference BERT as ``yomiage convert`` writes it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="rewriting graphs needs onnx (the [torch] extra)")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from yomiage.export.bert_positions import broadcast_in, broadcast_position_tables  # noqa: E402
from yomiage.runtime.engines.onnx_session import session_options  # noqa: E402

HEADS, POSITIONS, SIZE = 4, 16, 8


def _graph(*, repeats: tuple[int, int] = (1, 1), trans_b: int = 1, table: bool = True,
           op: str = "FusedMatMul") -> onnx.ModelProto:  # fmt: skip
    """``queries [batch * heads, tokens, size]`` times a position table tiled over the
    batch (``[batch] + repeats``), transposed, as the exported DeBERTa has it."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Shape", ["mask"], ["mask_shape"]),
        helper.make_node("Slice", ["mask_shape", "zero", "one"], ["batch"]),
        helper.make_node("Concat", ["batch", "r1", "r2"], ["repeats"], axis=0),
        helper.make_node("Tile", ["table", "repeats"], ["tiled"], name="tile"),
    ]
    attributes = {"transB": trans_b} if op == "FusedMatMul" else {}
    domain = "com.microsoft" if op == "FusedMatMul" else ""
    b = "tiled"
    if op == "MatMul":
        nodes.append(helper.make_node("Transpose", ["tiled"], ["tiled_t"], perm=[0, 2, 1]))
        b = "tiled_t"
    nodes.append(helper.make_node(op, ["queries", b], ["scores"], name="product",
                                  domain=domain, **attributes))  # fmt: skip
    initializers = [
        numpy_helper.from_array(np.array([v], np.int64), name)
        for name, v in (("zero", 0), ("one", 1), ("r1", repeats[0]), ("r2", repeats[1]))
    ]
    shape = (HEADS, POSITIONS, SIZE) if trans_b else (HEADS, SIZE, POSITIONS)
    values = rng.standard_normal(shape).astype(np.float32)
    inputs = [
        helper.make_tensor_value_info("queries", TensorProto.FLOAT, ["bh", "t", SIZE]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, ["b", "t"]),
    ]
    if table:
        initializers.append(numpy_helper.from_array(values, "table"))
    else:
        inputs.append(helper.make_tensor_value_info("table", TensorProto.FLOAT, list(shape)))
    graph = helper.make_graph(nodes, "positions", inputs,
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["bh", "t", POSITIONS])],
                              initializers)  # fmt: skip
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _run(model: onnx.ModelProto, batch: int, tokens: int) -> np.ndarray:
    import onnxruntime as ort

    rng = np.random.default_rng(batch * 100 + tokens)
    feeds = {
        "queries": rng.standard_normal((batch * HEADS, tokens, SIZE)).astype(np.float32),
        "mask": np.ones((batch, tokens), np.int64),
    }
    session = ort.InferenceSession(model.SerializeToString(), session_options(1))
    return np.asarray(session.run(None, feeds)[0])


@pytest.mark.parametrize(("batch", "tokens"), [(1, 5), (3, 7), (2, 1)])
def test_a_broadcast_table_gives_the_same_scores_bit_for_bit(batch: int, tokens: int) -> None:
    tiled = _graph()
    broadcast = _graph()
    assert broadcast_in(broadcast.graph) == 1
    assert "Tile" not in {n.op_type for n in broadcast.graph.node}
    onnx.checker.check_model(broadcast)
    expected = _run(tiled, batch, tokens)
    got = _run(broadcast, batch, tokens)
    assert got.shape == expected.shape == (batch * HEADS, tokens, POSITIONS)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize(
    "model",
    [
        _graph(repeats=(2, 1)),  # repeats more than the batch
        _graph(table=False),  # a table that is not a constant
        _graph(trans_b=0),  # not the transposed product
        _graph(op="MatMul"),  # not ONNX Runtime's fused product
    ],
    ids=["repeats", "not-constant", "not-transposed", "plain-matmul"],
)
def test_what_is_not_the_pattern_is_left_as_it_is(model: onnx.ModelProto) -> None:
    before = model.SerializeToString()
    assert broadcast_in(model.graph) == 0
    assert model.SerializeToString() == before


def test_the_graph_file_is_rewritten_in_place_once_and_its_weights_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bert.onnx"
    onnx.save(
        _graph(),
        str(path),
        save_as_external_data=True,
        location="bert.onnx.data",
        size_threshold=64,
    )  # fmt: skip (the table there, its small constants inline)
    weights = (tmp_path / "bert.onnx.data").read_bytes()
    assert broadcast_position_tables(path) == 1
    rewritten = path.read_bytes()
    assert broadcast_position_tables(path) == 0  # nothing left to do: the file as it was
    assert path.read_bytes() == rewritten
    assert (tmp_path / "bert.onnx.data").read_bytes() == weights
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert.onnx", "bert.onnx.data"]
    loaded = onnx.load(str(path))
    assert np.array_equal(_run(loaded, 2, 3), _run(_graph(), 2, 3))


def test_a_rewrite_that_fails_leaves_the_graph_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yomiage.export import bert_positions

    path = tmp_path / "bert.onnx"
    onnx.save(_graph(), str(path))
    before = path.read_bytes()

    def failing(*args: object, **kwargs: object) -> None:
        raise MemoryError("cut off midway")

    monkeypatch.setattr(bert_positions, "write_atomic", failing)
    with pytest.raises(MemoryError):
        broadcast_position_tables(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["bert.onnx"]


def test_the_converted_reference_bert_has_no_tiled_table(reference_bundle: Path) -> None:
    """``yomiage convert`` writes the BERT broadcast; the conformance tests compare its
    features with the reference's (tests/test_conformance*.py)."""
    for name in ("bert.onnx", "bert_q8.onnx"):
        model = onnx.load(str(reference_bundle / "bert" / name), load_external_data=False)
        ops = {n.op_type for n in model.graph.node}
        assert "Tile" not in ops and "FusedMatMul" in ops, name
