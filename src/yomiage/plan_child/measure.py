"""What runs in each measuring process of :mod:`yomiage.runtime.plan.measure`
(``python -m yomiage.plan_child.measure JSON``): OpenVINO's decoder compiled into the
cache, the decoder timed on one engine, the floor of everything else, or the flow off
ONNX Runtime beside the decoder; one JSON line out. Kept apart from the side that starts
these processes and reads their lines, which a planner imports: nothing here is loaded
there.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yomiage.lifeline import die_with_parent_from_environment
from yomiage.runtime.plan.measure import REFUSED, MeasureError
from yomiage.runtime.plan.request import MEASURE_ENV

# A request as long as a paragraph (about 40 s of speech in 9 sentences, one of them
# over 10 s): what the floor is measured on.
LONG_SENTENCE = (
    "小さな公園の前を通り過ぎると、ベンチに座ったおじいさんが新聞を広げながら、"
    "足元に集まってきた鳩たちにパンくずを少しずつ分けてあげているのが見えました。"
)
CALIBRATION_TEXT = (
    "春の朝、駅へ向かう道には桜の花びらが舞っていました。"
    + LONG_SENTENCE
    + "角のパン屋からは焼きたてのクロワッサンの香りが漂ってきます。"
    "店の前には、もう何人かの人が静かに並んでいました。"
    "私は少し迷ってから、列の一番後ろに加わることにしました。"
    "順番を待つあいだ、空を見上げると、白い雲がゆっくりと東へ流れていきました。"
    "やがて扉が開き、店員さんが明るい声で挨拶をしてくれました。"
    "今日も一日、良いことがありますように。"
)
TIMED_RUNS = 5
# Flow spans timed on each engine: a word, then buckets of flow_lengths (a padded flow
# runs at exactly these; the word at the first): short, typical, long and the longest.
FLOW_TIMING_FRAMES = (40, 96, 160, 384, 896)


def _memory_mb() -> tuple[float, float]:
    """(resident, high-water mark) of this process in MB (Linux; elsewhere from
    ``resource``, which gives only the high-water mark)."""
    try:
        fields = {}
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
        return fields["VmRSS"], fields["VmHWM"]
    except (OSError, KeyError, ValueError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return peak, peak


def _time_decoder(args: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from yomiage.runtime.bundle import read_manifest
    from yomiage.runtime.engines.placement import Placement
    from yomiage.runtime.engines.sessions import Sessions, probe_speaker
    from yomiage.runtime.plan.choose import first_call_lengths
    from yomiage.runtime.stage_trims import TRIM_INPUT

    compiled = Path(args["compiled_dir"]) if args["compiled_dir"] else None
    placement = Placement.parse(args["engine"], args["precision"])
    sessions = Sessions(args["threads"], cache_dir=compiled, openvino=True)
    if not sessions.runs(placement.kind):
        raise MeasureError(f"{placement.kind.title} is not available")
    # Before OpenVINO is loaded (opening the graph loads it): a process whose plan runs
    # the decoder there pays for OpenVINO itself too, and only such a process does.
    before, _ = _memory_mb()
    session = sessions.open(Path(args["decoder"]), placement,
                            sha256=_cache_key(args))  # fmt: skip
    if session.placement != placement:
        raise MeasureError(f"{args['engine']} refused the decoder")
    rng = np.random.default_rng(0)
    z_dim = session.input_shape("z")[1]
    if not isinstance(z_dim, int):
        raise MeasureError("the decoder's channel count is not fixed")
    speaker = probe_speaker(session, rng)
    # Trimmed as a request's windows are: a first window has context on its right only;
    # an engine that keeps shapes gets balanced trims, those of context on both sides.
    trims = None
    if TRIM_INPUT in session.input_names:
        trims = read_manifest(Path(args["bundle"])).stage_trims
    context, firsts = args["context"], set(first_call_lengths(args["context"]))

    def feeds(length: int) -> dict[str, Any]:
        z = rng.standard_normal((1, z_dim, length), dtype=np.float32) * np.float32(0.5)
        out = {"z": z, **speaker}
        if trims is not None:
            first = length in firsts and not session.few_shapes
            out[TRIM_INPUT] = trims.amounts(0 if first else context, context)[0]
        return out

    call_ms, memory_mb = {}, {}
    for length in sorted(args["lengths"]):
        call_ms[length] = _fastest_call_ms(session, feeds(length))
        memory_mb[length] = round(_memory_mb()[0] - before, 1)
    # After the memory is recorded: each other count is a session of its own.
    threads_ms: dict[int, float] = {}
    probe = feeds(args["threads_length"])
    for count in args["thread_choices"] if len(args["thread_choices"]) > 1 else ():
        if count == args["threads"]:
            threads_ms[count] = _fastest_call_ms(session, probe)
            continue
        other = sessions.open(Path(args["decoder"]), session.placement, threads=count)
        threads_ms[count] = _fastest_call_ms(other, probe)
        del other
    balanced = trims is not None and session.few_shapes
    ratio = None
    if args.get("paired_with") and args.get("paired_lengths"):
        bundles = sessions.open(Path(args["paired_with"]), placement)
        ratio = _paired_ratio(session, bundles, [feeds(n) for n in args["paired_lengths"]])
        del bundles
    return {"call_ms": call_ms, "memory_mb": memory_mb, "threads_ms": threads_ms,
            "balanced_trims": balanced, "paired_ratio": ratio}  # fmt: skip


def _paired_ratio(session: Any, bundles: Any, calls: Sequence[dict[str, Any]]) -> float:
    """``session``'s time over ``bundles``' on the same ``calls``, each call made by one
    then the other :data:`TIMED_RUNS` times, the fastest of each summed: whatever else
    the machine does meets both alike (runtime/plan/measure.py, ``_paired``)."""
    ours = theirs = 0.0
    for feeds in calls:
        session.run(feeds)
        bundles.run(feeds)
        mine: list[float] = []
        other: list[float] = []
        for _ in range(TIMED_RUNS):
            for graph, runs in ((session, mine), (bundles, other)):
                start = time.perf_counter()
                graph.run(feeds)
                runs.append(time.perf_counter() - start)
        ours, theirs = ours + min(mine), theirs + min(other)
    return round(ours / theirs, 4)


def _fastest_call_ms(session: Any, feeds: dict[str, Any]) -> float:
    """The fastest of :data:`TIMED_RUNS` calls after one untimed (OpenVINO compiles for a
    new length there). The fastest, because on a shared machine other work only ever
    adds time: from medians, two measurings on the same quiet machine did not even
    agree which of two schedules was faster (measured: benchmarks/history/issue-32.md,
    second pass)."""
    session.run(feeds)
    runs = []
    for _ in range(TIMED_RUNS):
        start = time.perf_counter()
        session.run(feeds)
        runs.append(time.perf_counter() - start)
    return round(min(runs) * 1000, 2)


class _SilentDecoder:
    """Stands in for the decoder while the floor is measured: right-sized silence, so
    everything else runs exactly as in a request while the decoder adds nothing."""

    few_shapes = False

    def __init__(self, real: Any, hop: int) -> None:
        self._real = real
        self._hop = hop

    @property
    def input_names(self) -> frozenset[str]:
        from yomiage.runtime.stage_trims import TRIM_INPUT

        # no trims: its silence is the whole window's
        return frozenset(self._real.input_names - {TRIM_INPUT})

    def input_shape(self, name: str) -> Any:
        return self._real.input_shape(name)

    def run(self, feeds: Any) -> list[Any]:
        import numpy as np

        frames = feeds["z"].shape[2]
        return [np.zeros((1, 1, frames * self._hop), np.float32)]


def _floor(args: dict[str, Any]) -> dict[str, Any]:
    """The whole engine's peak on the calibration text with the decoder left out; then,
    with the decoder on ONNX Runtime, the peak after the text and a stream of its
    long sentence decoded in each window size, smallest first (ONNX Runtime's
    decoder allocates from the arena the other graphs freed, so its share is only
    seen together); last, the flow timed."""
    from yomiage.runtime.chunking import Windowing
    from yomiage.runtime.onnx_voice import BundleVoice
    from yomiage.runtime.plan.choose import FIRST_WINDOW_CHOICES

    backend = _backend(args, "fp32", openvino=False)
    voice = backend.load_voice(Path(args["bundle"]))
    if not isinstance(voice, BundleVoice):
        raise MeasureError("only yomiage bundles have a plan to measure")
    real = voice.decoder
    voice.decoder = _SilentDecoder(real, voice.info.hop_length)  # type: ignore[assignment]
    speaker = _calibration_speaker(backend, voice)
    for _ in range(2):
        speaker.generate(CALIBRATION_TEXT, seed=0)
    floor = round(_memory_mb()[1], 1)
    voice.decoder = real
    with_decoder = {}
    for window in sorted(args["ort_windows"]):
        # The whole paragraph, then a stream from the smallest first window: the
        # arena's peak depends on the sequence of shapes it met, and one long
        # sentence alone under-predicted an 8-sentence text by 85 MB.
        first = min(FIRST_WINDOW_CHOICES)
        voice.windowing = Windowing(window_frames=window, first_window_frames=first)
        with_decoder[window] = _whole_peak(speaker)
    return {"peak_mb": floor, "ort_peak_mb": with_decoder, "flow_ms": _time_flow(voice)}


def _flow_elsewhere(args: dict[str, Any]) -> dict[str, Any]:
    """The flow on ``args["flow"]`` (off ONNX Runtime) with the decoder in bfloat16 on
    OpenVINO, as a plan would run them together: the flow warmed at every length it
    may run at (as a server's voice is), then the whole peak after the calibration
    text and a stream of its long sentence in each window size of
    ``args["windows"]``, smallest first (OpenVINO keeps every length, so each peak
    is that of the schedule up to it); last, the flow timed."""
    from dataclasses import replace

    from yomiage.runtime.chunking import Windowing
    from yomiage.runtime.engines.placement import OPENVINO_BF16, Placement
    from yomiage.runtime.flow_lengths import FLOW_BUCKETS
    from yomiage.runtime.onnx_voice import BundleVoice
    from yomiage.runtime.plan.measure import flow_plan
    from yomiage.runtime.plan.schedules import openvino_first_window

    flow = Placement.parse(*args["flow"])
    compiled = Path(args["compiled_dir"]) if args["compiled_dir"] else None
    backend = _backend(args, "bf16", compiled_dir=compiled)
    plan = flow_plan(flow, args["threads"])
    # Loaded with its floor at the longest bucket, so the flow's first call (a voice's
    # settling one) is at the length the held memory is measured from.
    voice = BundleVoice(Path(args["bundle"]), backend.sessions,
                        replace(plan, flow_floor=FLOW_BUCKETS[-1]))  # fmt: skip
    if (voice.flow.placement, voice.decoder.placement) != (flow, OPENVINO_BF16):
        raise MeasureError(f"the flow or the decoder does not run on OpenVINO here ({flow})")
    held = _held_by_bucket(voice)
    voice.plan = plan  # from here on, every bucket: the peaks are those of no floor
    voice.warm_flow()
    speaker = _calibration_speaker(backend, voice)
    peaks = {}
    for window in sorted(args["windows"]):
        voice.windowing = Windowing(window, openvino_first_window(window))
        peaks[window] = _whole_peak(speaker)
    return {"peak_mb": peaks, "held_mb": held, "flow_ms": _time_flow(voice)}


def _held_by_bucket(voice: Any) -> dict[int, float]:
    """The process's resident MB after running the flow at each of its buckets, the
    longest first (the voice ran nothing shorter yet): what each shorter one adds is
    only what it keeps of its own (the longest's activations are there already), from
    which the plan chooses the flow's floor
    (:func:`~yomiage.runtime.flow_lengths.flow_floor`). Nothing for a flow that does
    not run padded."""
    import numpy as np

    from yomiage.runtime.engines.memory import release_free_memory
    from yomiage.runtime.engines.sessions import probe_speaker
    from yomiage.runtime.flow_lengths import FLOW_BUCKETS, FRAME_MASK_INPUT, padded_span

    if not (voice.flow.few_shapes and FRAME_MASK_INPUT in voice.flow.input_names):
        return {}
    speaker = probe_speaker(voice.flow, np.random.default_rng(0))
    held = {}
    for length in reversed(FLOW_BUCKETS):
        z_p, mask = padded_span(np.zeros((1, voice.manifest.inter_channels, length), np.float32))
        voice.flow.run({"z_p": z_p, FRAME_MASK_INPUT: mask, **speaker})
        release_free_memory()
        held[length] = round(_memory_mb()[0], 1)
    return held


def _compile(args: dict[str, Any]) -> dict[str, Any]:
    """The bundle's decoder compiled by OpenVINO at each of ``args["precisions"]`` into
    the compiled-graph cache, as a voice's first load would compile it, so that the
    measuring processes after this one load it from there, as every voice that runs
    the plan will (the measuring processes come first).

    A process that compiles the decoder keeps more resident than one that loads it
    (tens of MB on the full-size decoder), and every OpenVINO option was judged on the
    larger figure before."""
    from yomiage.runtime.engines.placement import OPENVINO, Placement
    from yomiage.runtime.engines.sessions import Sessions

    sessions = Sessions(args["threads"], cache_dir=Path(args["compiled_dir"]), openvino=True,
                        compile_ahead=False)  # this is the process that compiles  # fmt: skip
    if not sessions.has_openvino:
        raise MeasureError("OpenVINO is not available")
    compiled, sha256 = [], _cache_key(args)
    for precision in args["precisions"]:
        asked = Placement(OPENVINO.name, precision)
        graph = sessions.open(Path(args["decoder"]), asked, sha256=sha256)
        if graph.placement == asked:
            compiled.append(precision)
    return {"compiled": compiled}


def _cache_key(args: dict[str, Any]) -> str | None:
    """The decoder's SHA-256 from its bundle's manifest, which names its compiled form
    in the cache as a voice's load names it; None for another graph than the bundle's
    own decoder (a layout made for ONNX Runtime), which is never cached."""
    from yomiage.runtime.bundle import read_manifest

    manifest = read_manifest(Path(args["bundle"]))
    if Path(args["decoder"]).resolve() != manifest.file("decoder.onnx").resolve():
        return None
    return manifest.files.get("decoder.onnx")


def _backend(args: dict[str, Any], decoder_precision: str, **options: Any) -> Any:
    """The job's BERT on a backend that measures no plan of its own."""
    from yomiage.runtime.onnx_backend import OnnxBackend
    from yomiage.runtime.plan.request import PlanRequest

    return OnnxBackend(
        Path(args["bert"]),
        precision=args["bert_precision"],
        threads=args["threads"],
        tokenizer_dir=Path(args["tokenizer"]) if args["tokenizer"] else None,
        plan_request=PlanRequest(decoder_precision, measure_plan=False),
        berts_dir=Path(args["bert_sliced"]) if args.get("bert_sliced") else None,
        **options,
    )


def _calibration_speaker(backend: Any, voice: Any) -> Any:
    from yomiage.speaker import Speaker
    from yomiage.synthesis.gate import ComputeGate
    from yomiage.synthesis.pipeline import Pipeline
    from yomiage.text.frontend import Frontend

    return Speaker("calibration", voice, Pipeline(backend, Frontend(), ComputeGate(1)))


def _whole_peak(speaker: Any) -> float:
    """The process's peak after the calibration text and a stream of its long sentence."""
    speaker.generate(CALIBRATION_TEXT, seed=0)
    for _ in speaker.stream(LONG_SENTENCE, seed=0):
        pass
    return round(_memory_mb()[1], 1)


def _time_flow(voice: Any) -> dict[int, float]:
    """The flow's ms per call (median of :data:`TIMED_RUNS` after one) at each of
    :data:`FLOW_TIMING_FRAMES`, as a request runs it (padded where it would be)."""
    import numpy as np

    from yomiage.runtime.engines.sessions import probe_speaker

    rng = np.random.default_rng(0)
    speaker = probe_speaker(voice.flow, rng)
    out = {}
    for frames in FLOW_TIMING_FRAMES:
        z_p = rng.standard_normal((1, voice.manifest.inter_channels, frames), np.float32)
        voice.flow_span(z_p, speaker)
        times = []
        for _ in range(TIMED_RUNS):
            start = time.perf_counter()
            voice.flow_span(z_p, speaker)
            times.append(1000 * (time.perf_counter() - start))
        out[frames] = round(sorted(times)[len(times) // 2], 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Measure what the JSON argument asks; print the figures as one JSON line, or (for a
    MeasureError: what cannot run here, for good) why not, under ``REFUSED``."""
    die_with_parent_from_environment()  # ~1 GB and both cores: not past its parent's life
    args = json.loads((argv or sys.argv[1:])[0])
    os.environ[MEASURE_ENV] = "0"
    logging.basicConfig(level=logging.WARNING)
    measuring = {"compile": _compile, "decoder": _time_decoder, "floor": _floor,
                 "flow": _flow_elsewhere}  # fmt: skip
    try:
        result = measuring[args["what"]](args)
    except MeasureError as exc:
        result = {REFUSED: str(exc)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
