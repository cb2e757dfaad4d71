"""A query's audio as one WAV sent while it is made (VOICEVOX's ``/streaming_synthesis``).

The pieces, joined, are one valid WAV: a header first, then 16-bit PCM. The
samples are those :func:`yomiage.voicevox.synthesis.wav_bytes` writes for the
same audio (the query's silences, sampling rate and channels, the same
resampler fed the same samples, the same rounding) but for one constant
factor: a stream cannot know its peak before its end, so it is not normalized
to it (``docs/voicevox.md``). Its length is not known before the audio is made
either, so the header gives the sizes of a stream of unknown length.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from yomiage.audio.formats import STREAM_SIZE
from yomiage.audio.resample import Resampler
from yomiage.voicevox.model import AudioQuery
from yomiage.voicevox.synthesis import pcm16

DEFAULT_SEGMENT_SECONDS = 0.3  # VOICEVOX's default segment_length


class StartPastEnd(ValueError):
    """``start_offset`` is at or after the end of the audio: nothing would be sent."""


def stream_header(rate: int, channels: int) -> bytes:
    """A 44-byte 16-bit PCM WAV header whose RIFF and data sizes say "unknown length"
    (0xFFFFFFFF), as players and yomiage's own streamed WAVs take it."""
    block = 2 * channels
    return (
        b"RIFF"
        + struct.pack("<I", STREAM_SIZE)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * block, block, 16)
        + b"data"
        + struct.pack("<I", STREAM_SIZE)
    )


def silence_samples(rate: int, seconds: float, query: AudioQuery) -> int:
    """Samples of a pre/post silence at ``rate``, shortened by speedScale (as ``wav_bytes``)."""
    return int(rate * seconds / query.speedScale)


def wav_stream(
    pieces: Iterable[npt.NDArray[np.float32]],
    rate: int,
    query: AudioQuery,
    *,
    start_offset: float = 0.0,
    segment_length: float = DEFAULT_SEGMENT_SECONDS,
) -> Iterator[bytes]:
    """The WAV of the voice's audio ``pieces`` (float32 at ``rate``, in order), in parts.

    Each part but the last holds at least ``segment_length`` seconds; the first
    begins with the header and is ready as soon as that much audio follows
    ``start_offset`` (seconds of the output, its leading silence included), so
    a huge ``segment_length`` sends everything at once. Raises
    :class:`StartPastEnd` before yielding anything when no audio follows
    ``start_offset``. Blocking; each ``next`` may take as many pieces as it needs.
    """
    out_rate = query.outputSamplingRate
    channels = 2 if query.outputStereo else 1
    gain = np.float32(query.volumeScale)
    resampler = Resampler(rate, out_rate) if out_rate != rate else None
    skip = round(start_offset * out_rate)  # output samples left out at the start
    segment = max(1, round(segment_length * out_rate))
    held: list[npt.NDArray[np.float32]] = []
    held_samples = 0
    header: bytes | None = stream_header(out_rate, channels)

    def audio() -> Iterator[npt.NDArray[np.float32]]:
        yield np.zeros(silence_samples(rate, query.prePhonemeLength, query), np.float32)
        for piece in pieces:
            yield piece.astype(np.float32) * gain
        yield np.zeros(silence_samples(rate, query.postPhonemeLength, query), np.float32)

    def outputs() -> Iterator[npt.NDArray[np.float32]]:
        for block in audio():
            yield resampler.process(block) if resampler is not None else block
        if resampler is not None:
            yield resampler.flush()

    for out in outputs():
        if skip:
            dropped = min(skip, len(out))
            skip -= dropped
            out = out[dropped:]
        if not len(out):
            continue
        held.append(out)
        held_samples += len(out)
        if held_samples >= segment:
            data = pcm16(np.concatenate(held), channels)
            held, held_samples = [], 0
            if header is not None:
                data, header = header + data, None
            yield data
    if header is not None and not held:
        raise StartPastEnd(f"start_offset {start_offset:g} s is not before the end of the audio")
    if held:
        data = pcm16(np.concatenate(held), channels)
        yield data if header is None else header + data
