"""Which decoder schedules a plan chooses among: the candidates worth measuring on a
machine (:func:`candidates`), and how OpenVINO's schedules group into families whose
lengths one measuring process may meet in order (:func:`schedule_families`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from yomiage.runtime.chunking import DEFAULT_FIRST_WINDOW_FRAMES
from yomiage.runtime.plan.value import DecoderChoice

# Decoder windows an option may grow to; the first window stays small for first audio.
WINDOW_CHOICES = (128, 256, 512)
# OpenVINO keeps every length it has seen (~100-300 MB at 542 frames) and gains little
# past 286 (2.0 ms a frame at 542 against 2.1, Zen 4): its schedules stop at 256. They
# start at 32-frame windows (62 padded, the first window's length, measured anyway):
# with AMX the time per frame hardly depends on the length while the memory does
# (Xeon, 2 threads: 65 ms and +226 MB at 62 frames, 290 ms and +961 MB at 286, OpenVINO
# itself not counted), so
# small windows keep most of bfloat16's speed for a quarter of its memory.
# Each schedule is (first window, largest window); no two end at the same size.
# 48-96 is the one schedule of another family: a 97-144 frame sentence (1.1-1.7 s) takes
# two calls (78 + 126 padded) where the 32-frame family takes three (62 + 94 + 94): on a
# Zen 5 (bf16, 2 threads) 166 ms against 193 for 141 frames, by the plan's own
# measurements, for a first call of ~56 ms instead of ~40.
OPENVINO_SCHEDULES = ((32, 32), (32, 64), (32, 128), (32, 256), (48, 96))


def candidates(
    *, openvino: bool, native_bf16: bool, openvino_f32: bool = False, layouts: Sequence[int] = ()
) -> tuple[DecoderChoice, ...]:
    """Every decoder choice worth measuring on this machine. ONNX Runtime float32 is
    always one (and the reference no choice may be slower than); bfloat16 on OpenVINO
    only where the CPU computes it natively (emulated it is slower than float32).

    OpenVINO float32 only when ``openvino_f32`` asks for it: its decoder alone is
    1.3-1.7x ONNX Runtime's (Zen 4, issue 13; AVX2-only Zen 3, issue 32), but end to
    end it was no faster on Zen 4 and slower on Zen 3 (xlong 35.7 s against 27.2),
    its threads sharing the cores with ONNX Runtime's graphs between its calls, which
    a decoder-alone measurement cannot see; and it holds +300-520 MB. The int8
    decoder changes the audio more (~27 dB SNR) and stays an explicit choice.

    ``layouts``: other layouts of the decoder's stages to try on ONNX Runtime, besides
    the bundle's own (:mod:`yomiage.runtime.decoder_layouts`)."""
    out = [
        DecoderChoice("onnxruntime", "f32", w, layout=layout)
        for layout in (0, *layouts)
        for w in WINDOW_CHOICES
    ]
    if openvino:
        precisions = ("f32",) * openvino_f32 + ("bf16",) * native_bf16
        out += [
            DecoderChoice("openvino", precision, size, first)  # type: ignore[arg-type]
            for precision in precisions
            for first, size in OPENVINO_SCHEDULES
        ]
    return tuple(out)


def openvino_first_window(window_frames: int) -> int:
    """The first window of the OpenVINO schedule that grows to ``window_frames`` (the
    default first window for a size no schedule has)."""
    return next(
        (first for first, size in OPENVINO_SCHEDULES if size == window_frames),
        DEFAULT_FIRST_WINDOW_FRAMES,
    )


def schedule_families(choices: Iterable[DecoderChoice], context: int) -> dict[int, tuple[int, ...]]:
    """The padded lengths of ``choices`` grouped by first window, each group smallest
    first. Within a group each schedule's lengths are the smaller ones' and one more,
    so one process meeting them in order measures each schedule's memory on the way;
    lengths of two groups interleave, and each group needs a process of its own."""
    families: dict[int, set[int]] = {}
    for choice in choices:
        first = min(choice.first_window_frames, choice.window_frames)
        families.setdefault(first, set()).update(choice.lengths(context))
    return {first: tuple(sorted(lengths)) for first, lengths in sorted(families.items())}
