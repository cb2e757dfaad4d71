"""Which decoder schedules a plan chooses among: the candidates worth measuring on a
machine (:func:`candidates`), and how OpenVINO's schedules group into families whose
lengths one measuring process may meet in order (:func:`schedule_families`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from yomiage.runtime.chunking import DEFAULT_FIRST_WINDOW_FRAMES
from yomiage.runtime.engines.placement import OPENVINO_BF16, OPENVINO_FP32, ORT_FP32
from yomiage.runtime.plan.value import DecoderChoice

# Decoder windows an option may grow to; the first window stays small for first audio.
WINDOW_CHOICES = (128, 256, 512)
# OpenVINO keeps every length it has seen, and gains little per frame past 286 padded
# frames: its schedules stop at 256. They start at 32-frame windows (62 padded, the
# first window's length, measured anyway): where the time per frame hardly depends on
# the length while the memory does (on some CPUs), small windows keep most of
# bfloat16's speed for a fraction of its memory. Each schedule is (first window, largest
# window); no two end at the same size. 48-96 is the one schedule of another family: a
# 97-144 frame sentence takes two calls (78 + 126 padded) where the 32-frame family
# takes three (62 + 94 + 94), for a somewhat longer first call. Measured:
# benchmarks/history/issue-32.md, fourth pass (small windows) and thirteenth (48-96).
OPENVINO_SCHEDULES = ((32, 32), (32, 64), (32, 128), (32, 256), (48, 96))


def candidates(
    *, openvino: bool, native_bf16: bool, openvino_fp32: bool = False, layouts: Sequence[int] = ()
) -> tuple[DecoderChoice, ...]:
    """Every decoder choice worth measuring on this machine. ONNX Runtime float32 is
    always one (and the reference no choice may be slower than); bfloat16 on OpenVINO
    only where the CPU computes it natively (emulated it is slower than float32).

    OpenVINO float32 only when ``openvino_fp32`` asks for it: its decoder alone is
    faster than ONNX Runtime's, but end to end it was no faster or slower, its threads
    sharing the cores with ONNX Runtime's graphs between its calls (which a
    decoder-alone measurement cannot see), and it holds hundreds of MB more
    (measured: ``benchmarks/history/issue-13.md`` and ``issue-32.md``, tenth pass).
    The int8 decoder changes the audio more and stays an explicit choice.

    ``layouts``: other layouts of the decoder's stages to try on ONNX Runtime, besides
    the bundle's own (:mod:`yomiage.runtime.decoder_layouts`)."""
    out = [DecoderChoice.at(ORT_FP32, w, layout=layout)
           for layout in (0, *layouts) for w in WINDOW_CHOICES]  # fmt: skip
    if openvino:
        placements = (OPENVINO_FP32,) * openvino_fp32 + (OPENVINO_BF16,) * native_bf16
        out += [
            DecoderChoice.at(placement, size, first)
            for placement in placements
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
