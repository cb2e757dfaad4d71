"""The plan chooser on injected measurements: the budget, the never-slower rule, the
cache's keys, and the planner's order of decisions (no timing is measured here)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.engines.placement import OPENVINO_BF16, ORT_FP32
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.plan.choose import (
    SPEED_WORTH_MEMORY,
    choose_plan,
    choose_threads,
    decoder_calls,
    first_call_lengths,
    judge,
)
from yomiage.runtime.plan.fallback import FALLBACK_BF16_BUDGET_MB, fallback_plan
from yomiage.runtime.plan.job import BertGraph
from yomiage.runtime.plan.measure import MeasureError, MeasureJob, measure
from yomiage.runtime.plan.measurements import EngineTimings, Measurements
from yomiage.runtime.plan.planner import Planner
from yomiage.runtime.plan.request import DEFAULT_MEMORY_BUDGET_MB, PlanRequest
from yomiage.runtime.plan.schedules import candidates
from yomiage.runtime.plan.store import PlanKey, PlanStore
from yomiage.runtime.plan.value import DecoderChoice

TINY = Path(__file__).parent / "data" / "voices" / "tiny"
CONTEXT = 15
LENGTHS = (62, 94, 158, 286, 542)


def timings(engine: str, precision: str, ms_per_frame: float, mb_per_length: float,
            fixed_ms: float = 0.0) -> EngineTimings:  # fmt: skip
    """A made-up engine: each call costs ``fixed_ms`` plus ``ms_per_frame`` a frame, and
    each length met adds ``mb_per_length``."""
    return EngineTimings(
        engine,  # type: ignore[arg-type]
        precision,  # type: ignore[arg-type]
        {n: fixed_ms + ms_per_frame * n for n in LENGTHS},
        {n: mb_per_length * (i + 1) for i, n in enumerate(LENGTHS)},
    )


ORT = timings("onnxruntime", "fp32", 4.0, 40)
FAST_HUNGRY = timings("openvino", "bf16", 2.0, 100)  # twice as fast, 100 MB a length
EVERYTHING = candidates(openvino=True, native_bf16=True, openvino_fp32=True)


def asked(budget_mb: int, precision: str = "auto") -> PlanRequest:
    """A request for a plan within ``budget_mb`` (``precision``: as the user asks it)."""
    return PlanRequest(precision, budget_mb, measure_plan=True)


def measured(*engines: EngineTimings, floor: float = 600) -> Measurements:
    return Measurements(floor, engines, CONTEXT)


def test_the_fastest_plan_within_the_budget_is_chosen() -> None:
    plan = choose_plan(measured(ORT, FAST_HUNGRY), asked(2000), threads=2, basis="test",
                       allowed=EVERYTHING)  # fmt: skip
    assert plan.decoder.engine == "openvino" and plan.decoder.precision == "bf16"
    assert plan.peak_mb is not None and plan.peak_mb <= 2000
    assert plan.options[0].choice == plan.decoder


@pytest.mark.parametrize("budget", [720, 800, 900, 1000, 1200])
def test_a_plan_over_the_budget_is_never_chosen(budget: int) -> None:
    plan = choose_plan(measured(ORT, FAST_HUNGRY), asked(budget), threads=2, basis="test",
                       allowed=EVERYTHING)  # fmt: skip
    assert plan.peak_mb is not None and plan.peak_mb <= budget
    for option in plan.options:
        assert (option.peak_mb > budget) == (
            option.refused is not None and "budget" in option.refused
        )


def test_a_tighter_budget_takes_fewer_window_lengths_before_another_engine() -> None:
    roomy = choose_plan(
        measured(ORT, FAST_HUNGRY), asked(1100), threads=2, basis="t", allowed=EVERYTHING
    )
    tight = choose_plan(
        measured(ORT, FAST_HUNGRY), asked(950), threads=2, basis="t", allowed=EVERYTHING
    )
    assert roomy.decoder == DecoderChoice("openvino", "bf16", 256)  # 4 lengths: 600 + 400
    assert tight.decoder == DecoderChoice("openvino", "bf16", 128)  # 3 lengths: 600 + 300


# The decoder as measured on an Intel Xeon with AMX (2 threads; the plan file of the
# H200 machine's host, RESULTS.md "Issue 32, fourth pass"): bfloat16 costs about the
# same per frame at every length, but memory grows steeply with the length. (Measured
# before format 4: OpenVINO's memory then left out loading OpenVINO itself, ~36 MB.)
AMX_ORT = EngineTimings("onnxruntime", "fp32",
                        {23: 110.3, 31: 117.8, 47: 269.6, 62: 206.0, 94: 318.1, 158: 528.5,
                         286: 1038.1, 542: 2027.7},
                        {23: 80.9, 31: 86.0, 47: 95.1, 62: 103.2, 94: 118.5, 158: 149.2,
                         286: 213.8, 542: 336.7})  # fmt: skip
AMX_BF16 = EngineTimings("openvino", "bf16", {62: 65.4, 94: 165.7, 158: 187.0, 286: 289.7},
                         {62: 226.3, 94: 375.3, 158: 601.4, 286: 960.9})  # fmt: skip
AMX = Measurements(828.2, (AMX_ORT, AMX_BF16), CONTEXT,
                   ort_peak_mb={128: 912.0, 256: 980.8, 512: 1097.7})  # fmt: skip


@pytest.mark.parametrize(
    ("budget", "expected"),
    [(1000, DecoderChoice("onnxruntime", "fp32", 128)),  # 1.6% from 256's speed: even
     (1100, DecoderChoice("openvino", "bf16", 32)),
     (1500, DecoderChoice("openvino", "bf16", 128)),
     (2000, DecoderChoice("openvino", "bf16", 256))],
)  # fmt: skip
def test_where_memory_grows_with_the_length_small_windows_buy_most_of_the_speed(
    budget: int, expected: DecoderChoice
) -> None:
    """With AMX's measurements, 32-frame bfloat16 windows (one length: +226 MB) decode
    twice as fast as float32 for 1,054 MB; each larger window costs hundreds more."""
    plan = choose_plan(AMX, asked(budget), threads=2, basis="amx", allowed=EVERYTHING)
    assert replace(plan.decoder, first_window_frames=32) == expected
    assert plan.peak_mb is not None and plan.peak_mb <= budget
    if expected.engine == "openvino":
        ort = next(o for o in plan.options if o.choice.engine == "onnxruntime")
        assert plan.options[0].total_s < ort.total_s / 2 or expected.window_frames > 32
    assert str(DecoderChoice("openvino", "bf16", 32)) == "openvino bf16, windows of 32 frames"


def test_more_memory_is_taken_only_for_speed_beyond_the_measurements_noise() -> None:
    """AMX's float32 schedules: 256-frame windows predicted 1.6% faster than 128 for
    +69 MB is even, and the lighter runs; made 20% faster where the long windows run,
    they are worth it."""
    even = choose_plan(AMX, asked(1000), threads=2, basis="amx", allowed=EVERYTHING)
    assert even.decoder.window_frames == 128
    [lighter, heavier] = sorted((o for o in even.options if o.refused is None),
                                key=lambda o: o.peak_mb)  # fmt: skip
    assert heavier.total_s < lighter.total_s < heavier.total_s * (1 + SPEED_WORTH_MEMORY)
    faster = {n: ms * (0.8 if n >= 286 else 1.0) for n, ms in AMX_ORT.call_ms.items()}
    clear = replace(AMX, engines=(replace(AMX_ORT, call_ms=faster), AMX_BF16))
    plan = choose_plan(clear, asked(1000), threads=2, basis="amx", allowed=EVERYTHING)
    assert plan.decoder.window_frames == 256
    [chosen, other] = [o for o in plan.options if o.refused is None]
    assert chosen.total_s * (1 + SPEED_WORTH_MEMORY) < other.total_s


def test_when_nothing_fits_the_least_memory_runs_and_says_so() -> None:
    plan = choose_plan(measured(ORT, FAST_HUNGRY, floor=990), asked(1000), threads=2, basis="test",
                       allowed=EVERYTHING)  # fmt: skip
    assert plan.peak_mb == min(o.peak_mb for o in plan.options)
    assert plan.decoder == DecoderChoice("openvino", "bf16", 32)  # one length: 990 + 100
    assert "no option fits the budget" in plan.basis


def test_auto_never_picks_a_plan_slower_than_onnx_runtime_on_any_length() -> None:
    # Faster per frame, but each call pays 300 ms: slower on short sentences.
    slow_start = timings("openvino", "bf16", 1.0, 10, fixed_ms=300)
    plan = choose_plan(
        measured(ORT, slow_start), asked(5000), threads=2, basis="t", allowed=EVERYTHING
    )
    assert plan.decoder.engine == "onnxruntime"
    refused = [o for o in plan.options if o.choice.engine == "openvino"]
    assert refused and all("slower than ONNX Runtime" in (o.refused or "") for o in refused)


def test_an_explicit_precision_is_honoured_even_where_it_is_slower() -> None:
    slow = timings("openvino", "bf16", 8.0, 10)
    bf16 = tuple(c for c in EVERYTHING if c.precision == "bf16")
    plan = choose_plan(measured(ORT, slow), asked(5000, "bf16"), threads=2, basis="t",
                       allowed=bf16)  # fmt: skip
    assert plan.decoder.precision == "bf16"


def test_the_same_measurements_always_give_the_same_plan() -> None:
    m = measured(ORT, FAST_HUNGRY, timings("openvino", "fp32", 2.0, 100))  # a tie on speed
    plans = {choose_plan(m, asked(1500), threads=2, basis="t", allowed=order).decoder
             for order in (EVERYTHING, tuple(reversed(EVERYTHING)))}  # fmt: skip
    assert len(plans) == 1


def test_onnx_runtime_peaks_measured_whole_replace_the_sum() -> None:
    m = replace(measured(ORT), ort_peak_mb={128: 700.0, 256: 720.0, 512: 800.0})
    plan = choose_plan(m, asked(750), threads=2, basis="t", allowed=EVERYTHING)
    assert plan.decoder == DecoderChoice("onnxruntime", "fp32", 256)
    assert plan.peak_mb == 720.0


def with_first_calls(engine: EngineTimings, ms: dict[int, float]) -> EngineTimings:
    """``engine`` with its first-window calls (8, 16 and 32 frames + context) measured."""
    return replace(engine, call_ms={**engine.call_ms, **{f + CONTEXT: ms[f] for f in ms}})


@pytest.mark.parametrize(
    ("first_calls", "first"),
    [
        ({32: 100.0, 16: 70.0, 8: 55.0}, 32),  # a fast CPU keeps the 32-frame first window
        ({32: 300.0, 16: 95.0, 8: 80.0}, 16),
        ({32: 230.0, 16: 120.0, 8: 82.0}, 8),  # Zen 3, trimmed (see FIRST_CALL_TARGET_MS)
        ({32: 300.0, 16: 200.0, 8: 163.0}, 8),  # nothing within the target: the smallest
    ],
)
def test_the_first_window_is_the_largest_whose_call_is_within_the_target(
    first_calls: dict[int, float], first: int
) -> None:
    m = measured(with_first_calls(ORT, first_calls))
    plan = choose_plan(m, asked(1500), threads=2, basis="t", allowed=EVERYTHING[:3])
    assert plan.decoder.first_window_frames == first
    assert plan.windowing.first_window_frames == first
    assert plan.options[0].choice == plan.decoder
    alone = choose_plan(measured(ORT), asked(1500), threads=2, basis="t", allowed=EVERYTHING[:3])
    assert plan.decoder.window_frames == alone.decoder.window_frames  # judged as before


def test_the_first_window_stays_where_its_calls_were_not_measured_or_shapes_are_kept() -> None:
    assert choose_plan(measured(ORT), asked(1500), threads=2, basis="t",
                       allowed=EVERYTHING).decoder.first_window_frames == 32  # fmt: skip
    slow_first = {32: 300.0, 16: 200.0, 8: 163.0}
    m = measured(ORT, with_first_calls(FAST_HUNGRY, slow_first))
    plan = choose_plan(m, asked(1500), threads=2, basis="t", allowed=EVERYTHING)
    assert plan.decoder.engine == "openvino"  # OpenVINO is shown only its few lengths
    assert plan.decoder.first_window_frames == 32


@pytest.mark.parametrize(
    ("threads_ms", "chosen"),
    [
        ({1: 100.0, 2: 60.0}, 2),  # a second core: taken
        ({1: 100.0, 2: 97.0}, 1),  # an SMT sibling that adds 3%: left to the machine
        ({2: 100.0, 4: 120.0}, 2),  # siblings that contend: slower, not taken
        ({2: 100.0, 4: 80.0}, 4),
        ({4: 100.0}, 2),  # one count measured: the backend's
        ({}, 2),
    ],
)
def test_the_fewest_threads_within_reach_of_the_fastest_are_chosen(
    threads_ms: dict[int, float], chosen: int
) -> None:
    assert choose_threads(threads_ms, 2) == chosen


def test_the_plan_takes_the_thread_count_measured_on_its_own_engine() -> None:
    ort = replace(ORT, threads_ms={2: 1000.0, 4: 700.0})
    bf16 = replace(FAST_HUNGRY, threads_ms={2: 500.0, 4: 600.0})
    on_ort = choose_plan(measured(ort), asked(2000), threads=2, basis="t", allowed=EVERYTHING)
    assert on_ort.threads == 4 and "4 threads" in on_ort.describe()
    assert on_ort.threads_ms == ((2, 1000.0), (4, 700.0))
    on_bf16 = choose_plan(
        measured(ort, bf16), asked(2000), threads=2, basis="t", allowed=EVERYTHING
    )
    assert on_bf16.decoder.engine == "openvino" and on_bf16.threads == 2


def test_openvino_is_shown_only_the_schedules_lengths() -> None:
    choice = DecoderChoice("openvino", "bf16", 256)
    for frames in (5, 40, 61, 120, 300, 777, 1500):
        assert set(decoder_calls(choice, frames, CONTEXT)) <= set(choice.lengths(CONTEXT))


def test_a_decoder_fed_balanced_trims_is_judged_on_the_calls_it_then_gets() -> None:
    """Balanced trims pad every span by the whole context, which can take another call:
    the time predicted must be that of the calls a request then makes."""
    choice = DecoderChoice("openvino", "bf16", 64)
    for frames in range(1, 400):
        calls = decoder_calls(choice, frames, CONTEXT, balanced_trims=True)
        assert set(calls) <= set(choice.lengths(CONTEXT))
    # 40 frames and 30 of padding do not fit the first length: the next one holds them
    assert decoder_calls(choice, 40, CONTEXT) == [62]
    assert decoder_calls(choice, 40, CONTEXT, balanced_trims=True) == [94]
    trimmed = replace(FAST_HUNGRY, balanced_trims=True)
    judged = judge(choice, measured(ORT, trimmed), 5000, frames=(40,))
    assert judged is not None and judged.seconds == (trimmed.ms_at(94) / 1000,)


def test_candidates_follow_what_the_cpu_has() -> None:
    assert {c.engine for c in candidates(openvino=False, native_bf16=True)} == {"onnxruntime"}
    no_bf16 = candidates(openvino=True, native_bf16=False)
    assert {(c.engine, c.precision) for c in no_bf16} == {("onnxruntime", "fp32")}
    assert {(c.engine, c.precision) for c in candidates(openvino=True, native_bf16=True)} == {
        ("onnxruntime", "fp32"), ("openvino", "bf16")}  # fmt: skip
    every = candidates(openvino=True, native_bf16=True, openvino_fp32=True)
    assert ("openvino", "fp32") in {(c.engine, c.precision) for c in every}


def test_the_fallback_takes_bf16_only_under_a_budget_that_holds_it() -> None:
    def fallback(budget_mb: int, native_bf16: bool = True) -> DecoderChoice:
        plan = fallback_plan(asked(budget_mb), openvino=True, native_bf16=native_bf16,
                             threads=2, why="x")  # fmt: skip
        assert plan.basis == "fallback: x"
        return plan.decoder

    # bf16's measured peak (1,260-1,830 MB) is over the default budget on every CPU
    # measured, so where nothing is measured the default budget keeps float32 too.
    for budget in (600, DEFAULT_MEMORY_BUDGET_MB, FALLBACK_BF16_BUDGET_MB - 1):
        assert fallback(budget) == DecoderChoice("onnxruntime", "fp32")
    assert fallback(FALLBACK_BF16_BUDGET_MB) == DecoderChoice("openvino", "bf16")
    assert fallback(4000, native_bf16=False) == DecoderChoice("onnxruntime", "fp32")
    assert fallback_plan(asked(4000), openvino=False, native_bf16=True, threads=2,
                         why="x").decoder.engine == "onnxruntime"  # fmt: skip


# -- the store --------------------------------------------------------------------------


def key(**changes: object) -> PlanKey:
    base = PlanKey("Test CPU", ("avx2",), 2, (2,), (("decoder", 59_000_000), ("context", 15)),
                   (("onnxruntime", "1.0"), ("openvino", "2026.1")))  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_faster_layout_of_the_decoder_is_taken_and_its_memory_counted() -> None:
    """The decoder's stages in another layout (runtime/decoder_layouts.py) are options on
    ONNX Runtime; the whole peaks were measured with the bundle's own graph, so another
    layout's peak is that plus what its decoder alone held more."""
    allowed = candidates(openvino=False, native_bf16=False, layouts=(128,))
    assert {c.layout for c in allowed} == {0, 128} and {c.engine for c in allowed} == {
        "onnxruntime"}  # fmt: skip
    assert all(c.layout == 0 for c in candidates(openvino=True, native_bf16=True, layouts=(128,))
               if c.engine == "openvino")  # fmt: skip
    faster = replace(timings("onnxruntime", "fp32", 3.0, 40), layout=128)  # 25% faster
    peaks = {128: 700.0, 256: 740.0, 512: 800.0}
    m = replace(measured(ORT, faster), ort_peak_mb=peaks)
    plan = choose_plan(m, asked(2000), threads=2, basis="t", allowed=allowed)
    assert plan.decoder.layout == 128 and "2-D from 128 channels" in str(plan.decoder)
    same = replace(ORT, layout=128)  # the same speed: the bundle's own graph is kept
    assert choose_plan(replace(m, engines=(ORT, same)), asked(2000), threads=2, basis="t",
                       allowed=allowed).decoder.layout == 0  # fmt: skip
    hungry = replace(faster, memory_mb={n: mb + 150 for n, mb in faster.memory_mb.items()})
    over = choose_plan(replace(m, engines=(ORT, hungry)), asked(800), threads=2, basis="t",
                       allowed=allowed)  # fmt: skip
    assert over.decoder.layout == 0  # 700 + 150 MB is over 800 for every window
    refused = [o for o in over.options if o.choice.layout == 128]
    assert refused and all(o.refused and o.peak_mb >= 850 for o in refused)


def test_measurements_are_kept_and_read_back(tmp_path: Path) -> None:
    store = PlanStore(tmp_path)
    ort = replace(ORT, threads_ms={2: 800.0, 4: 610.5})
    bf16 = replace(FAST_HUNGRY, balanced_trims=True)
    m = replace(measured(ort, bf16, replace(ORT, layout=128)), ort_peak_mb={256: 777.0})
    store.save(key(thread_choices=(2, 4)), m, "2026-11-26")
    assert store.load(key(thread_choices=(2, 4))) == (m, "2026-11-26")


@pytest.mark.parametrize(
    "change",
    [
        {"cpu": "Another CPU"},
        {"cpu_flags": ("avx2", "amx_bf16")},
        {"threads": 4},
        {"thread_choices": (2, 4)},
        {"architecture": (("decoder", 1_000_000), ("context", 15))},
        {"engines": (("onnxruntime", "1.1"), ("openvino", "2026.1"))},
        {"engines": (("onnxruntime", "1.0"), ("openvino", "none"))},
        {"format": 999},
    ],
)
def test_anything_the_measurement_depends_on_is_a_new_key(tmp_path: Path, change: dict) -> None:
    store = PlanStore(tmp_path)
    store.save(key(), measured(ORT), "2026-11-26")
    assert store.load(key(**change)) is None


@pytest.mark.parametrize("content", ["{not json", "[]", '{"key": 1}', "", '{"key": null, "x": 1}'])
def test_an_unreadable_file_is_measured_over(tmp_path: Path, content: str) -> None:
    store = PlanStore(tmp_path)
    store.path(key()).write_text(content)
    assert store.load(key()) is None


def test_a_file_for_another_key_under_the_same_name_is_not_used(tmp_path: Path) -> None:
    store = PlanStore(tmp_path)
    store.save(key(cpu="Other"), measured(ORT), "2026-11-26")
    store.path(key(cpu="Other")).rename(store.path(key()))
    assert store.load(key()) is None


# -- the planner ------------------------------------------------------------------------


class CountingMeasure:
    def __init__(self, result: Measurements | Exception) -> None:
        self.result = result
        self.jobs: list[MeasureJob] = []

    def __call__(self, job: MeasureJob, steps: object = None) -> Measurements:
        self.jobs.append(job)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def planner(tmp_path: Path, measure: CountingMeasure, **kw: object) -> Planner:
    sessions = Sessions(2, openvino=False)
    bert = BertGraph(TINY / "bert", TINY / "bert" / "bert_q8.onnx", None, "q8")
    request = PlanRequest(str(kw.pop("decoder_precision", "auto")),
                          int(kw.pop("budget_mb", DEFAULT_MEMORY_BUDGET_MB)),  # type: ignore[call-overload]
                          bool(kw.pop("measure_plan", True)))  # fmt: skip
    return Planner(sessions, bert, request, store=PlanStore(tmp_path / "plans"),
                   measure_fn=measure, **kw)  # type: ignore[arg-type]  # fmt: skip


def big_voice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The tiny voice's manifest, its decoder taken for a full-size one (as planned)."""
    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: 59_000_000)
    return read_manifest(TINY)


def test_a_voice_is_measured_once_then_planned_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = big_voice(tmp_path, monkeypatch)
    measure = CountingMeasure(measured(ORT))
    first = planner(tmp_path, measure).plan_for(manifest)
    again = planner(tmp_path, measure).plan_for(manifest)  # a new process, the same cache
    assert len(measure.jobs) == 1
    assert first.decoder == again.decoder and first.basis.startswith("measured on")
    job = measure.jobs[0]
    assert set(job.lengths) == {ORT_FP32}  # no OpenVINO here: not measured
    context = manifest.receptive_field_frames
    schedule = DecoderChoice("onnxruntime", "fp32", 512).lengths(context)
    assert job.lengths[ORT_FP32] == tuple(sorted({*schedule, *first_call_lengths(context)}))


def test_a_new_budget_rechooses_without_measuring_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = big_voice(tmp_path, monkeypatch)
    # Longer calls cost less a frame, so each larger window is >3% faster (and heavier).
    longer_cheaper = replace(ORT, call_ms={62: 250.0, 94: 380.0, 158: 640.0, 286: 1150.0,
                                           542: 1700.0})  # fmt: skip
    measure = CountingMeasure(replace(measured(longer_cheaper),
                                      ort_peak_mb={128: 700.0, 256: 760.0, 512: 900.0}))  # fmt: skip
    roomy = planner(tmp_path, measure, budget_mb=1000).plan_for(manifest)
    middle = planner(tmp_path, measure, budget_mb=800).plan_for(manifest)
    tight = planner(tmp_path, measure, budget_mb=750).plan_for(manifest)
    assert len(measure.jobs) == 1
    # Larger windows recompute less context: faster, and more memory.
    assert [p.decoder.window_frames for p in (roomy, middle, tight)] == [512, 256, 128]


def test_a_failed_measurement_falls_back_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = big_voice(tmp_path, monkeypatch)
    plan = planner(tmp_path, CountingMeasure(MeasureError("boom"))).plan_for(manifest)
    assert plan.basis.startswith("fallback: measuring failed") and "boom" in plan.basis
    assert not list((tmp_path / "plans").glob("*.json"))


def test_measuring_off_small_decoders_and_int8_are_never_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measure = CountingMeasure(measured(ORT))
    for precision in ("auto", "fp32"):
        small = planner(tmp_path, measure, decoder_precision=precision).plan_for(
            read_manifest(TINY)
        )
        assert "small decoder" in small.basis
    with pytest.raises(ValueError, match="runs on OpenVINO, which is not available"):
        planner(tmp_path, measure, decoder_precision="bf16").plan_for(read_manifest(TINY))
    manifest = big_voice(tmp_path, monkeypatch)
    off = planner(tmp_path, measure, measure_plan=False)
    assert off.plan_for(manifest).basis == "fallback: measuring is off"
    int8 = planner(tmp_path, measure, decoder_precision="int8").plan_for(manifest)
    assert int8.decoder.engine == "onnxruntime"
    assert measure.jobs == []


@pytest.mark.parametrize(("asked", "choices"), [(None, (2, 4)), (2, (2,)), (3, (3,))])
def test_thread_counts_are_measured_only_when_none_was_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asked: int | None, choices: tuple[int, ...]
) -> None:
    monkeypatch.setattr("yomiage.runtime.engines.sessions.thread_choices", lambda: (2, 4))
    monkeypatch.setattr("yomiage.runtime.engines.sessions.physical_cores", lambda: 2)
    manifest = big_voice(tmp_path, monkeypatch)
    measure = CountingMeasure(measured(replace(ORT, threads_ms={2: 900.0, 4: 600.0})))
    bert = BertGraph(TINY / "bert", TINY / "bert" / "bert_q8.onnx", None, "q8")
    plan = Planner(Sessions(asked, openvino=False), bert, PlanRequest(measure_plan=True),
                   store=PlanStore(tmp_path), measure_fn=measure).plan_for(manifest)  # fmt: skip
    (job,) = measure.jobs
    assert job.thread_choices == choices and job.threads == (asked or 2)
    assert job.threads_length == 256 + 2 * manifest.receptive_field_frames
    # The kept measurements hold both counts; a count asked for is not second-guessed.
    assert plan.threads == (4 if asked is None else asked)


def test_the_environment_turns_measuring_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YOMIAGE_PLAN_MEASURE", "0")
    bert = BertGraph(TINY / "bert", TINY / "bert" / "bert_q8.onnx", None, "q8")
    assert Planner(Sessions(2, openvino=False), bert).request.measuring() == "off"
    monkeypatch.setenv("YOMIAGE_PLAN_MEASURE", "1")
    assert Planner(Sessions(2, openvino=False), bert).request.measuring() == "now"
    monkeypatch.delenv("YOMIAGE_PLAN_MEASURE")
    assert Planner(Sessions(2, openvino=False), bert).request.measuring() == "later"


def test_the_plan_file_is_plain_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = big_voice(tmp_path, monkeypatch)
    planner(tmp_path, CountingMeasure(measured(ORT))).plan_for(manifest)
    (path,) = (tmp_path / "plans").glob("*.json")
    data = json.loads(path.read_text())
    assert data["key"]["threads"] == 2 and data["measurements"]["floor_mb"] == 600


def test_a_voice_opens_its_graphs_on_its_plans_threads() -> None:
    from yomiage.runtime.onnx_voice import BundleVoice
    from yomiage.runtime.plan.value import Plan

    sessions = Sessions(2, openvino=False)
    plan = Plan(DecoderChoice("onnxruntime", "fp32"), PlanRequest(), "test", threads=1)
    voice = BundleVoice(TINY, sessions, plan)
    for graph in (voice.encoder, voice.flow, voice.decoder):
        assert graph.session.get_session_options().intra_op_num_threads == 1
    assert voice.info.runtime.endswith(", 1 thread (measured)")
    bert = sessions.open(TINY / "bert" / "bert_q8.onnx")  # the shared BERT keeps the backend's
    assert bert.session.get_session_options().intra_op_num_threads == 2


@pytest.mark.slow
def test_the_measuring_processes_measure_every_length_and_thread_count(tmp_path: Path) -> None:
    """The real measuring (fresh processes) on the tiny voice: every number asked for comes
    back, for the bundle's decoder and for it in another layout. Values are not judged:
    a tiny graph's timings mean nothing."""
    from yomiage.runtime.decoder_layouts import DecoderLayouts

    manifest = read_manifest(TINY)
    context = manifest.receptive_field_frames
    paired = 32 + 2 * context  # the other layout is timed beside the bundle's here
    lengths = tuple(sorted({23, 31, 47, 79, paired}))
    job = MeasureJob(
        decoder=manifest.file("decoder.onnx"),
        bundle=TINY,
        bert=TINY / "bert",
        tokenizer=None,
        bert_precision="q8",
        threads=1,
        lengths={ORT_FP32: lengths},
        thread_choices=(1, 2),
        threads_length=47,
        ort_windows=(16, 32),
        context=context,
        compiled_dir=None,
        layouts={1: DecoderLayouts(tmp_path).graph(manifest.file("decoder.onnx"), "tiny", 1)},
    )
    said: list[str] = []
    m = measure(job, progress=said.append)
    assert [e.layout for e in m.engines] == [0, 1]
    for ort in m.engines:
        assert set(ort.call_ms) == set(ort.memory_mb) == set(lengths)
        assert set(ort.threads_ms) == {1, 2}
        assert all(ms > 0 for ms in (*ort.call_ms.values(), *ort.threads_ms.values()))
    assert m.floor_mb > 0 and set(m.ort_peak_mb) == {16, 32}
    assert len(said) == 3  # one line per process
    assert "2-D from 1 channels" in said[1]
    # The other layout's times are the bundle's, scaled by one ratio timed side by side.
    own, other = m.engines
    ratios = [other.call_ms[n] / own.call_ms[n] for n in lengths]  # each rounded to 0.01 ms
    assert max(ratios) == pytest.approx(min(ratios), rel=0.02) and 0.2 <= ratios[0] <= 5


def test_an_explicit_bf16_after_auto_measures_what_auto_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a CPU without native bfloat16, ``auto`` measures ONNX Runtime only; a later
    ``decoder_precision="bf16"`` (same key) must not be judged on measurements that hold
    no bfloat16 (it used to raise ValueError from deep inside): it measures again, all
    of it, and ``auto`` then plans from that file without measuring."""
    manifest = big_voice(tmp_path, monkeypatch)
    monkeypatch.setattr(Sessions, "has_openvino", property(lambda self: True))
    monkeypatch.setattr(Sessions, "native_bf16", property(lambda self: False))
    first = CountingMeasure(measured(ORT))
    auto = planner(tmp_path, first).plan_for(manifest)
    assert auto.decoder.engine == "onnxruntime"
    assert set(first.jobs[0].lengths) == {ORT_FP32}
    second = CountingMeasure(measured(ORT, FAST_HUNGRY))
    asked = planner(tmp_path, second, decoder_precision="bf16").plan_for(manifest)
    assert len(second.jobs) == 1 and OPENVINO_BF16 in second.jobs[0].lengths
    assert asked.decoder.precision == "bf16" and asked.basis.startswith("measured on")
    third = CountingMeasure(measured(ORT))
    again = planner(tmp_path, third).plan_for(manifest)
    assert third.jobs == [] and again.decoder.engine == "onnxruntime"


def test_an_engine_that_could_not_be_measured_is_remembered_and_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenVINO installed but unable to run the decoder: the measurement keeps ONNX
    Runtime's timings and notes the failure, so an explicit bf16 takes the fallback (as
    asked) every time without measuring every time."""
    manifest = big_voice(tmp_path, monkeypatch)
    monkeypatch.setattr(Sessions, "has_openvino", property(lambda self: True))
    broken = replace(measured(ORT), unavailable=(OPENVINO_BF16,))
    measure = CountingMeasure(broken)
    plans = [planner(tmp_path, measure, decoder_precision="bf16").plan_for(manifest)
             for _ in range(2)]  # fmt: skip
    assert len(measure.jobs) == 1
    for plan in plans:
        assert plan.decoder == DecoderChoice("openvino", "bf16")
        assert plan.basis.startswith("fallback: nothing measured could run")


def test_measuring_leaves_out_an_engine_that_fails_but_not_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A measuring process that fails on OpenVINO costs that option only; one that fails
    on ONNX Runtime float32 (the reference) fails the measurement."""
    import yomiage.runtime.plan.measure as plan_measure

    def child(args: dict) -> dict:
        if args["what"] == "floor":
            return {"peak_mb": 600.0, "ort_peak_mb": {}, "flow_ms": {"96": 20.0}}
        if args["engine"] in failing:
            raise MeasureError(f"{args['engine']} refused the decoder", lasting=True)
        return {"call_ms": {"62": 10.0}, "memory_mb": {"62": 5.0}, "threads_ms": {}}

    monkeypatch.setattr(plan_measure, "_child", child)
    job = MeasureJob(decoder=Path("d.onnx"), bundle=Path("."), bert=Path("."), tokenizer=None,
                     bert_precision="q8", threads=2,
                     lengths={ORT_FP32: (62,), OPENVINO_BF16: (62,)},
                     thread_choices=(2,), threads_length=62, ort_windows=(), context=CONTEXT,
                     compiled_dir=None)  # fmt: skip
    failing = {"openvino"}
    m = measure(job, progress=lambda _: None)
    assert [(e.engine, e.precision) for e in m.engines] == [("onnxruntime", "fp32")]
    assert m.unavailable == (OPENVINO_BF16,)
    failing = {"onnxruntime"}
    with pytest.raises(MeasureError, match="onnxruntime"):
        measure(job, progress=lambda _: None)
