"""Speaker tables: what a graph computes from the speaker alone, looked up by sid instead.

On the tiny AIVMX voice's graphs (cut as a bundle is, before the tables) and on small
graphs built here; no torch needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.aivm_files import AIVMX
from yomiage.aivmx.reader import read_aivmx
from yomiage.aivmx.split import split_graphs
from yomiage.export import speaker_tables as tables
from yomiage.export.speaker_tables import fold, speaker_tables


def _session(model: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])


def _copy(model: Any) -> Any:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _weight_bytes(model: Any) -> int:
    return sum(numpy_helper.to_array(i).nbytes for i in model.graph.initializer)


@pytest.fixture(scope="module")
def voice() -> Any:
    return read_aivmx(AIVMX)


@pytest.fixture(scope="module")
def cut(voice: Any) -> dict[str, Any]:
    return split_graphs(voice.model)


@pytest.fixture(scope="module")
def folded(cut: dict[str, Any], voice: Any) -> tuple[dict[str, Any], dict[str, bool]]:
    parts = {name: _copy(model) for name, model in cut.items()}
    return parts, speaker_tables(parts, voice.n_speakers)


def _encoder_feeds(session: Any, sid: int, t: int = 23) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(sid)
    bert_dim = next(i.shape[1] for i in session.get_inputs() if i.name == "bert")
    return {
        "phone_ids": rng.integers(1, 50, (1, t)),
        "tone_ids": rng.integers(0, 12, (1, t)),
        "language_ids": np.ones((1, t), np.int64),
        "bert": rng.standard_normal((1, bert_dim, t)).astype(np.float32),
        "style": rng.standard_normal((1, 256)).astype(np.float32),
        "sid": np.array([sid], np.int64),
        "sdp_noise": rng.standard_normal((1, 2, t)).astype(np.float32),
        "sdp_ratio": np.array([0.5], np.float32),
        "length_scale": np.array([1.0], np.float32),
    }


def test_every_graph_takes_sid_and_drops_the_projection_weights(
    cut: dict[str, Any], folded: tuple[dict[str, Any], dict[str, bool]]
) -> None:
    parts, which = folded
    assert which == {"encoder": True, "flow": True, "decoder": True}
    for name in ("flow", "decoder"):
        assert [i.name for i in parts[name].graph.input if i.name in ("g", "sid")] == ["sid"]
    assert [o.name for o in parts["encoder"].graph.output] == [
        o.name for o in cut["encoder"].graph.output
    ]  # g stays an output: a flow or decoder of an earlier bundle may still take it
    for name in parts:
        assert _weight_bytes(parts[name]) < _weight_bytes(cut[name]), name
        onnx.checker.check_model(parts[name])


def test_each_speaker_gets_the_same_outputs_as_before(
    cut: dict[str, Any], folded: tuple[dict[str, Any], dict[str, bool]], voice: Any
) -> None:
    parts, _ = folded
    before = {name: _session(model) for name, model in cut.items()}
    after = {name: _session(model) for name, model in parts.items()}
    assert voice.n_speakers >= 1
    for sid in range(voice.n_speakers):
        feeds = _encoder_feeds(before["encoder"], sid)
        old, new = before["encoder"].run(None, feeds), after["encoder"].run(None, feeds)
        for a, b in zip(old, new, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
        g = old[2]
        channels = before["flow"].get_inputs()[0].shape[1]
        z_p = np.random.default_rng(7).standard_normal((1, channels, 31)).astype(np.float32)
        sid_feed = np.array([sid], np.int64)
        z_old = before["flow"].run(None, {"z_p": z_p, "g": g})[0]
        z_new = after["flow"].run(None, {"z_p": z_p, "sid": sid_feed})[0]
        np.testing.assert_allclose(z_old, z_new, rtol=0, atol=1e-6)
        audio_old = before["decoder"].run(None, {"z": z_old, "g": g})[0]
        audio_new = after["decoder"].run(None, {"z": z_old, "sid": sid_feed})[0]
        np.testing.assert_allclose(audio_old, audio_new, rtol=0, atol=1e-6)


def _linear_graph(with_random: bool = False) -> Any:
    """y = x + g @ W (+ noise drawn from g's shape when ``with_random``)."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "W")
    nodes = [helper.make_node("MatMul", ["g", "W"], ["gw"])]
    last = "gw"
    if with_random:
        nodes.append(helper.make_node("RandomNormalLike", ["gw"], ["noise"], seed=1.0))
        nodes.append(helper.make_node("Add", ["gw", "noise"], ["gwn"]))
        last = "gwn"
    nodes.append(helper.make_node("Add", ["x", last], ["y"]))
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [w],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_small_graph_is_folded_into_rows_looked_up_by_sid() -> None:
    model = _linear_graph()
    rows = [np.array([[1, 0, 0, 0]], np.float32), np.array([[0, 2, 0, 1]], np.float32)]
    folded = fold(model, "g", rows)
    assert folded is not None and list(folded.rows) == ["gw"]
    model = folded.model
    assert [i.name for i in model.graph.input] == ["x", "sid"]
    assert "W" not in {i.name for i in model.graph.initializer}
    session = _session(model)
    x = np.ones((1, 3), np.float32)
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    for sid, g in enumerate(rows):
        y = session.run(None, {"x": x, "sid": np.array([sid], np.int64)})[0]
        np.testing.assert_allclose(y, x + g @ w, rtol=1e-6)


def test_tables_larger_than_the_weights_they_replace_leave_the_graph_as_it_was() -> None:
    model = _linear_graph()
    original = model.SerializeToString()
    many = [np.full((1, 4), s, np.float32) for s in range(5)]  # 5 rows of 3 > 12 weights
    assert fold(model, "g", many) is None
    assert model.SerializeToString() == original


def test_random_nodes_are_never_computed_ahead() -> None:
    folded = fold(_linear_graph(with_random=True), "g", [np.ones((1, 4), np.float32)])
    assert folded is not None
    kinds = [n.op_type for n in folded.model.graph.node]
    assert "RandomNormalLike" in kinds and "MatMul" not in kinds


def test_a_graph_without_the_speaker_input_is_left_alone() -> None:
    model = _linear_graph()
    original = model.SerializeToString()
    assert fold(model, "speaker", [np.ones((1, 4), np.float32)]) is None
    assert model.SerializeToString() == original


def test_a_failure_midway_leaves_every_graph_unchanged(
    cut: dict[str, Any], voice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow's tables fail to compute after the encoder's were made: no graph changes
    (and the caller, a conversion in its staging folder, writes nothing)."""
    parts = {name: _copy(model) for name, model in cut.items()}
    originals = {name: model.SerializeToString() for name, model in parts.items()}
    real = tables._run_cone
    calls = []

    def flaky(model: Any, source: str, *args: Any) -> Any:
        calls.append(source)
        if source == "g":
            raise MemoryError("out of memory while computing a table")
        return real(model, source, *args)

    monkeypatch.setattr(tables, "_run_cone", flaky)
    with pytest.raises(MemoryError):
        speaker_tables(parts, voice.n_speakers)
    assert calls == ["sid", "g"]
    for name, model in parts.items():
        assert model.SerializeToString() == originals[name], name


def test_a_voice_has_at_least_one_speaker(cut: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="at least one speaker"):
        speaker_tables({name: _copy(model) for name, model in cut.items()}, 0)
