"""The flow padded to a few lengths on OpenVINO, with a mask of its real frames: the
buckets, the mask put into the graph, and a voice whose flow runs there."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yomiage.options import SynthesisOptions
from yomiage.runtime.chunking import FLOW_SPAN_FRAMES, Windowing
from yomiage.runtime.engines.placement import (
    OPENVINO,
    OPENVINO_BF16,
    OPENVINO_FP32,
    ORT_FP32,
    Placement,
)
from yomiage.runtime.engines.sessions import Sessions, probe_speaker
from yomiage.runtime.flow_lengths import (
    BEYOND_BUCKETS,
    FLOW_BUCKETS,
    FRAME_MASK_INPUT,
    flow_bucket,
    flow_buckets_up_to,
    padded_span,
)
from yomiage.runtime.onnx_backend import OnnxBackend
from yomiage.runtime.onnx_voice import BundleVoice
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.value import DecoderChoice, Plan
from yomiage.runtime.voice import decode, encode
from yomiage.text import Frontend

needs_openvino = pytest.mark.skipif(OPENVINO.version() is None, reason="OpenVINO not installed")
OV_FP32 = OPENVINO_FP32


def test_each_bucket_is_at_most_a_third_longer_than_the_one_before() -> None:
    assert list(FLOW_BUCKETS) == sorted(set(FLOW_BUCKETS))
    assert all(b <= a * 4 / 3 for a, b in itertools.pairwise(FLOW_BUCKETS))
    assert FLOW_BUCKETS[-1] == FLOW_SPAN_FRAMES  # a default span always has a bucket


@pytest.mark.parametrize("frames", [1, 95, 96, 97, 141, 160, 161, 895, 896])
def test_a_span_takes_the_smallest_bucket_that_holds_it(frames: int) -> None:
    bucket = flow_bucket(frames)
    assert bucket in FLOW_BUCKETS and bucket >= frames
    assert all(b < frames for b in FLOW_BUCKETS if b < bucket)


def test_spans_longer_than_the_buckets_take_whole_steps_beyond() -> None:
    assert flow_bucket(FLOW_BUCKETS[-1] + 1) == FLOW_BUCKETS[-1] + BEYOND_BUCKETS
    assert flow_bucket(2000) % BEYOND_BUCKETS == 0 and flow_bucket(2000) >= 2000
    assert flow_buckets_up_to(FLOW_SPAN_FRAMES) == FLOW_BUCKETS
    assert flow_buckets_up_to(2000)[-1] == flow_bucket(2000)
    assert flow_buckets_up_to(100) == FLOW_BUCKETS[:2]
    with pytest.raises(ValueError, match="at least one frame"):
        flow_bucket(0)


def test_a_padded_span_keeps_its_frames_first_and_masks_the_rest() -> None:
    z_p = np.arange(2 * 3 * 141, dtype=np.float32).reshape(1, 6, 141)[:, :3]
    padded, mask = padded_span(z_p)
    assert padded.shape == (1, 3, 160) and mask.shape == (1, 1, 160)
    np.testing.assert_array_equal(padded[:, :, :141], z_p)
    assert not padded[:, :, 141:].any()
    assert mask[0, 0, :141].all() and not mask[0, 0, 141:].any()


def _flow_feeds(graph: Any, frames: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    width = 192 if graph.input_shape("z_p")[1] is None else graph.input_shape("z_p")[1]
    z_p = rng.standard_normal((1, width, frames), np.float32)
    return {"z_p": z_p, **probe_speaker(graph, rng)}


@needs_openvino
@pytest.mark.parametrize("frames", [5, 40, 96, 141])
def test_the_masked_flow_gives_the_unpadded_frames_exactly(test_voice: Path, frames: int) -> None:
    """OpenVINO float32, padded to its bucket and masked, against ONNX Runtime on the
    span alone: the same frames to rounding (attention and the wide convolutions are
    the only operations that mix frames; both are masked)."""
    path = test_voice / "flow.onnx"
    ort = Sessions(1, openvino=False).open(path)
    masked = Sessions(1).open(path, OV_FP32, frame_mask=True)
    assert masked.placement == OV_FP32 and FRAME_MASK_INPUT in masked.input_names
    feeds = _flow_feeds(ort, frames)
    expected = ort.run(feeds)[0]
    padded, mask = padded_span(feeds["z_p"])
    got = masked.run({**feeds, "z_p": padded, FRAME_MASK_INPUT: mask})[0][:, :, :frames]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * float(np.abs(expected).max()))
    if padded.shape[2] > frames:  # without the mask the padding changes the frames
        plain = Sessions(1).open(path, OV_FP32)
        unmasked = plain.run({**feeds, "z_p": padded})[0][:, :, :frames]
        assert np.abs(unmasked - expected).max() > 1e-3 * float(np.abs(expected).max())


@needs_openvino
def test_a_graph_without_attention_is_not_masked_and_runs_on_onnxruntime(
    test_voice: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a flow's padding can be hidden; asked of another graph, the mask fails and
    that graph runs on ONNX Runtime, with a warning."""
    with caplog.at_level(logging.WARNING):
        graph = Sessions(1).open(test_voice / "decoder.onnx", OV_FP32, frame_mask=True)
    assert graph.placement == ORT_FP32
    assert "no attention" in caplog.text


def _record_shapes(graph: Any, lengths: list[int]) -> None:
    """Make ``graph`` note the length of every ``z_p`` it is given in ``lengths``."""
    run = graph.run

    def noting(feeds: dict[str, Any]) -> list[Any]:
        lengths.append(feeds["z_p"].shape[2])
        return run(feeds)

    graph.run = noting


def _plan(flow: Placement, decoder: Placement = ORT_FP32, **windowing: int) -> Plan:
    """A plan that runs the flow on ``flow`` and the decoder on ``decoder``, in ``windowing``."""
    request = PlanRequest(decoder.precision, windowing=Windowing(**windowing))
    return Plan(DecoderChoice.at(decoder), request, "test", threads=1, flow=flow)


def _voice(test_voice: Path, flow: Placement, **windowing: int) -> tuple[OnnxBackend, Any]:
    backend = OnnxBackend(test_voice / "bert", threads=1, plan_request=PlanRequest("fp32"))
    voice = BundleVoice(test_voice, backend.sessions, _plan(flow, **windowing))
    return backend, voice


@needs_openvino
@pytest.mark.parametrize(("flow_frames", "first"), [(896, 256), (24, 8)])  # whole; in spans
def test_a_voice_with_its_flow_on_openvino_speaks_as_on_onnxruntime(
    test_voice: Path, frontend: Frontend, flow_frames: int, first: int
) -> None:
    """The same sentence through a voice whose flow runs padded on OpenVINO (float32)
    and one whose flow runs on ONNX Runtime: the same audio to rounding, every span of
    it run at one of the buckets."""
    text = "今日はとても良い天気ですね。明日も晴れるといいですね、と彼は言った。"
    sentence = [frontend.g2p(text)]
    options = SynthesisOptions(seed=5)
    audio = []
    for flow in (ORT_FP32, OV_FP32):
        backend, voice = _voice(test_voice, flow, flow_frames=flow_frames, first_flow_frames=first)
        assert voice.flow.placement == flow
        shapes: list[int] = []
        _record_shapes(voice.flow, shapes)
        rng = backend.new_rng(5)
        [encoded] = encode(backend, voice, sentence, options, rng)
        audio.append(decode(voice, encoded, options, rng))
        if flow == OV_FP32:
            assert shapes and all(n in flow_buckets_up_to(flow_frames) for n in shapes)
            assert sum(encoded.durations) <= flow_frames or len(shapes) > 1
    np.testing.assert_allclose(audio[1], audio[0], rtol=0, atol=1e-3)


@needs_openvino
def test_warming_runs_the_flow_at_every_bucket_once(test_voice: Path) -> None:
    _, voice = _voice(test_voice, OV_FP32, flow_frames=300)
    seen: list[int] = []
    _record_shapes(voice.flow, seen)
    voice.warm_shapes()
    assert tuple(seen) == flow_buckets_up_to(300) == (96, 128, 160, 192, 256, 320)
    # Spans made longer than the buckets: those are warmed, the lengths beyond are not.
    _, voice = _voice(test_voice, OV_FP32, flow_frames=5000)
    seen = []
    _record_shapes(voice.flow, seen)
    voice.warm_flow()
    assert tuple(seen) == FLOW_BUCKETS


def test_a_flow_on_onnxruntime_runs_unpadded_and_is_not_warmed(test_voice: Path) -> None:
    _, voice = _voice(test_voice, ORT_FP32)
    seen: list[int] = []
    _record_shapes(voice.flow, seen)
    voice.warm_shapes()
    assert seen == []
    speaker = probe_speaker(voice.flow, np.random.default_rng(0))
    z = voice.flow_span(_flow_feeds(voice.flow, 37)["z_p"], speaker)
    assert seen == [37] and z.shape[2] == 37


@needs_openvino
def test_a_flow_openvino_refuses_runs_on_onnxruntime_and_says_so(
    test_voice: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from yomiage.runtime.engines import sessions as sessions_module

    backend = OnnxBackend(test_voice / "bert", threads=1, plan_request=PlanRequest("fp32"))
    real = sessions_module.Sessions.open

    def refusing(self: Sessions, path: Path, placement: Placement, **kw: Any) -> Any:
        return real(self, path, ORT_FP32 if path.name == "flow.onnx" else placement, **kw)

    monkeypatch.setattr(sessions_module.Sessions, "open", refusing)
    with caplog.at_level(logging.WARNING):
        voice = BundleVoice(test_voice, backend.sessions, _plan(OPENVINO_BF16, OPENVINO_BF16))
    assert voice.info.runtime == "decoder bf16 on openvino"
    assert "not the plan's decoder bf16 on openvino, flow bf16 on openvino" in caplog.text


@needs_openvino
def test_a_voice_reports_its_flow_where_it_runs(test_voice: Path) -> None:
    _, voice = _voice(test_voice, OV_FP32)
    assert voice.info.runtime == "decoder fp32 on onnxruntime, flow fp32 on openvino"


@needs_openvino
def test_a_voice_runs_what_keeps_shapes_once_as_it_loads(
    test_voice: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenVINO finishes preparing a compiled graph at its first call, holding more
    meanwhile: a voice makes that call as it loads, at lengths its plan meets anyway (the
    flow's first, the decoder's first window), not in its first request."""
    from yomiage.runtime.engines.openvino_graph import OpenVinoGraph

    calls: list[tuple[str, int]] = []
    run = OpenVinoGraph.run

    def noting(graph: OpenVinoGraph, feeds: dict[str, Any]) -> list[Any]:
        calls.append((graph.path.name, next(v.shape[2] for k, v in feeds.items() if k[0] == "z")))
        return run(graph, feeds)

    monkeypatch.setattr(OpenVinoGraph, "run", noting)
    backend = OnnxBackend(test_voice / "bert", threads=1, plan_request=PlanRequest("fp32"))
    plan = _plan(OV_FP32, OV_FP32, window_frames=64, first_window_frames=32)
    voice = BundleVoice(test_voice, backend.sessions, plan)
    assert voice.decoder.placement == OV_FP32
    first_window = 32 + 2 * voice.manifest.receptive_field_frames
    assert calls == [("flow.onnx", FLOW_BUCKETS[0]), ("decoder.onnx", first_window)]
    calls.clear()
    _voice(test_voice, ORT_FP32)
    assert calls == []
