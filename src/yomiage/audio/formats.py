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
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

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
OPUS_RATE = 48000  # opus's rate for audio made at one it does not hold (the voices' 44.1 kHz)
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


def rate_for(fmt: str, sample_rate: int) -> int:
    """The rate a file in ``fmt`` holds audio made at ``sample_rate`` at: the same, but
    :data:`OPUS_RATE` for opus where that is not one of :data:`OPUS_RATES`."""
    return OPUS_RATE if fmt == "opus" and sample_rate not in OPUS_RATES else sample_rate


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
    buffer = io.BytesIO()
    write_blocks(buffer, [pcm], sample_rate, fmt)
    return buffer.getvalue()


def write_blocks(
    out: BinaryIO, blocks: Iterable[npt.NDArray[np.int16]], sample_rate: int, fmt: str
) -> None:
    """Mono int16 ``blocks``, one after the other, into ``out`` (a seekable binary file)
    in the container ``fmt``: what is held at once is one block, however long the
    audio (a server writes a whole response so). Each reaches libsndfile in pieces of
    at most :data:`WRITE_BLOCK` samples."""
    fmt = format_for("", fmt)
    if fmt == "pcm":
        for block in blocks:
            out.write(block.astype("<i2").tobytes())
        return
    if fmt == "wav":
        with wave.open(out, "wb") as wav:  # its sizes are set when it closes
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            for block in blocks:
                wav.writeframes(block.astype("<i2").tobytes())
        return
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
    try:
        with soundfile.SoundFile(out, "w", sample_rate, 1, subtype, format=container) as sound:
            for block in blocks:
                for start in range(0, len(block), WRITE_BLOCK):
                    sound.write(block[start : start + WRITE_BLOCK])
    except (soundfile.LibsndfileError, TypeError, ValueError, RuntimeError) as exc:
        raise AudioFormatError(f"libsndfile cannot write {fmt} at {sample_rate} Hz") from exc
