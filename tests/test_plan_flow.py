"""Where the flow runs in a plan: with a bfloat16 decoder on OpenVINO, on OpenVINO too
when it measured faster there and the whole peak measured with both fits the budget
(injected measurements; nothing is timed here)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.test_plan import (
    CONTEXT,
    FAST_HUNGRY,
    ORT,
    TINY,
    CountingMeasure,
    big_voice,
    key,
    measured,
    planner,
)
from yomiage.plan_child.measure import FLOW_TIMING_FRAMES
from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.engines.placement import (
    OPENVINO,
    OPENVINO_BF16,
    OPENVINO_FP32,
    ORT_FP32,
)
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.flow_lengths import FLOW_BUCKETS
from yomiage.runtime.plan.choose import choose_plan, judge, judge_variants
from yomiage.runtime.plan.measure import MeasureJob, measure
from yomiage.runtime.plan.measurements import FlowTimings, Measurements
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.schedules import candidates
from yomiage.runtime.plan.store import PlanStore
from yomiage.runtime.plan.value import DecoderChoice

BF16 = OPENVINO_BF16
OV_FP32 = OPENVINO_FP32
EVERYTHING = candidates(openvino=True, native_bf16=True)
ORT_FLOW = FlowTimings(ORT_FP32, {40: 22.0, 96: 30.0, 160: 40.0, 896: 250.0})
FAST_FLOW = FlowTimings(BF16, {96: 20.0, 160: 25.0, 896: 130.0},
                        {32: 750.0, 64: 850.0, 128: 950.0, 256: 990.0})  # fmt: skip


def with_flows(*flows: FlowTimings, floor: float = 600) -> Measurements:
    """ORT and FAST_HUNGRY's decoders (600 + 100 MB a length: 700 / 800 / 900 / 1000 MB
    for the OpenVINO schedules 32 / 64 / 128 / 256), and these flows."""
    return replace(measured(ORT, FAST_HUNGRY, floor=floor), flows=flows)


def test_the_flow_may_follow_only_a_bfloat16_decoder() -> None:
    m = with_flows(ORT_FLOW, FAST_FLOW)
    assert m.flow_with(DecoderChoice("openvino", "bf16", 64)) == FAST_FLOW
    assert m.flow_with(DecoderChoice("onnxruntime", "fp32", 256)) is None
    assert m.flow_with(DecoderChoice("openvino", "fp32", 64)) is None
    assert with_flows(FAST_FLOW).flow_with(DecoderChoice("openvino", "bf16")) is None
    assert with_flows(ORT_FLOW).flow_with(DecoderChoice("openvino", "bf16")) is None


def test_a_flow_slower_where_it_moves_stays_on_onnxruntime() -> None:
    slower = replace(FAST_FLOW, call_ms={n: ms * 3 for n, ms in FAST_FLOW.call_ms.items()})
    option = judge(DecoderChoice("openvino", "bf16", 64), with_flows(ORT_FLOW, slower), 1000)
    assert option is not None and option.flow == ORT_FP32 and option.peak_mb == 800.0


def test_the_peak_with_the_flow_moved_is_the_one_measured_whole() -> None:
    option = judge(DecoderChoice("openvino", "bf16", 64), with_flows(ORT_FLOW, FAST_FLOW), 1000)
    assert option is not None
    assert option.flow == BF16 and option.peak_mb == 850.0 and option.refused is None
    assert str(option).endswith("flow openvino bf16")
    stays = judge(DecoderChoice("openvino", "bf16", 64), with_flows(ORT_FLOW), 1000)
    assert stays is not None and stays.flow == ORT_FP32 and stays.peak_mb == 800.0
    # The flow's time counts: the same decoder, the flow faster.
    assert all(a < b for a, b in zip(option.seconds, stays.seconds, strict=True))


def test_a_flow_that_does_not_fit_stays_on_onnxruntime() -> None:
    """128-frame windows under 900 MB: 950 MB with the flow moved, 900 MB without it."""
    m = with_flows(ORT_FLOW, FAST_FLOW)
    option = judge(DecoderChoice("openvino", "bf16", 128), m, 900)
    assert option is not None
    assert option.flow == ORT_FP32 and option.peak_mb == 900.0 and option.refused is None
    # Neither fits: the lighter is what is shown (and refused).
    both = judge(DecoderChoice("openvino", "bf16", 256), m, 900)
    assert both is not None and both.refused and both.peak_mb == 990.0 and both.flow == BF16
    heavier = replace(FAST_FLOW, peak_mb={256: 1050.0})
    both = judge(DecoderChoice("openvino", "bf16", 256), with_flows(ORT_FLOW, heavier), 900)
    assert both is not None and both.refused and both.peak_mb == 1000.0 and both.flow == ORT_FP32


def test_a_faster_flow_over_the_budget_is_shown_beside_the_option_that_fits() -> None:
    """What a larger budget buys includes the flow moved: the plan keeps the option that
    fits and lists the faster one, refused, so that bench can offer it."""
    m = with_flows(ORT_FLOW, FAST_FLOW)
    fits, faster = judge_variants(DecoderChoice("openvino", "bf16", 128), m, 900)
    assert fits.flow == ORT_FP32 and fits.refused is None and fits.peak_mb == 900.0
    assert faster.flow == BF16 and faster.refused and faster.peak_mb == 950.0
    assert faster.total_s < fits.total_s
    plan = choose_plan(
        m, PlanRequest(memory_budget_mb=900), threads=2, basis="t", allowed=EVERYTHING
    )
    assert plan.peak_mb is not None and plan.peak_mb <= 900 and plan.options[0].refused is None
    moved_over = [o for o in plan.options if o.flow == BF16 and o.peak_mb == 950.0]
    assert len(moved_over) == 1 and moved_over[0].refused
    # A flow that is slower where it moves is no trade: nothing more is listed.
    slower = replace(FAST_FLOW, call_ms={n: ms * 3 for n, ms in FAST_FLOW.call_ms.items()})
    only = judge_variants(DecoderChoice("openvino", "bf16", 128), with_flows(ORT_FLOW, slower), 900)
    assert len(only) == 1 and only[0].flow == ORT_FP32


def test_bench_offers_the_flow_moved_when_a_larger_budget_buys_it() -> None:
    from yomiage.cli.bench_report import faster_over_budget

    much_faster = replace(FAST_FLOW, call_ms={n: ms / 4 for n, ms in FAST_FLOW.call_ms.items()})
    plan = choose_plan(with_flows(ORT_FLOW, much_faster), PlanRequest(memory_budget_mb=900), threads=2, basis="t",
                       allowed=EVERYTHING)  # fmt: skip
    options = [
        {"decoder": str(o), "predicted_decode_s": o.total_s, "peak_mb": o.peak_mb}
        for o in plan.options
    ]
    offers = faster_over_budget(options, 900)
    assert offers and offers[0]["decoder"].endswith("flow openvino bf16")
    assert offers[0]["memory_budget_mb"] == 950


def test_a_plan_carries_the_flow_of_its_option() -> None:
    plan = choose_plan(with_flows(ORT_FLOW, FAST_FLOW), PlanRequest(memory_budget_mb=1000), threads=2, basis="t",
                       allowed=EVERYTHING)  # fmt: skip
    assert plan.decoder.placement == BF16 and plan.flow == plan.options[0].flow
    assert plan.flow == BF16 and plan.peak_mb is not None and plan.peak_mb <= 1000
    assert "flow openvino bf16" in plan.describe()
    assert plan.encoder == ORT_FP32
    # float32 asked for: nothing moves off ONNX Runtime.
    f32 = choose_plan(with_flows(ORT_FLOW, FAST_FLOW), PlanRequest(memory_budget_mb=1000), threads=2, basis="t",
                      allowed=[c for c in EVERYTHING if c.precision == "fp32"])  # fmt: skip
    assert f32.flow == ORT_FP32 and "flow" not in f32.describe()


def test_a_budget_too_small_for_the_moved_flow_keeps_the_decoder_on_openvino() -> None:
    """The flow's memory must not cost the decoder its engine: the bfloat16 decoder
    stays, with the flow on ONNX Runtime."""
    m = with_flows(ORT_FLOW, replace(FAST_FLOW, peak_mb={w: 2000.0 for w in FAST_FLOW.peak_mb}))
    plan = choose_plan(
        m, PlanRequest(memory_budget_mb=1000), threads=2, basis="t", allowed=EVERYTHING
    )
    assert plan.decoder.placement == BF16 and plan.flow == ORT_FP32


def test_flow_measurements_are_kept_and_read_back(tmp_path: Path) -> None:
    store = PlanStore(tmp_path)
    m = with_flows(ORT_FLOW, FAST_FLOW)
    store.save(key(), m, "2026-11-27")
    assert store.load(key()) == (m, "2026-11-27")


def test_a_kept_flow_on_an_unknown_engine_is_measured_over(tmp_path: Path) -> None:
    store = PlanStore(tmp_path)
    store.save(key(), with_flows(ORT_FLOW, FAST_FLOW), "2026-11-27")
    data = json.loads(store.path(key()).read_text())
    data["measurements"]["flows"][1]["engine"] = "x"  # no engine of the table
    store.path(key()).write_text(json.dumps(data))
    assert store.load(key()) is None


def _job(**changes: Any) -> MeasureJob:
    job = MeasureJob(decoder=Path("d.onnx"), bundle=Path("."), bert=Path("."), tokenizer=None,
                     bert_precision="q8", threads=2,
                     lengths={ORT_FP32: (62,), OPENVINO_BF16: (62,)},
                     thread_choices=(2,), threads_length=62, ort_windows=(), context=CONTEXT,
                     compiled_dir=None, flows=(OPENVINO_BF16,),
                     openvino_windows=(32, 64))  # fmt: skip
    return replace(job, **changes)


def _children(
    monkeypatch: pytest.MonkeyPatch, flow_fails: bool = False, compile_fails: bool = False
) -> list[dict]:
    import yomiage.runtime.plan.measure as plan_measure
    from yomiage.runtime.plan.measure import MeasureError

    asked: list[dict] = []

    def child(args: dict) -> dict:
        asked.append(args)
        if args["what"] == "compile":
            if compile_fails:
                raise MeasureError("a disk full, say")
            return {"compiled": args["precisions"]}
        if args["what"] == "floor":
            return {"peak_mb": 600.0, "ort_peak_mb": {}, "flow_ms": {"96": 30.0}}
        if args["what"] == "flow":
            if flow_fails:
                raise MeasureError("OpenVINO refused the flow")
            return {"peak_mb": {"32": 810.0, "64": 905.5}, "flow_ms": {"96": 20.0}}
        return {"call_ms": {"62": 10.0}, "memory_mb": {"62": 5.0}, "threads_ms": {}}

    monkeypatch.setattr(plan_measure, "_child", child)
    return asked


def test_measuring_times_the_flow_on_each_engine_with_the_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _children(monkeypatch)
    said: list[str] = []
    m = measure(_job(), progress=said.append)
    assert m.flows == (FlowTimings(ORT_FP32, {96: 30.0}),
                       FlowTimings(BF16, {96: 20.0}, {32: 810.0, 64: 905.5}))  # fmt: skip
    [flow] = [a for a in asked if a["what"] == "flow"]
    assert flow["flow"] == ["openvino", "bf16"] and flow["windows"] == [32, 64]
    assert len(said) == 4 and "flow on openvino bf16" in said[-1] and "(4/4)" in said[-1]


def test_openvinos_decoder_is_compiled_into_the_cache_before_anything_is_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every measuring process then loads the compiled decoder, as every voice that runs
    the plan will, so none counts what compiling it leaves resident."""
    asked = _children(monkeypatch)
    said: list[str] = []
    measure(_job(compiled_dir=tmp_path), progress=said.append)
    assert [a["what"] for a in asked] == ["compile", "decoder", "decoder", "floor", "flow"]
    assert asked[0]["precisions"] == ["bf16"] and asked[0]["compiled_dir"] == str(tmp_path)
    assert len(said) == 5 and "compiling" in said[0] and "(1/5," in said[0]
    assert "(5/5)" in said[-1]


def test_nothing_is_compiled_ahead_without_a_cache_or_without_openvino(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked = _children(monkeypatch)
    measure(_job(), progress=lambda _: None)  # no cache: each process compiles, as voices do
    ort_only = _job(compiled_dir=tmp_path, lengths={ORT_FP32: (62,)}, flows=(),
                    openvino_windows=())  # fmt: skip
    measure(ort_only, progress=lambda _: None)
    assert "compile" not in [a["what"] for a in asked]


def test_a_decoder_that_cannot_be_compiled_ahead_is_still_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asked = _children(monkeypatch, compile_fails=True)
    with caplog.at_level(logging.WARNING):
        m = measure(_job(compiled_dir=tmp_path), progress=lambda _: None)
    assert [e.engine for e in m.engines] == ["onnxruntime", "openvino"]
    assert [a["what"] for a in asked][1:] == ["decoder", "decoder", "floor", "flow"]
    assert "could not be compiled ahead (a disk full, say)" in caplog.text


@pytest.mark.slow
@pytest.mark.skipif(OPENVINO.version() is None, reason="OpenVINO is not installed")
def test_the_compiling_process_leaves_the_decoder_where_a_voice_loads_it(tmp_path: Path) -> None:
    """The real process on the tiny voice: the cache holds the compiled decoder after it,
    under the name a voice's load looks for (its manifest's SHA-256)."""
    from yomiage.runtime.plan.measure import _child

    manifest = read_manifest(TINY)
    job = _job(decoder=manifest.file("decoder.onnx"), bundle=TINY, bert=TINY / "bert",
               compiled_dir=tmp_path)  # fmt: skip
    from yomiage.runtime.plan.measure import _plain

    done = _child({"what": "compile", "precisions": ["bf16"], **_plain(job)})
    assert done == {"compiled": ["bf16"]}
    sha = manifest.files["decoder.onnx"]
    [folder] = [f for f in tmp_path.iterdir() if f.is_dir()]
    assert any(f.is_file() for f in (folder / sha).iterdir())


def _family_children(monkeypatch: pytest.MonkeyPatch, failing: tuple[int, ...] = ()) -> list[dict]:
    """Children whose decoder timings and whole peaks echo what they were asked for."""
    import yomiage.runtime.plan.measure as plan_measure
    from yomiage.runtime.plan.measure import MeasureError

    asked: list[dict] = []

    def child(args: dict) -> dict:
        asked.append(args)
        if args["what"] == "floor":
            return {"peak_mb": 600.0, "ort_peak_mb": {}, "flow_ms": {"96": 30.0}}
        if args["what"] == "flow":
            return {"peak_mb": {str(w): 800.0 + w for w in args["windows"]},
                    "flow_ms": {"96": 20.0 + len(args["windows"])}}  # fmt: skip
        if set(args["lengths"]) & set(failing):
            raise MeasureError("OpenVINO refused a length")
        counts = args["thread_choices"]
        return {"call_ms": {str(n): n / 2 for n in args["lengths"]},
                "memory_mb": {str(n): float(n) for n in args["lengths"]},
                "threads_ms": {str(t): 10.0 * t for t in counts} if len(counts) > 1 else {}}  # fmt: skip

    monkeypatch.setattr(plan_measure, "_child", child)
    return asked


def test_interleaving_schedules_are_measured_in_processes_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OpenVINO keeps every length it meets, so a length of the 48-96 schedule met in the
    same process as the 32-frame family would count in that family's memory: each family
    has its own process for the decoder and for the whole peaks, and what they measured
    is put together."""
    asked = _family_children(monkeypatch)
    said: list[str] = []
    job = _job(lengths={ORT_FP32: (62,), OPENVINO_BF16: (62, 78, 94, 126)},
               families={OPENVINO_BF16: ((62, 94), (78, 126))}, thread_choices=(1, 2),
               openvino_windows=(32, 64, 96))  # fmt: skip
    m = measure(job, progress=said.append)
    decoders = [a for a in asked if a["what"] == "decoder" and a["engine"] == "openvino"]
    assert [d["lengths"] for d in decoders] == [[62, 94], [78, 126]]
    assert [d["thread_choices"] for d in decoders] == [[1, 2], [2]]  # counts timed once
    bf16 = m.engine("openvino", "bf16")
    assert bf16 is not None and bf16.memory_mb == {62: 62.0, 94: 94.0, 78: 78.0, 126: 126.0}
    assert bf16.threads_ms == {1: 10.0, 2: 20.0}
    flows = [a["windows"] for a in asked if a["what"] == "flow"]
    assert flows == [[32, 64], [96]]
    assert m.flows[1].peak_mb == {32: 832.0, 64: 864.0, 96: 896.0}
    assert m.flows[1].call_ms == {96: 22.0}  # the first family's: its process times it
    assert len(said) == 6 and "lengths 78-126 (3/6" in said[2]


def test_a_family_that_cannot_be_measured_leaves_the_others(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _family_children(monkeypatch, failing=(126,))
    job = _job(lengths={ORT_FP32: (62,), OPENVINO_BF16: (62, 78, 94, 126)},
               families={OPENVINO_BF16: ((62, 94), (78, 126))})  # fmt: skip
    with caplog.at_level(logging.WARNING):
        m = measure(job, progress=lambda _: None)
    bf16 = m.engine("openvino", "bf16")
    assert bf16 is not None and set(bf16.call_ms) == {62, 94} and m.unavailable == ()
    assert "lengths 78-126 left out of the plan" in caplog.text
    # The 48-96 schedule is then no option; the others still are.
    assert judge(DecoderChoice("openvino", "bf16", 96, 48), m, 5000) is None
    assert judge(DecoderChoice("openvino", "bf16", 64), m, 5000) is not None


def test_each_openvino_schedule_has_one_first_window_and_its_own_lengths() -> None:
    from yomiage.runtime.plan.schedules import (
        OPENVINO_SCHEDULES,
        openvino_first_window,
        schedule_families,
    )

    sizes = [size for _, size in OPENVINO_SCHEDULES]
    assert len(sizes) == len(set(sizes))  # whole peaks are kept per size
    assert openvino_first_window(96) == 48 and openvino_first_window(64) == 32
    ov = [c for c in EVERYTHING if c.keeps_shapes]
    assert schedule_families(ov, CONTEXT) == {32: (62, 94, 158, 286), 48: (78, 126)}
    # A 1.6 s sentence: two calls in 48-96 where the 32-frame family makes three.
    from yomiage.runtime.plan.choose import decoder_calls

    assert decoder_calls(DecoderChoice("openvino", "bf16", 96, 48), 141, CONTEXT,
                         balanced_trims=True) == [78, 126]  # fmt: skip
    assert decoder_calls(DecoderChoice("openvino", "bf16", 128), 141, CONTEXT,
                         balanced_trims=True) == [62, 94, 94]  # fmt: skip


def test_a_flow_that_cannot_be_measured_stays_on_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _children(monkeypatch, flow_fails=True)
    with caplog.at_level(logging.WARNING):
        m = measure(_job(), progress=lambda _: None)
    assert [f.placement for f in m.flows] == [ORT_FP32]
    assert [e.engine for e in m.engines] == ["onnxruntime", "openvino"]  # the decoder stays
    assert "flow on openvino bf16 left out" in caplog.text
    assert m.flow_with(DecoderChoice("openvino", "bf16")) is None


def test_no_flow_is_measured_off_onnxruntime_without_a_bfloat16_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _children(monkeypatch)
    measure(_job(flows=(), openvino_windows=()), progress=lambda _: None)
    assert [a["what"] for a in asked].count("flow") == 0


def test_the_planner_asks_for_the_flow_with_every_bfloat16_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = big_voice(tmp_path, monkeypatch)
    monkeypatch.setattr(Sessions, "has_openvino", property(lambda self: True))
    monkeypatch.setattr(Sessions, "native_bf16", property(lambda self: True))
    auto = CountingMeasure(with_flows(ORT_FLOW, FAST_FLOW))
    plan = planner(tmp_path, auto).plan_for(manifest)
    [job] = auto.jobs
    assert job.flows == (OPENVINO_BF16,) and job.openvino_windows == (32, 64, 96, 128, 256)
    # The 48-96 schedule's lengths interleave with the others': measured apart.
    assert job.families == {OPENVINO_BF16: ((62, 94, 158, 286), (78, 126))}
    assert plan.flow == BF16
    fp32 = CountingMeasure(with_flows(ORT_FLOW))
    planner(tmp_path / "other", fp32, decoder_precision="fp32").plan_for(manifest)
    assert fp32.jobs[0].flows == () and fp32.jobs[0].openvino_windows == ()


@pytest.mark.slow
@pytest.mark.skipif(OPENVINO.version() is None, reason="OpenVINO not installed")
def test_the_flow_measuring_process_runs_both_graphs_on_openvino(tmp_path: Path) -> None:
    """The real process for the flow off ONNX Runtime, on the tiny voice: the flow timed at
    every length asked for, and a whole peak for each window size. Values are not judged."""
    manifest = read_manifest(TINY)
    job = _job(decoder=manifest.file("decoder.onnx"), bundle=TINY, bert=TINY / "bert",
               threads=1, thread_choices=(1,), threads_length=47,
               lengths={ORT_FP32: (47,)}, context=manifest.receptive_field_frames,
               compiled_dir=tmp_path, flows=(OPENVINO_FP32,), openvino_windows=(16, 32))  # fmt: skip
    m = measure(job, progress=lambda _: None)
    ort, ov = m.flows
    assert ort.placement == ORT_FP32 and ov.placement == OV_FP32
    assert set(ort.call_ms) == set(ov.call_ms) == set(FLOW_TIMING_FRAMES)
    assert set(ov.peak_mb) == {16, 32} and ov.peak_mb[16] <= ov.peak_mb[32]
    assert set(ov.held_mb) == set(FLOW_BUCKETS) and ort.held_mb == {}  # the longest first
    assert all(ms > 0 for ms in (*ort.call_ms.values(), *ov.call_ms.values()))
