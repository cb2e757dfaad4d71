"""The decoder's wide stages as 2-D convolutions: the same samples, whole or in windows."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.aivm_files import AIVMX
from yomiage.aivmx.reader import read_aivmx
from yomiage.aivmx.split import split_graphs
from yomiage.export.decoder_layout import (
    MIN_CHANNELS,
    relayout,
    stages_as_1d,
    stages_as_2d,
    two_d_from,
)
from yomiage.export.decoder_trims import add_stage_trims
from yomiage.runtime.stage_trims import TRIM_INPUT


def _session(model: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def decoder_1d() -> Any:
    """A real decoder graph as it is before the rewrite: the tiny AIVMX voice's, trimmed."""
    decoder = split_graphs(read_aivmx(AIVMX).model)["decoder"]
    add_stage_trims(decoder)
    return decoder


def _rewritten(decoder: Any, min_channels: int) -> tuple[Any, int]:
    copy = onnx.ModelProto()
    copy.CopyFrom(decoder)
    return copy, stages_as_2d(copy, min_channels=min_channels)


def _feeds(session: Any, frames: int, trims: np.ndarray | None = None) -> dict[str, Any]:
    rng = np.random.default_rng(frames)
    shapes = {i.name: i.shape for i in session.get_inputs()}
    feeds = {
        "z": rng.standard_normal((1, shapes["z"][1], frames), dtype=np.float32),
        "g": rng.standard_normal((1, shapes["g"][1], 1), dtype=np.float32),
    }
    if trims is not None:
        feeds[TRIM_INPUT] = trims
    return feeds


def test_every_stage_in_2d_makes_the_same_samples(decoder_1d: Any) -> None:
    """min_channels=1 takes every stage of the tiny voice (the real one takes its wide
    ones): whole sentences and trimmed windows come out as the 1-D graph's."""
    model, convs = _rewritten(decoder_1d, 1)
    upsamplers = sum(n.op_type == "ConvTranspose" for n in decoder_1d.graph.node)
    assert sum(n.op_type == "Unsqueeze" for n in model.graph.node) == upsamplers
    kernels = {t.name: len(t.dims) for t in model.graph.initializer}
    staged = False  # every convolution after the first upsampler is 2-D, none before
    ranks = []
    for node in model.graph.node:
        staged = staged or node.op_type == "ConvTranspose"
        if node.op_type == "Conv":
            ranks.append((staged, kernels[node.input[1]]))
    assert convs == sum(s for s, _ in ranks) > 0
    assert all(rank == (4 if s else 3) for s, rank in ranks)
    before, after = _session(decoder_1d), _session(model)
    trims = np.array([[1, 2], [3, 0], [0, 5], [2, 2]], np.int64)[: upsamplers - 1]
    for frames, fed in ((1, None), (37, None), (40, trims)):
        expected = before.run(None, _feeds(before, frames, fed))[0]
        got = after.run(None, _feeds(after, frames, fed))[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_narrow_stages_stay_1d(decoder_1d: Any) -> None:
    widths = [
        next(t for t in decoder_1d.graph.initializer if t.name == n.input[1]).dims[1]
        for n in decoder_1d.graph.node
        if n.op_type == "ConvTranspose"
    ]
    model, convs = _rewritten(decoder_1d, max(widths) + 1)
    assert convs == 0
    assert not any(n.op_type in ("Unsqueeze", "Squeeze") for n in model.graph.node)
    assert MIN_CHANNELS == 64  # the production threshold: see decoder_layout's measurements


def test_a_decoder_is_rewritten_once(decoder_1d: Any) -> None:
    model, _ = _rewritten(decoder_1d, 1)
    with pytest.raises(ValueError, match="2-D already"):
        stages_as_2d(model, min_channels=1)


def _stage_with(constant: np.ndarray) -> Any:
    """ConvTranspose -> Add(constant) -> LeakyRelu -> Conv -> out: a stage whose sum
    reads a constant of the given shape."""
    channels = 4
    rng = np.random.default_rng(0)
    weights = {
        "up": rng.standard_normal((channels, channels, 4)).astype(np.float32),
        "k": rng.standard_normal((channels, channels, 3)).astype(np.float32),
        "c": constant.astype(np.float32),
    }
    nodes = [
        helper.make_node("ConvTranspose", ["x", "up"], ["u"], strides=[2], pads=[1, 1]),
        helper.make_node("Add", ["u", "c"], ["a"]),
        helper.make_node("LeakyRelu", ["a"], ["l"], alpha=0.1),
        helper.make_node("Conv", ["l", "k"], ["y"], pads=[1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "stage",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, "T2"])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    ("shape", "joins"), [((), True), ((1,), True), ((1, 1, 1), True), ((4, 1), False)]
)
def test_a_constant_that_would_broadcast_differently_keeps_its_sum_1d(
    shape: tuple[int, ...], joins: bool
) -> None:
    """A [C, 1] bias broadcasts over channels against [1, C, T] but over the height axis
    against [1, C, 1, T]: such a sum (and what follows it) stays 1-D."""
    stage = _stage_with(np.arange(1, 1 + int(np.prod(shape))).reshape(shape))
    model, convs = _rewritten(stage, 1)
    assert convs == (1 if joins else 0)
    x = np.random.default_rng(1).standard_normal((1, 4, 9)).astype(np.float32)
    expected = _session(stage).run(None, {"x": x})[0]
    got = _session(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)  # float rounding only


def test_an_aivmx_cut_runs_its_wide_stages_2d(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiny voice has no stage of 64 channels, so the threshold comes down to 1."""
    from yomiage.aivmx.bundle import write_bundle
    from yomiage.export import decoder_layout

    monkeypatch.setattr(decoder_layout, "MIN_CHANNELS", 1)
    bundle = write_bundle(read_aivmx(AIVMX), tmp_path / "bundle")
    decoder = onnx.load(str(bundle / "decoder.onnx"), load_external_data=False)
    assert any(n.op_type == "Unsqueeze" for n in decoder.graph.node)
    assert any(len(t.dims) == 4 for t in decoder.graph.initializer)
    with pytest.raises(ValueError, match="2-D already"):
        stages_as_2d(decoder)


@pytest.mark.parametrize("min_channels", [1, 3])
def test_the_2d_rewrite_undone_gives_the_1d_graph_back(decoder_1d: Any, min_channels: int) -> None:
    model, convs = _rewritten(decoder_1d, min_channels)
    assert two_d_from(decoder_1d) is None
    assert convs > 0 and two_d_from(model) is not None and two_d_from(model) >= min_channels
    assert stages_as_1d(model) == convs
    assert two_d_from(model) is None
    ops = [(n.op_type, list(n.input), list(n.output)) for n in model.graph.node]
    assert ops == [(n.op_type, list(n.input), list(n.output)) for n in decoder_1d.graph.node]
    kernels = {t.name: list(t.dims) for t in model.graph.initializer}
    assert kernels == {t.name: list(t.dims) for t in decoder_1d.graph.initializer}
    assert [(n.name, str(n.attribute)) for n in model.graph.node] == [
        (n.name, str(n.attribute)) for n in decoder_1d.graph.node
    ]
    assert stages_as_1d(model) == 0  # already 1-D: nothing to undo


def test_a_2d_decoder_takes_another_layout_with_the_same_samples(decoder_1d: Any) -> None:
    widths = sorted(
        next(t for t in decoder_1d.graph.initializer if t.name == n.input[1]).dims[1]
        for n in decoder_1d.graph.node
        if n.op_type == "ConvTranspose"
    )
    wide, narrow = widths[-1], widths[0]
    model, _ = _rewritten(decoder_1d, narrow)  # every stage 2-D, as a bundle might have it
    assert two_d_from(model) == narrow
    relayout(model, wide)  # only the widest stage stays 2-D
    assert two_d_from(model) == wide
    assert two_d_from(_rewritten(decoder_1d, wide)[0]) == wide
    before, after = _session(decoder_1d), _session(model)
    for frames in (1, 29):
        expected = before.run(None, _feeds(before, frames))[0]
        np.testing.assert_allclose(after.run(None, _feeds(after, frames))[0], expected, atol=1e-6)


def test_an_axis_merged_with_other_constants_is_kept_for_them(decoder_1d: Any) -> None:
    """ONNX Runtime's offline optimizer merges equal constants: in a converted bundle a
    trim's Slice reads the rewrite's axis [2]. Undoing the rewrite keeps it for them."""
    model, _ = _rewritten(decoder_1d, 1)
    axis = next(n.input[1] for n in model.graph.node if n.op_type == "Unsqueeze")
    model.graph.node.append(helper.make_node("Identity", [axis], ["axis_copy"]))
    model.graph.output.append(helper.make_tensor_value_info("axis_copy", TensorProto.INT64, [1]))
    relayout(model, 1)  # undone and done again: the axis name was free for it
    stages_as_1d(model)
    session = _session(model)
    np.testing.assert_array_equal(session.run(["axis_copy"], _feeds(session, 3))[0], [2])
