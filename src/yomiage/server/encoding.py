"""Audio for HTTP responses: formats, sample rates, streamed and whole-file encoding.

``wav`` and ``pcm`` stream: a WAV header of unknown length (or none), then
16-bit PCM of each chunk as it is decoded, not normalized (the final peak is
not known yet). The other formats, and any format asked for whole, are
encoded once the whole audio is made, normalized to its peak like
:meth:`Audio.to_bytes`: the audio is kept in a file as it is made
(:class:`SpooledAudio`) and encoded from it into another file, a block at a
time, so neither process holds a long response whole. Rates other than the
voice's go through :class:`yomiage.audio.resample.Resampler`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yomiage.audio import AudioChunk, wav_header
from yomiage.audio.formats import write_blocks
from yomiage.audio.resample import Resampler
from yomiage.errors import YomiageError
from yomiage.server.errors import APIError

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "flac": "audio/flac",
    "ogg": "audio/ogg",
}
FORMATS = tuple(MEDIA_TYPES)
STREAMABLE = ("wav", "pcm")
# Rates each container can hold; None: any in 8-192 kHz.
_RATES: dict[str, tuple[int, ...] | None] = {
    "wav": None,
    "pcm": None,
    "flac": None,
    "ogg": None,
    "opus": (8000, 12000, 16000, 24000, 48000),
    "mp3": (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
}


@dataclass(frozen=True)
class OutputFormat:
    """What a response carries: container ``name`` at ``sample_rate`` Hz, streamed or whole."""

    name: str
    sample_rate: int
    source_rate: int
    stream: bool

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.name]

    @property
    def resampled(self) -> bool:
        return self.sample_rate != self.source_rate


def output_format(
    name: str, source_rate: int, *, sample_rate: int | None, stream: bool, param: str
) -> OutputFormat:
    """Checked choice of format and rate (APIError 400 naming what is possible)."""
    name = name.lower()
    if name not in MEDIA_TYPES:
        raise APIError(
            400,
            f"unsupported {param} {name!r}; use one of {', '.join(FORMATS)}",
            code="unsupported_format",
            param=param,
        )
    allowed = _RATES[name]
    if sample_rate is None:
        # Opus has no 44.1 kHz; everything else keeps the voice's rate.
        rate = source_rate if allowed is None or source_rate in allowed else 48000
    else:
        rate = sample_rate
    if (allowed is not None and rate not in allowed) or not 8000 <= rate <= 192000:
        choices = ", ".join(map(str, allowed)) if allowed else "8000-192000"
        raise APIError(
            400,
            f"{name} cannot be written at {rate} Hz; sample_rate: {choices}",
            code="unsupported_sample_rate",
            param="sample_rate",
        )
    return OutputFormat(name, rate, source_rate, stream and name in STREAMABLE)


class StreamEncoder:
    """Bytes of a streamed wav or pcm response, chunk by chunk (one per response)."""

    def __init__(self, fmt: OutputFormat) -> None:
        if fmt.name not in STREAMABLE:
            raise ValueError(f"{fmt.name} does not stream")
        self.fmt = fmt
        self._resampler = Resampler(fmt.source_rate, fmt.sample_rate) if fmt.resampled else None
        self._started = False

    def start(self) -> bytes:
        self._started = True
        return wav_header(self.fmt.sample_rate) if self.fmt.name == "wav" else b""

    def chunk(self, chunk: AudioChunk) -> bytes:
        samples = chunk.samples
        if self._resampler is not None:
            samples = self._resampler.process(samples)
        return _pcm16(samples)

    def finish(self) -> bytes:
        if self._resampler is None:
            return b""
        return _pcm16(self._resampler.flush())


def _pcm16(samples: npt.NDArray[np.float32]) -> bytes:
    """Like :meth:`AudioChunk.to_int16` (no normalization), little-endian bytes."""
    scaled = np.clip(samples.astype(np.float32) * np.float32(32767.0), -32767.0, 32767.0)
    data: bytes = scaled.astype("<i2").tobytes()
    return data


BLOCK_SAMPLES = 1 << 16  # samples a whole response is encoded by (1.5 s at 44.1 kHz)


class SpoolError(YomiageError):
    """A whole response's temporary file could not be written or read (a full disk): the
    server's trouble, said without its paths."""

    @classmethod
    def of(cls, exc: OSError) -> SpoolError:
        reason = exc.strerror or type(exc).__name__
        return cls(
            f"the server could not keep the response's audio in a temporary file ({reason}); "
            "retry later"
        )


@dataclass(frozen=True)
class SpooledAudio:
    """A whole response's audio in a file of float32 samples (native byte order) rather
    than in memory: what a whole response holds while it is made, and what crosses to
    the worker process to be encoded (its path, not its samples).
    ``peak``: the largest absolute sample, kept as it was written."""

    path: str
    sample_rate: int
    length: int
    peak: float

    @property
    def seconds(self) -> float:
        return self.length / self.sample_rate

    def blocks(self, size: int = BLOCK_SAMPLES) -> Iterator[npt.NDArray[np.float32]]:
        """The samples, ``size`` at a time (the last block may be shorter)."""
        with open(self.path, "rb") as samples:
            while len(block := np.fromfile(samples, np.float32, size)):
                yield block


def encode_spooled(audio: SpooledAudio, fmt: OutputFormat, out: str) -> int:
    """``audio`` in ``fmt`` written into the file ``out`` (emptied first), normalized to
    its peak like :meth:`Audio.to_bytes`; the bytes written. A block at a time: the
    memory it takes does not grow with the audio (a 5,000-character WAV encoded whole
    took the worker ~380 MB past the voice's own peak). A rate other than the voice's
    is resampled into a second file first, since the peak is that of the resampled
    audio. SpoolError when a file cannot be read or written."""
    try:
        return _encode_spooled(audio, fmt, out)
    except OSError as exc:
        raise SpoolError.of(exc) from None


def _encode_spooled(audio: SpooledAudio, fmt: OutputFormat, out: str) -> int:
    if not fmt.resampled:
        return _encode_blocks(audio, fmt, out)
    handle, path = tempfile.mkstemp(prefix="yomiage-", suffix=".f32", dir=os.path.dirname(out))
    try:
        length, peak = 0, 0.0
        with os.fdopen(handle, "wb") as spool:
            for block in _resampled(audio, Resampler(fmt.source_rate, fmt.sample_rate)):
                block.tofile(spool)
                length += len(block)
                peak = max(peak, float(np.abs(block).max())) if len(block) else peak
        return _encode_blocks(SpooledAudio(path, fmt.sample_rate, length, peak), fmt, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _resampled(audio: SpooledAudio, resampler: Resampler) -> Iterator[npt.NDArray[np.float32]]:
    for block in audio.blocks():
        yield resampler.process(block)
    yield resampler.flush()


def _encode_blocks(audio: SpooledAudio, fmt: OutputFormat, out: str) -> int:
    """The peak-normalized 16-bit blocks of ``audio`` in ``fmt``'s container."""
    scale = 32767.0 / audio.peak if audio.peak > 0 else 32767.0
    pcm = (_int16(block, scale) for block in audio.blocks())
    with open(out, "wb") as file:
        write_blocks(file, pcm, audio.sample_rate, fmt.name)
    return os.path.getsize(out)


def _int16(samples: npt.NDArray[np.float32], scale: float) -> npt.NDArray[np.int16]:
    """As :meth:`Audio.to_int16` (truncation toward zero), for one block."""
    scaled = np.clip(samples * np.float32(scale), -32767.0, 32767.0)
    pcm: npt.NDArray[np.int16] = scaled.astype(np.int16)
    return pcm
