"""The few lengths the flow runs at on an engine that keeps state per input shape.

The flow reads a sentence whole (its attention spans it), so each sentence has
its own length. OpenVINO keeps what it made for every shape it has met, never
given back, so a server that met every length up to
:data:`~yomiage.runtime.chunking.FLOW_SPAN_FRAMES` would hold gigabytes of it
(measured: benchmarks/history/issue-32.md, eleventh pass). There the flow runs
each span padded to one of :data:`FLOW_BUCKETS`, with a mask of its real frames
(:func:`~yomiage.runtime.engines.openvino_graph.with_frame_mask` puts it in the graph):
the padded frames are hidden from attention and zeroed before every convolution
wider than one frame, so the real frames come out as without padding (to float32
rounding). Each bucket is at most 1.33 times
the one before, so a span is padded by at most a third (but for spans under the
first bucket), by ~15% on average.

A plan may raise the smallest length a span is padded to (its *floor*,
:func:`flow_floor`): OpenVINO's CPU plugin lays the flow's weights out anew for
the kernels it picks per length, and keeps every layout it made. On the Xeon with
AMX at 2 threads, spans under 256 frames took kernels with a layout of their own
for the 48 five-wide convolutions, ~71 MB of bfloat16 weights held twice per voice
(issue 48, third pass); which lengths share a layout depends on the CPU and the
threads, so the plan measures it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

# The input the masked flow takes: 1 for a real frame, 0 for padding, [1, 1, frames].
FRAME_MASK_INPUT = "frame_mask"
# None under 96 frames: below that OpenVINO's CPU plugin takes other kernels, with their
# own copy of the weights, held once any length under 96 has run, and a short sentence's
# flow is quick either way (measured: benchmarks/history/issue-32.md, eleventh pass).
FLOW_BUCKETS = (96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 896)
# Past the last bucket (a flow span made longer than its default), multiples of this.
BEYOND_BUCKETS = 128
# The highest floor a plan may take: a sentence cut into spans waits for a first span of
# this length already (chunking.FIRST_FLOW_SPAN_FRAMES), so a short one padded to it
# waits no longer than the longest first wait (on OpenVINO bfloat16, 2 threads: ~38 ms
# against ~19 at 96 frames, measured on the Xeon with AMX).
MAX_FLOW_FLOOR = 256
# What a shorter length must add to be a layout of the weights of its own, not the few
# MB of its kernels and buffers (~3 MB a length on the full-size flow).
LAYOUT_MB = 16.0


def flow_bucket(frames: int, floor: int | None = None) -> int:
    """The length a span of ``frames`` frames is padded to (at least ``floor``'s bucket)."""
    if frames < 1:
        raise ValueError("a flow span needs at least one frame")
    frames = max(frames, floor or 0)
    for bucket in FLOW_BUCKETS:
        if frames <= bucket:
            return bucket
    return -(-frames // BEYOND_BUCKETS) * BEYOND_BUCKETS


def flow_buckets_up_to(frames: int, floor: int | None = None) -> tuple[int, ...]:
    """Every length the flow may run at for spans of up to ``frames`` frames."""
    top = flow_bucket(frames, floor)
    bottom = flow_bucket(1, floor)
    beyond = range(FLOW_BUCKETS[-1] + BEYOND_BUCKETS, top + 1, BEYOND_BUCKETS)
    return tuple(b for b in (*FLOW_BUCKETS, *beyond) if bottom <= b <= top)


def flow_floor(held_mb: Mapping[int, float]) -> tuple[int | None, float]:
    """The floor a flow is run at, and the MB it saves, from ``held_mb``: the memory the
    process held after running the flow at each bucket, from the longest down (so each
    figure holds every length from it up; the longest's activations came first, and
    what a shorter length adds is what it keeps of its own). The floor is the highest
    length up to :data:`MAX_FLOW_FLOOR` under which the next length added a layout of
    the weights (:data:`LAYOUT_MB` or more); it saves what every length under it added.
    None where no length did (the first bucket, nothing saved)."""
    lengths = sorted(held_mb)
    layouts = [
        longer for shorter, longer in itertools.pairwise(lengths)
        if longer <= MAX_FLOW_FLOOR and held_mb[shorter] - held_mb[longer] >= LAYOUT_MB
    ]  # fmt: skip
    if not layouts:
        return None, 0.0
    floor = max(layouts)
    return floor, held_mb[lengths[0]] - held_mb[floor]


def padded_span(
    z_p: npt.NDArray[np.float32], floor: int | None = None
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """``z_p`` ``[1, C, frames]`` zero-padded to its bucket, and the mask of its real frames."""
    frames = z_p.shape[2]
    bucket = flow_bucket(frames, floor)
    padded = np.zeros((*z_p.shape[:2], bucket), np.float32)
    padded[:, :, :frames] = z_p
    mask = np.zeros((1, 1, bucket), np.float32)
    mask[:, :, :frames] = 1.0
    return padded, mask
