"""The rule that turns measurements into a plan: :func:`choose_plan`, and
:func:`judge`, the prediction of one option's time and memory it rests on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from yomiage.runtime.placement import ORT_F32
from yomiage.runtime.plan import (
    REFERENCE_SENTENCE_FRAMES,
    SPEED_WORTH_MEMORY,
    DecoderChoice,
    FlowTimings,
    Measurements,
    Plan,
    PlanOption,
    choose_threads,
    decoder_calls,
    first_window,
)


def judge(
    choice: DecoderChoice,
    measured: Measurements,
    budget_mb: int,
    frames: Sequence[int] = REFERENCE_SENTENCE_FRAMES,
) -> PlanOption | None:
    """``choice`` predicted from the measurements (None when its engine or its
    largest length was not measured): seconds of flow and decoder per sentence and
    the peak, with the flow where it may run with it
    (:meth:`~yomiage.runtime.plan.Measurements.flow_with`) if that is faster and its
    peak fits ``budget_mb``, else on ONNX Runtime."""
    variants = judge_variants(choice, measured, budget_mb, frames)
    return variants[0] if variants else None


def judge_variants(
    choice: DecoderChoice,
    measured: Measurements,
    budget_mb: int,
    frames: Sequence[int] = REFERENCE_SENTENCE_FRAMES,
) -> list[PlanOption]:
    """:func:`judge`'s option first, then, where the flow moved with the decoder
    would be faster but not fit ``budget_mb``, that one too (refused): it is what a
    larger budget buys (on a Xeon with AMX, 2.8x the decoding speed of float32 for
    ~70 MB over the default budget, where the option that fits gives 1.6x), and
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
    if choice.engine == "onnxruntime" and choice.window_frames in measured.ort_peak_mb:
        peak = max(measured.floor_mb, measured.ort_peak_mb[choice.window_frames] + extra)
    stays = PlanOption(choice, _with_flow(seconds, measured.flow_on(ORT_F32), frames), peak,
                       _over(peak, budget_mb))  # fmt: skip
    flow = measured.flow_with(choice)
    if flow is None or choice.window_frames not in flow.peak_mb:
        return [stays]
    with_flow = flow.peak_mb[choice.window_frames]
    moved = PlanOption(choice, _with_flow(seconds, flow, frames), with_flow,
                       _over(with_flow, budget_mb), flow.placement)  # fmt: skip
    if moved.refused is None and (stays.refused is not None or moved.total_s < stays.total_s):
        return [moved]
    if moved.refused is not None and stays.refused is not None and moved.peak_mb < stays.peak_mb:
        return [moved]
    if moved.refused is not None and stays.refused is None and moved.total_s < stays.total_s:
        return [stays, moved]
    return [stays]


def _with_flow(
    seconds: tuple[float, ...], flow: FlowTimings | None, frames: Sequence[int]
) -> tuple[float, ...]:
    """The decoder's ``seconds`` per sentence with the flow's added (nothing where the
    flow was not timed: the same for every option then)."""
    if flow is None:
        return seconds
    return tuple(s + flow.ms_for(f) / 1000 for s, f in zip(seconds, frames, strict=True))


def _over(peak: float, budget_mb: int) -> str | None:
    """Why a predicted ``peak`` is refused (None: it fits)."""
    if peak > budget_mb:
        return f"~{peak:.0f} MB peak is over the {budget_mb} MB budget"
    return None


def choose_plan(
    measured: Measurements,
    budget_mb: int,
    *,
    threads: int,
    basis: str,
    allowed: Iterable[DecoderChoice],
    frames: Sequence[int] = REFERENCE_SENTENCE_FRAMES,
    require_faster: bool = True,
    thread_choices: Iterable[int] | None = None,
) -> Plan:
    """The fastest of ``allowed`` over the reference sentences whose predicted peak
    fits ``budget_mb`` and (``require_faster``, as ``auto`` asks) that is no slower
    than ONNX Runtime float32 (at the default windows) on any of them. Options within
    :data:`SPEED_WORTH_MEMORY` of the fastest are even: of those, the one with the
    least memory is taken, then the faster, then the first in the order of
    :class:`DecoderChoice`, so the same measurements always give the same plan. When
    nothing fits the budget, the option with the least memory is taken (its ``basis``
    says so): a plan that runs is better than none. ``threads`` is the count the
    decoder was measured at; where the chosen engine was measured at other counts too
    (of ``thread_choices``, when given), :func:`choose_threads` picks among them."""
    variants = [judge_variants(c, measured, budget_mb, frames) for c in allowed]
    judged = [v[0] for v in variants if v]
    over_budget = [o for v in variants for o in v[1:]]  # shown, never chosen
    reference = judge(DecoderChoice("onnxruntime", "f32"), measured, budget_mb, frames)
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
        if require_faster and o.refused is None and slower and o.choice.engine != "onnxruntime":
            o = replace(o, refused=f"slower than ONNX Runtime float32 at {slower[0]} frames")
        options.append(o)
    eligible = [o for o in options if o.refused is None]
    if eligible:
        fastest = min(o.total_s for o in eligible)
        even = [o for o in eligible if o.total_s <= fastest * (1 + SPEED_WORTH_MEMORY)]
        best = min(even, key=lambda o: (o.peak_mb, round(o.total_s, 4), o.choice))
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
    return Plan(best.choice, budget_mb, why, threads, flow=best.flow, peak_mb=best.peak_mb,
                options=tuple(ranked), threads_ms=chosen_among,
                fits_budget=bool(eligible))  # fmt: skip
