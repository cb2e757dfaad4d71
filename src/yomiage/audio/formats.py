"""Audio containers: WAV with the standard library, the rest through soundfile.

WAV (16-bit PCM) and raw PCM always work. FLAC, Ogg Vorbis, Opus and MP3 are
written by libsndfile through ``soundfile`` (the ``[audio]`` extra), whose
wheels carry a libsndfile with all of them. Samples go to libsndfile in
blocks: its Vorbis encoder crashes the process (SIGSEGV) when handed about
48 s of audio in one call.
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
    "opus": ("OGG", "OPUS"),  # 8, 12, 16, 24 or 48 kHz only
    "mp3": ("MP3", "MPEG_LAYER_III"),
}
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
# Samples per libsndfile write (0.7 s at 44.1 kHz; one call of ~2M crashes Vorbis).
WRITE_BLOCK = 1 << 15
FORMATS = ALWAYS + tuple(_SOUNDFILE)
_SUFFIXES = {
    ".wav": "wav",
    ".pcm": "pcm",
    ".raw": "pcm",
    ".flac": "flac",
    ".ogg": "ogg",
    ".opus": "opus",
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
            f"cannot tell the audio format from {str(path)!r}: use a suffix among "
            f"{', '.join(sorted(_SUFFIXES))}, or name the format (--format on the command "
            "line, fmt= in Python)"
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
    if fmt == "opus" and sample_rate not in OPUS_RATES:
        raise AudioFormatError(
            f"opus cannot hold {sample_rate} Hz audio; resample to one of "
            + ", ".join(map(str, OPUS_RATES))
        )
    container, subtype = _SOUNDFILE[fmt]
    buffer = io.BytesIO()
    try:
        with soundfile.SoundFile(buffer, "w", sample_rate, 1, subtype, format=container) as out:
            for start in range(0, len(pcm), WRITE_BLOCK):
                out.write(pcm[start : start + WRITE_BLOCK])
    except (soundfile.LibsndfileError, TypeError, ValueError, RuntimeError) as exc:
        raise AudioFormatError(f"libsndfile cannot write {fmt} at {sample_rate} Hz") from exc
    return buffer.getvalue()
