"""The rule that turns measurements into a plan: :func:`choose_plan`, and :func:`judge`,
the prediction of one option's time and memory it rests on; with the smaller rules they
use (the decoder calls a sentence takes, the thread count, the first window).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from yomiage.runtime.chunking import DEFAULT_FIRST_WINDOW_FRAMES, fixed_windows, windows
from yomiage.runtime.engines.cpu import THREADS_WORTH
from yomiage.runtime.engines.placement import ORT_BF16, ORT_FP32
from yomiage.runtime.plan.measurements import EngineTimings, FlowTimings, Measurements
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.value import DecoderChoice, Plan, PlanOption

# Sentence lengths (decoder frames, ~11.6 ms each at 44.1 kHz) a plan is judged on: a
# word, a short reply, a typical sentence, a long one, one near the flow's span.
REFERENCE_SENTENCE_FRAMES = (40, 120, 250, 450, 700, 1000)
# A stream's first decoder window, largest first. Its call waits before any audio, and
# it has no frames before it, so it is padded on one side only; a smaller one costs one
# more call, on the stream's first sentence only (measured:
# benchmarks/history/issue-32.md, second pass).
FIRST_WINDOW_CHOICES = (DEFAULT_FIRST_WINDOW_FRAMES, 16, 8)
# What a 0.3 s first audio leaves the first decoder call, once BERT, the encoder and the
# flow of a short sentence have run before it (their times: benchmarks/history/issue-32.md,
# second and fifth passes).
FIRST_CALL_TARGET_MS = 100.0
# A plan that holds more memory must be predicted at least this much faster than a
# lighter one to be taken; closer than that the two are even, and the lighter wins: two
# measurings of the same decoder minutes apart put its schedules about this far apart
# either way, and taking the nearer one cost memory for no speed that could be told
# apart (measured: benchmarks/history/issue-32.md, seventh pass).
SPEED_WORTH_MEMORY = 0.03
# The flow with bfloat16 weights against the float32 one, each call: it widens its 74 MB
# of weights on every call (the full-size flow alone at 40-495 frames, median of 7
# paired runs: 1.21x the time on an Intel Xeon with AMX; benchmarks/RESULTS.md).
LIGHT_FLOW_COST = 1.21
# What every option is judged against, and under ``auto`` may be no slower than: ONNX
# Runtime float32 at the default windows (exact, and measured on every machine).
REFERENCE = DecoderChoice.at(ORT_FP32)


def judge(
    choice: DecoderChoice,
    measured: Measurements,
    budget_mb: int,
    frames: Sequence[int] = REFERENCE_SENTENCE_FRAMES,
    light_flow_mb: float | None = None,
) -> PlanOption | None:
    """``choice`` predicted from the measurements (None when its engine or its
    largest length was not measured): seconds of flow and decoder per sentence and
    the peak, with the flow where it may run with it
    (:meth:`~yomiage.runtime.plan.measurements.Measurements.flow_with`) if that is faster and its
    peak fits ``budget_mb``, else on ONNX Runtime: in float32, or, where that is over
    the budget and ``light_flow_mb`` is given (the MB its bfloat16 weights save,
    :mod:`yomiage.runtime.light_flows`), with bfloat16 weights."""
    variants = judge_variants(choice, measured, budget_mb, frames, light_flow_mb)
    return variants[0] if variants else None


def judge_variants(
    choice: DecoderChoice,
    measured: Measurements,
    budget_mb: int,
    frames: Sequence[int] = REFERENCE_SENTENCE_FRAMES,
    light_flow_mb: float | None = None,
) -> list[PlanOption]:
    """:func:`judge`'s option first, then, where the flow moved with the decoder
    would be faster but not fit ``budget_mb``, that one too (refused): it is what a
    larger budget buys (on some CPUs the flow moved too decodes much faster than the
    option that fits; measured: benchmarks/history/issue-32.md, twelfth pass), and
    ``yomiage bench`` offers it only if the options hold it."""
    timings = measured.engine(choice.engine, choice.precision, choice.layout)
    if timings is None:
        return []
    lengths = choice.lengths(measured.context)
    memory = timings.memory_up_to(lengths[-1])
    if memory is None:
        return []
    own = measured.engine(choice.engine, choice.precision)  # the bundle's layout
    own_memory = own.memory_up_to(lengths[-1]) if own is not None else None
    # The whole peaks were measured with the bundle's graph; another layout's decoder
    # holds what it held more or less alone at the same lengths.
    extra = memory - own_memory if own_memory is not None else 0.0
    seconds = tuple(
        sum(
            timings.ms_at(n)
            for n in decoder_calls(
                choice, f, measured.context, balanced_trims=timings.balanced_trims
            )
        )
        / 1000
        for f in frames
    )
    peak = measured.floor_mb + memory
    if choice.placement == ORT_FP32 and choice.window_frames in measured.ort_peak_mb:
        peak = max(measured.floor_mb, measured.ort_peak_mb[choice.window_frames] + extra)
    fp32_flow = measured.flow_on(ORT_FP32)
    stays = PlanOption(choice, _with_flow(seconds, fp32_flow, frames), peak,
                       _over(peak, budget_mb))  # fmt: skip
    if stays.refused is not None and light_flow_mb:
        # Its weights are all it saves; timed as the float32 flow and its widening.
        light = light_flow_timings(fp32_flow) if fp32_flow is not None else None
        lighter = stays.peak_mb - light_flow_mb
        stays = PlanOption(choice, _with_flow(seconds, light, frames), lighter,
                           _over(lighter, budget_mb), ORT_BF16)  # fmt: skip
    flow = measured.flow_with(choice)
    if flow is None or choice.window_frames not in flow.peak_mb:
        return [stays]
    # Measured with every bucket run; its floor leaves the lengths under it unrun.
    with_flow = flow.peak_mb[choice.window_frames] - flow.floor_saving_mb
    moved = PlanOption(choice, _with_flow(seconds, flow, frames), with_flow,
                       _over(with_flow, budget_mb), flow.placement, flow.floor)  # fmt: skip
    if moved.refused is None and (stays.refused is not None or moved.total_s < stays.total_s):
        return [moved]
    if moved.refused is not None and stays.refused is not None and moved.peak_mb < stays.peak_mb:
        return [moved]
    if moved.refused is not None and stays.refused is None and moved.total_s < stays.total_s:
        return [stays, moved]
    return [stays]


def light_flow_timings(fp32: FlowTimings) -> FlowTimings:
    """The flow with bfloat16 weights (:mod:`yomiage.runtime.light_flows`), predicted from
    the float32 flow's timings: widening its weights on every call costs
    :data:`LIGHT_FLOW_COST` of its time."""
    return FlowTimings(ORT_BF16, {n: ms * LIGHT_FLOW_COST for n, ms in fp32.call_ms.items()})


def _with_flow(
    seconds: tuple[float, ...], flow: FlowTimings | None, frames: Sequence[int]
) -> tuple[float, ...]:
    """The decoder's ``seconds`` per sentence with the flow's added (nothing where the
    flow was not timed: the same for every option then)."""
    if flow is None:
        return seconds
    return tuple(s + flow.ms_for(f) / 1000 for s, f in zip(seconds, frames, strict=True))


def _over(peak: float, budget_mb: int) -> str | None:
    """Why a predicted ``peak`` is refused (None: it fits). Compared in whole MB, as the
    budget is given and the peak shown: a plan predicted at 1,000.2 MB was refused a
    1,000 MB budget it then held with room (issue 48), for a fraction of a MB below
    what the prediction can tell."""
    if round(peak) > budget_mb:
        return f"~{peak:.0f} MB peak is over the {budget_mb} MB budget"
    return None


def choose_plan(
    measured: Measurements,
    request: PlanRequest,
    *,
    threads: int,
    basis: str,
    allowed: Iterable[DecoderChoice],
    frames: Sequence[int] = REFERENCE_SENTENCE_FRAMES,
    thread_choices: Iterable[int] | None = None,
    light_flow_mb: float | None = None,
) -> Plan:
    """The fastest of ``allowed`` over the reference sentences whose predicted peak
    fits the request's memory budget and (where it asks ``auto``; an explicit
    precision is honoured) that is no slower than ONNX Runtime float32 (at the
    default windows) on any of them. Options within
    :data:`SPEED_WORTH_MEMORY` of the fastest are even: of those, the one with the
    least memory is taken, then the faster, then the first in the order of
    :class:`DecoderChoice`, so the same measurements always give the same plan. When
    nothing fits the budget, the option with the least memory is taken (its ``basis``
    says so): a plan that runs is better than none. ``threads`` is the count the
    decoder was measured at; where the chosen engine was measured at other counts too
    (of ``thread_choices``, when given), :func:`choose_threads` picks among them.
    ``light_flow_mb``: the flow's bfloat16 weights may bring an option under the budget
    (:func:`judge`); of even options, one without them is taken first."""
    budget_mb = request.memory_budget_mb
    require_faster = request.decoder_precision == "auto"
    variants = [judge_variants(c, measured, budget_mb, frames, light_flow_mb) for c in allowed]
    judged = [v[0] for v in variants if v]
    over_budget = [o for v in variants for o in v[1:]]  # shown, never chosen
    reference = judge(REFERENCE, measured, budget_mb, frames)
    if reference is None:
        raise ValueError("the measurements hold no ONNX Runtime float32 decoder to compare with")
    if not judged:
        raise ValueError("none of the choices allowed was measured")
    options = []
    for o in judged:
        slower = [
            f for f, mine, base in zip(frames, o.seconds, reference.seconds, strict=True)
            if mine > base
        ]  # fmt: skip
        if require_faster and o.refused is None and slower and o.choice.placement != ORT_FP32:
            o = replace(o, refused=f"slower than ONNX Runtime float32 at {slower[0]} frames")
        options.append(o)
    eligible = [o for o in options if o.refused is None]
    if eligible:
        fastest = min(o.total_s for o in eligible)
        even = [o for o in eligible if o.total_s <= fastest * (1 + SPEED_WORTH_MEMORY)]
        best = min(even, key=lambda o: (o.flow == ORT_BF16, o.peak_mb, round(o.total_s, 4),
                                        o.choice))  # fmt: skip
        why = basis
    else:
        best = min(options, key=lambda o: (o.peak_mb, o.total_s, o.choice))
        why = f"{basis}; no option fits the budget, the smallest taken"
    others = sorted((*(o for o in options if o is not best), *over_budget),
                    key=lambda o: (o.refused is not None, o.total_s))  # fmt: skip
    timings = measured.engine(best.choice.engine, best.choice.precision, best.choice.layout)
    threads_ms: dict[int, float] = {}
    if timings is not None and not best.choice.keeps_shapes:
        # Judged at the default first window (a stream's first call, the same for all);
        # the first window itself is for first audio, chosen on its own measured call.
        choice = replace(best.choice, first_window_frames=first_window(timings, measured.context))
        best = replace(best, choice=choice)
    if timings is not None:  # the decoder is 85% of the work: its count is the voice's
        counts = set(timings.threads_ms if thread_choices is None else thread_choices)
        threads_ms = {t: ms for t, ms in timings.threads_ms.items() if t in counts}
        threads = choose_threads(threads_ms, threads)
    ranked = [best, *others]
    chosen_among = tuple(sorted(threads_ms.items())) if len(threads_ms) > 1 else ()
    return Plan(best.choice, request, why, threads, flow=best.flow, peak_mb=best.peak_mb,
                options=tuple(ranked), threads_ms=chosen_among,
                fits_budget=bool(eligible), flow_floor=best.flow_floor)  # fmt: skip


def decoder_calls(
    choice: DecoderChoice, frames: int, context: int, *, balanced_trims: bool = False
) -> list[int]:
    """The padded lengths of the decoder calls that decode a sentence of ``frames``
    frames under ``choice`` (as :class:`~yomiage.runtime.onnx_voice.BundleVoice`
    makes them when audio streams from the start; ``balanced_trims``: as it makes
    them for a decoder fed those)."""
    first = min(choice.first_window_frames, choice.window_frames)
    if choice.keeps_shapes:
        padding = 2 * context if balanced_trims else 0
        return [
            window.pad_stop - window.pad_start + zeros
            for window, zeros in fixed_windows(
                frames, choice.window_frames, context, first, min_padding=padding
            )
        ]
    return [w.pad_stop - w.pad_start for w in windows(frames, choice.window_frames, context, first)]


def choose_threads(threads_ms: Mapping[int, float], default: int) -> int:
    """The fewest threads within :data:`THREADS_WORTH` of the fastest measured count;
    ``default`` where fewer than two counts were measured."""
    if len(threads_ms) < 2:
        return default
    fastest = min(threads_ms.values())
    return min(t for t, ms in threads_ms.items() if ms <= fastest * (1 + THREADS_WORTH))


def first_call_lengths(context: int) -> tuple[int, ...]:
    """The padded lengths of the first-window choices' calls (padding after only)."""
    return tuple(sorted(f + context for f in FIRST_WINDOW_CHOICES))


def first_window(timings: EngineTimings, context: int) -> int:
    """The largest first window whose call was measured within
    :data:`FIRST_CALL_TARGET_MS`; the smallest where none was; the default where
    those lengths were not measured."""
    measured = [f for f in FIRST_WINDOW_CHOICES if f + context in timings.call_ms]
    if len(measured) < len(FIRST_WINDOW_CHOICES):
        return DEFAULT_FIRST_WINDOW_FRAMES
    within = [f for f in measured if timings.call_ms[f + context] <= FIRST_CALL_TARGET_MS]
    return max(within) if within else min(measured)
