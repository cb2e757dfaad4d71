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
"""

from __future__ import annotations

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


def flow_bucket(frames: int) -> int:
    """The length a span of ``frames`` frames is padded to."""
    if frames < 1:
        raise ValueError("a flow span needs at least one frame")
    for bucket in FLOW_BUCKETS:
        if frames <= bucket:
            return bucket
    return -(-frames // BEYOND_BUCKETS) * BEYOND_BUCKETS


def flow_buckets_up_to(frames: int) -> tuple[int, ...]:
    """Every length the flow may run at for spans of up to ``frames`` frames."""
    top = flow_bucket(frames)
    beyond = range(FLOW_BUCKETS[-1] + BEYOND_BUCKETS, top + 1, BEYOND_BUCKETS)
    return tuple(b for b in (*FLOW_BUCKETS, *beyond) if b <= top)


def padded_span(
    z_p: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """``z_p`` ``[1, C, frames]`` zero-padded to its bucket, and the mask of its real frames."""
    frames = z_p.shape[2]
    bucket = flow_bucket(frames)
    padded = np.zeros((*z_p.shape[:2], bucket), np.float32)
    padded[:, :, :frames] = z_p
    mask = np.zeros((1, 1, bucket), np.float32)
    mask[:, :, :frames] = 1.0
    return padded, mask
