"""The BERT's relative-position tables cut to the positions each call reads
(:mod:`yomiage.export.bert_positions`): the same features bit for bit, on graphs made
here with DeBERTa's pattern and on the test voice's BERT; what is not the pattern is
left alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from yomiage.export.bert_positions import slice_in, slice_position_tables
from yomiage.runtime.engines.onnx_session import session_options

HEADS, POSITIONS, SIZE, SPAN = 4, 16, 8, 8  # positions: 2 * SPAN relative distances


def _graph(
    *,
    clip_low: float = 0,
    trans_b: int = 1,
    gather_axis: int = -1,
    layers: int = 2,
    index_out: bool = False,
) -> onnx.ModelProto:
    """``layers`` of DeBERTa's pattern: queries ``[batch * heads, tokens, size]`` times a
    table ``[heads, positions, size]`` tiled over the batch, transposed; of each product
    the column of each pair's relative position, clipped into the table (one index
    tensor for every layer, as the exported BERT shares it). ``index_out``: the indices
    are an output too (read by more than the products' picks)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Shape", ["mask"], ["mask_shape"]),
        helper.make_node("Slice", ["mask_shape", "zero", "one"], ["batch"]),
        helper.make_node("Slice", ["mask_shape", "one", "two"], ["tokens"]),
        helper.make_node("Concat", ["batch", "r1", "r1"], ["repeats"], axis=0),
        helper.make_node("Squeeze", ["tokens"], ["n"]),
        helper.make_node("Range", ["zero_s", "n", "one_s"], ["row"]),
        helper.make_node("Unsqueeze", ["row", "one"], ["column"]),
        helper.make_node("Sub", ["row", "column"], ["relative"]),  # [tokens, tokens]
        helper.make_node("Add", ["relative", "span"], ["shifted"]),
        helper.make_node("Clip", ["shifted", "low", "high"], ["clipped"]),
        helper.make_node("Unsqueeze", ["clipped", "zero"], ["clipped3"]),
        helper.make_node("Shape", ["queries"], ["q_shape"]),
        helper.make_node("Slice", ["q_shape", "zero", "one"], ["bh"]),
        helper.make_node("Concat", ["bh", "tokens", "tokens"], ["index_shape"], axis=0),
        helper.make_node("Expand", ["clipped3", "index_shape"], ["index"]),
    ]
    ints = {"zero": 0, "one": 1, "two": 2, "r1": 1}
    initializers = [numpy_helper.from_array(np.array([v], np.int64), k) for k, v in ints.items()]
    initializers += [
        numpy_helper.from_array(np.array(v, np.int64), k)
        for k, v in {"zero_s": 0, "one_s": 1, "span": SPAN, "high": POSITIONS - 1}.items()
    ]
    initializers.append(numpy_helper.from_array(np.array(int(clip_low), np.int64), "low"))
    outputs = []
    for layer in range(layers):
        table = f"table{layer}"
        shape = (HEADS, POSITIONS, SIZE) if trans_b else (HEADS, SIZE, POSITIONS)
        values = rng.standard_normal(shape).astype(np.float32)
        initializers.append(numpy_helper.from_array(values, table))
        nodes += [
            helper.make_node("Tile", [table, "repeats"], [f"tiled{layer}"], name=f"tile{layer}"),
            helper.make_node("FusedMatMul", ["queries", f"tiled{layer}"], [f"scores{layer}"],
                             name=f"product{layer}", domain="com.microsoft", transB=trans_b),
            helper.make_node("GatherElements", [f"scores{layer}", "index"], [f"picked{layer}"],
                             name=f"pick{layer}", axis=gather_axis),
        ]  # fmt: skip
        outputs.append(
            helper.make_tensor_value_info(f"picked{layer}", TensorProto.FLOAT, ["bh", "t", "t"])
        )
    if index_out:
        nodes.append(helper.make_node("Identity", ["index"], ["index_copy"]))
        outputs.append(
            helper.make_tensor_value_info("index_copy", TensorProto.INT64, ["bh", "t", "t"])
        )
    inputs = [
        helper.make_tensor_value_info("queries", TensorProto.FLOAT, ["bh", "t", SIZE]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, ["b", "t"]),
    ]
    graph = helper.make_graph(nodes, "positions", inputs, outputs, initializers)
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _run(model: onnx.ModelProto, batch: int, tokens: int) -> list[np.ndarray]:
    import onnxruntime as ort

    rng = np.random.default_rng(batch * 100 + tokens)
    feeds = {
        "queries": rng.standard_normal((batch * HEADS, tokens, SIZE)).astype(np.float32),
        "mask": np.ones((batch, tokens), np.int64),
    }
    session = ort.InferenceSession(model.SerializeToString(), session_options(1))
    return [np.asarray(out) for out in session.run(None, feeds)]


@pytest.mark.parametrize("index_out", [False, True], ids=["shifted-before-expand", "shifted"])
@pytest.mark.parametrize(("batch", "tokens"), [(1, 2), (1, 3), (2, 5), (3, 8), (1, 20)])
def test_sliced_tables_pick_the_same_scores_bit_for_bit(
    batch: int, tokens: int, index_out: bool
) -> None:
    """Short calls read a few rows of each table, long ones (20 tokens: positions
    clipped at both ends) all of them. (Every BERT call has two tokens or more: its
    ``[CLS]`` and ``[SEP]``.)"""
    whole = _graph(index_out=index_out)
    sliced = _graph(index_out=index_out)
    assert slice_in(sliced.graph) == 2
    onnx.checker.check_model(sliced)
    ops = [n.op_type for n in sliced.graph.node]
    assert ops.count("ReduceMin") == 1 and ops.count("Slice") == 3 + 2  # one span, shared
    for got, expected in zip(_run(sliced, batch, tokens), _run(whole, batch, tokens), strict=True):
        assert got.shape == expected.shape
        assert np.array_equal(got, expected)


def test_one_token_differs_by_float_rounding_at_most() -> None:
    """A one-column product is summed in another order by ONNX Runtime (its
    matrix-vector path): no call of the BERT has one token, and this is how far it goes."""
    sliced = _graph()
    slice_in(sliced.graph)
    for got, expected in zip(_run(sliced, 2, 1), _run(_graph(), 2, 1), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "model",
    [
        _graph(clip_low=-1),  # an index that may be negative (counts from the end)
        _graph(trans_b=0),  # not the transposed product
        _graph(gather_axis=1),  # picks along another axis
    ],
    ids=["may-be-negative", "not-transposed", "other-axis"],
)
def test_what_is_not_the_pattern_is_left_as_it_is(model: onnx.ModelProto) -> None:
    before = model.SerializeToString()
    assert slice_in(model.graph) == 0
    assert model.SerializeToString() == before


def test_the_graph_file_is_rewritten_in_place_once_and_its_weights_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bert.onnx"
    # the tables in the weights file, the small constants inline
    onnx.save(_graph(), str(path), save_as_external_data=True, location="bert.onnx.data",
              size_threshold=64)  # fmt: skip
    weights = (tmp_path / "bert.onnx.data").read_bytes()
    assert slice_position_tables(path) == 2
    rewritten = path.read_bytes()
    assert slice_position_tables(path) == 0  # nothing left to do: the file as it was
    assert path.read_bytes() == rewritten
    assert (tmp_path / "bert.onnx.data").read_bytes() == weights
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert.onnx", "bert.onnx.data"]
    for got, expected in zip(_run(onnx.load(str(path)), 2, 3), _run(_graph(), 2, 3), strict=True):
        assert np.array_equal(got, expected)


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
        slice_position_tables(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["bert.onnx"]


def test_the_test_voices_bert_gives_the_same_features_sliced(test_voice: Path) -> None:
    """The BERT as ``yomiage convert`` writes it (the test voice's q8), at one and
    several sentences a call, short and past the table's span."""
    import onnxruntime as ort

    graph = test_voice / "bert" / "bert_q8.onnx"
    model = onnx.load(str(graph), load_external_data=False)
    assert slice_in(model.graph) > 0
    options = session_options(1)
    options.add_session_config_entry(
        "session.model_external_initializers_file_folder_path", str(graph.parent)
    )
    sliced = ort.InferenceSession(model.SerializeToString(), options)
    whole = ort.InferenceSession(str(graph), session_options(1))
    rng = np.random.default_rng(7)
    for batch, tokens in [(1, 2), (1, 9), (3, 14), (2, 300)]:
        ids = rng.integers(5, 100, (batch, tokens)).astype(np.int64)
        mask = np.ones((batch, tokens), np.int64)
        mask[1:, tokens // 2 :] = 0
        feeds = {"input_ids": ids, "attention_mask": mask}
        assert np.array_equal(sliced.run(None, feeds)[0], whole.run(None, feeds)[0])
