"""The flow's floor: where OpenVINO keeps a layout of the flow's weights per range of
lengths, a plan pads every span to at least the length from which one layout serves,
chosen from what the measuring process held per length (injected figures, but for the
voice that runs by it: nothing is timed here)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_flow_lengths import _record_shapes, needs_openvino
from tests.test_plan import key
from tests.test_plan_flow import EVERYTHING, FAST_FLOW, ORT_FLOW, with_flows
from yomiage.options import SynthesisOptions
from yomiage.runtime.engines.placement import OPENVINO_BF16, OPENVINO_FP32, ORT_FP32, Placement
from yomiage.runtime.engines.sessions import probe_speaker
from yomiage.runtime.flow_lengths import (
    FLOW_BUCKETS,
    MAX_FLOW_FLOOR,
    flow_bucket,
    flow_buckets_up_to,
    flow_floor,
    padded_span,
)
from yomiage.runtime.onnx_backend import OnnxBackend
from yomiage.runtime.onnx_voice import BundleVoice
from yomiage.runtime.plan.checks import measurements_problem
from yomiage.runtime.plan.choose import choose_plan, judge
from yomiage.runtime.plan.measurements import ms_between
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.store import PlanStore
from yomiage.runtime.plan.value import DecoderChoice, Plan
from yomiage.runtime.voice import decode, encode
from yomiage.text import Frontend

# As measured on the Xeon with AMX (full-size voice, 2 threads): each length from the
# longest down adds a few MB, and the lengths under 256 frames a layout of their own.
HELD_XEON = {896: 592.3, 768: 596.5, 640: 599.9, 512: 603.1, 384: 613.3, 320: 616.2,
             256: 618.8, 192: 689.2, 160: 692.1, 128: 694.9, 96: 697.5}  # fmt: skip
SMOOTH = {b: 600.0 + 3 * k for k, b in enumerate(reversed(FLOW_BUCKETS))}
LAYOUT_AT_128 = {b: mb + (40.0 if b < 128 else 0.0) for b, mb in SMOOTH.items()}
LAYOUT_AT_768 = {b: mb + (60.0 if b < 768 else 0.0) for b, mb in SMOOTH.items()}
FLOORED_FLOW = replace(FAST_FLOW, held_mb=HELD_XEON)


def test_the_floor_is_the_lowest_length_that_saves_a_layout() -> None:
    floor, saved = flow_floor(HELD_XEON)
    assert floor == 256 and saved == pytest.approx(697.5 - 618.8)
    floor, saved = flow_floor(LAYOUT_AT_128)
    assert floor == 128 and saved == pytest.approx(40.0 + 3.0)
    # Two layouts: the higher floor saves both.
    both = {b: mb + (30.0 if b < 256 else 0.0) for b, mb in LAYOUT_AT_128.items()}
    assert flow_floor(both)[0] == 256


@pytest.mark.parametrize(
    "held",
    [
        {},  # measured before floors were
        SMOOTH,  # every length adds only its own few MB
        LAYOUT_AT_768,  # a layout only above the highest floor a plan may take
        {96: 620.0, 128: 610.0, 160: 605.0, 896: 600.0},  # no step a layout's size
    ],
)
def test_no_floor_where_none_saves_a_layout(held: dict[int, float]) -> None:
    assert flow_floor(held) == (None, 0.0)


def test_a_floor_pads_every_span_to_its_bucket_and_no_further() -> None:
    assert flow_bucket(40, 256) == 256 and flow_bucket(300, 256) == 320
    assert flow_bucket(40, None) == FLOW_BUCKETS[0] and flow_bucket(40, 130) == 160
    assert flow_buckets_up_to(896, 256) == tuple(b for b in FLOW_BUCKETS if b >= 256)
    assert flow_buckets_up_to(100, 256) == (256,)
    assert flow_buckets_up_to(896, None) == FLOW_BUCKETS
    z_p = np.ones((1, 4, 40), np.float32)
    padded, mask = padded_span(z_p, 256)
    assert padded.shape == (1, 4, 256) and mask.sum() == 40 and padded[:, :, 40:].sum() == 0
    assert MAX_FLOW_FLOOR in FLOW_BUCKETS


def test_a_floored_flow_is_timed_at_its_floor_for_shorter_sentences() -> None:
    assert FLOORED_FLOW.floor == 256 and FAST_FLOW.floor is None
    assert FLOORED_FLOW.ms_for(50) == ms_between(FAST_FLOW.call_ms, 256)
    assert FLOORED_FLOW.ms_for(500) == FAST_FLOW.ms_for(500)
    assert FLOORED_FLOW.ms_for(50) > FAST_FLOW.ms_for(50)


def test_an_option_with_the_flow_floored_holds_less_by_what_the_floor_saves() -> None:
    choice = DecoderChoice("openvino", "bf16", 64)
    plain = judge(choice, with_flows(ORT_FLOW, FAST_FLOW), 1000)
    floored = judge(choice, with_flows(ORT_FLOW, FLOORED_FLOW), 1000)
    assert plain is not None and floored is not None
    assert plain.flow == floored.flow == OPENVINO_BF16
    assert floored.peak_mb == pytest.approx(plain.peak_mb - (697.5 - 618.8))
    assert floored.flow_floor == 256 and plain.flow_floor is None
    assert str(floored).endswith("flow openvino bf16 from 256 frames")


def test_a_plan_carries_its_options_floor_and_a_new_floor_runs_otherwise() -> None:
    """The floor brings the faster flow under the budget (FAST_FLOW's 128-frame
    windows: 950 MB whole, ~871 floored), and the plan says it."""
    request = PlanRequest(memory_budget_mb=900)
    plain = choose_plan(with_flows(ORT_FLOW, FAST_FLOW), request, threads=2, basis="t",
                        allowed=EVERYTHING)  # fmt: skip
    floored = choose_plan(with_flows(ORT_FLOW, FLOORED_FLOW), request, threads=2, basis="t",
                          allowed=EVERYTHING)  # fmt: skip
    assert floored.flow == OPENVINO_BF16 and floored.flow_floor == 256
    assert plain.flow == ORT_FP32 and plain.decoder == floored.decoder
    assert "flow openvino bf16 from 256 frames" in floored.describe()
    assert floored.runs_otherwise_than(replace(floored, flow_floor=None))
    assert not floored.runs_otherwise_than(replace(floored, basis="another"))


def test_what_the_flow_held_is_kept_read_back_and_checked(tmp_path: Path) -> None:
    store = PlanStore(tmp_path)
    m = with_flows(ORT_FLOW, FLOORED_FLOW)
    store.save(key(), m, "2026-12-06")
    loaded = store.load(key())
    assert loaded is not None and loaded[0] == m and loaded[0].flows[1].floor == 256
    assert measurements_problem(m, context=None, thread_counts=(2,)) is None
    bad = with_flows(ORT_FLOW, replace(FAST_FLOW, held_mb={96: -1.0}))
    problem = measurements_problem(bad, context=None, thread_counts=(2,))
    assert problem is not None and "held with the flow" in problem


def _plan(flow: Placement, floor: int | None, **windowing: Any) -> Plan:
    from yomiage.runtime.chunking import Windowing

    request = PlanRequest("fp32", windowing=Windowing(**windowing))
    return Plan(DecoderChoice.at(ORT_FP32), request, "test", threads=1, flow=flow,
                flow_floor=floor)  # fmt: skip


@needs_openvino
def test_a_voice_with_a_floor_runs_and_warms_its_flow_from_it(test_voice: Path) -> None:
    backend = OnnxBackend(test_voice / "bert", threads=1, plan_request=PlanRequest("fp32"))
    voice = BundleVoice(test_voice, backend.sessions, _plan(OPENVINO_FP32, 128, flow_frames=300))
    seen: list[int] = []
    _record_shapes(voice.flow, seen)
    voice.warm_flow()
    assert tuple(seen) == flow_buckets_up_to(300, 128) == (128, 160, 192, 256, 320)
    seen.clear()
    speaker = probe_speaker(voice.flow, np.random.default_rng(0))
    z_p = np.random.default_rng(1).standard_normal((1, voice.manifest.inter_channels, 37))
    z = voice.flow_span(z_p.astype(np.float32), speaker)
    assert seen == [128] and z.shape[2] == 37


@needs_openvino
def test_a_voice_with_a_floor_speaks_as_without_one(test_voice: Path, frontend: Frontend) -> None:
    """Padding further changes nothing the mask does not hide: the same audio as the flow
    on ONNX Runtime, unpadded."""
    sentence = [frontend.g2p("今日はとても良い天気ですね。")]
    options = SynthesisOptions(seed=5)
    audio = []
    for flow, floor in ((ORT_FP32, None), (OPENVINO_FP32, 256)):
        backend = OnnxBackend(test_voice / "bert", threads=1, plan_request=PlanRequest("fp32"))
        voice = BundleVoice(test_voice, backend.sessions, _plan(flow, floor))
        rng = backend.new_rng(5)
        [encoded] = encode(backend, voice, sentence, options, rng)
        assert sum(encoded.durations) < 256  # so the floor pads it
        audio.append(decode(voice, encoded, options, rng))
    np.testing.assert_allclose(audio[1], audio[0], rtol=0, atol=1e-3)
