"""Audio for HTTP responses: formats, sample rates, streamed and whole-file encoding.

``wav`` and ``pcm`` stream: a WAV header of unknown length (or none), then
16-bit PCM of each chunk as it is decoded, not normalized (the final peak is
not known yet). The other formats, and any format asked for whole, are
encoded once the whole audio is made, normalized to its peak like
:meth:`Audio.to_bytes`: the audio is kept in a file as it is made
(:mod:`yomiage.audio.spool`) and encoded from it into another file, a block at
a time, so neither process holds a long response whole. Rates other than the
voice's go through :class:`yomiage.audio.resample.Resampler`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yomiage.audio import AudioChunk, wav_header
from yomiage.audio.resample import Resampler
from yomiage.audio.spool import SpooledAudio, write_file
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


@contextlib.contextmanager
def spool_errors() -> Iterator[None]:
    """An OSError in the block (a temporary file not made, written or read) raised as
    :class:`SpoolError`."""
    try:
        yield
    except OSError as exc:
        raise SpoolError.of(exc) from None


def encode_spooled(audio: SpooledAudio, fmt: OutputFormat, out: str) -> int:
    """``audio`` in ``fmt`` written into the file ``out`` (emptied first), normalized to
    its peak like :meth:`Audio.to_bytes`; the bytes written. A block at a time
    (:func:`yomiage.audio.spool.write_file`): the memory it takes does not grow with
    the audio (a 5,000-character WAV encoded whole took the worker ~380 MB past the
    voice's own peak). SpoolError when a file cannot be read or written."""
    with spool_errors():
        return write_file(audio, fmt.name, out, sample_rate=fmt.sample_rate)
