"""Audio containers: WAV with the standard library, the rest through soundfile.

WAV (16-bit PCM) and raw PCM always work. FLAC, Ogg Vorbis and MP3 are written
by libsndfile through ``soundfile`` (the ``[audio]`` extra), whose wheels carry
a libsndfile with all three.
"""

from __future__ import annotations

import io
import struct
import wave
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yomiage.errors import AudioFormatError, MissingExtraError

ALWAYS = ("wav", "pcm")
# format -> (libsndfile container, subtype)
_SOUNDFILE = {
    "flac": ("FLAC", "PCM_16"),
    "ogg": ("OGG", "VORBIS"),
    "mp3": ("MP3", "MPEG_LAYER_III"),
}
FORMATS = ALWAYS + tuple(_SOUNDFILE)
_SUFFIXES = {
    ".wav": "wav",
    ".pcm": "pcm",
    ".raw": "pcm",
    ".flac": "flac",
    ".ogg": "ogg",
    ".mp3": "mp3",
}
STREAM_SIZE = 0xFFFFFFFF  # "unknown length" in a streamed WAV header


def format_for(path: Path | str, fmt: str | None = None) -> str:
    """``fmt`` checked, or the format named by the file's suffix."""
    if fmt is not None:
        name = fmt.lower().lstrip(".")
        if name not in FORMATS:
            raise AudioFormatError(f"unknown audio format {fmt!r}; use one of {', '.join(FORMATS)}")
        return name
    suffix = Path(path).suffix.lower()
    if suffix not in _SUFFIXES:
        raise AudioFormatError(
            f"cannot tell the audio format from {str(path)!r}; use a suffix among "
            f"{', '.join(sorted(_SUFFIXES))} or pass fmt="
        )
    return _SUFFIXES[suffix]


def wav_header(sample_rate: int, n_samples: int | None = None) -> bytes:
    """A 44-byte mono 16-bit WAV header; ``n_samples=None`` for a stream of unknown length.

    Players and browsers accept the 0xFFFFFFFF sizes of a streamed header and
    play the PCM as it arrives.
    """
    data = STREAM_SIZE if n_samples is None else 2 * n_samples
    riff = STREAM_SIZE if n_samples is None else 36 + data
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, 2 * sample_rate, 2, 16)
        + b"data"
        + struct.pack("<I", data)
    )


def encode(pcm: npt.NDArray[np.int16], sample_rate: int, fmt: str) -> bytes:
    """``pcm`` (mono int16) in the container ``fmt``."""
    fmt = format_for("", fmt)
    if fmt == "pcm":
        return pcm.astype("<i2").tobytes()
    if fmt == "wav":
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(sample_rate)
            out.writeframes(pcm.astype("<i2").tobytes())
        return buffer.getvalue()
    try:
        import soundfile
    except ImportError:
        raise MissingExtraError(f"writing {fmt}", "audio", "soundfile") from None
    container, subtype = _SOUNDFILE[fmt]
    buffer = io.BytesIO()
    try:
        soundfile.write(buffer, pcm, sample_rate, format=container, subtype=subtype)
    except (soundfile.LibsndfileError, TypeError, ValueError) as exc:
        raise AudioFormatError(f"libsndfile cannot write {fmt} at {sample_rate} Hz: {exc}") from exc
    return buffer.getvalue()
