"""An AudioQuery's settings as the voice's options, and its audio as VOICEVOX's WAV.

What each field means for an SBV2 voice, and why, is in ``docs/voicevox.md``.
"""

from __future__ import annotations

import hashlib
import io
import json
import wave
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from yomiage.audio.resample import Resampler
from yomiage.options import SynthesisOptions
from yomiage.voicevox.cost import padding_seconds
from yomiage.voicevox.ids import VoxStyle
from yomiage.voicevox.model import AudioQuery
from yomiage.voicevox.query import structure

BLOCK_SECONDS = 5.0


def synthesis_options(style: VoxStyle, query: AudioQuery) -> SynthesisOptions:
    """The SBV2 options of a query (docs/voicevox.md says why each maps as it does)."""
    seed_text = json.dumps([style.id, structure(query.accent_phrases)], ensure_ascii=False)
    seed = int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:8], "little")
    return SynthesisOptions(
        style=style.style,
        speaker_id=style.speaker_id,
        speed=min(4.0, max(0.25, 1.0 / query.speedScale)),
        pitch_scale=1.0 + query.pitchScale,
        intonation_scale=query.intonationScale,
        pause_seconds=query.pauseLength,
        pause_scale=query.pauseLengthScale,
        seed=seed,  # the same query gives the same audio, as VOICEVOX's does
    )


def output_seconds(samples: int, rate: int, query: AudioQuery) -> float:
    """Seconds of the WAV :func:`wav_bytes` makes of ``samples`` at ``rate``."""
    return samples / rate + padding_seconds(query)


def wav_bytes(
    samples: npt.NDArray[np.float32],
    rate: int,
    query: AudioQuery,
    check: Callable[[], None] = lambda: None,
) -> bytes:
    """16-bit WAV: normalized to the peak like every yomiage result, then the query's
    volume, its silence before and after (shortened by speedScale, as VOICEVOX does),
    its sampling rate and channels. Blocking (run it in a worker thread); ``check``
    is called between blocks and may raise to stop the work (its client left)."""
    peak = float(np.abs(samples).max()) if len(samples) else 0.0
    block = int(rate * BLOCK_SECONDS)
    pieces = (samples[start : start + block] for start in range(0, len(samples), block))
    out = io.BytesIO()
    write_wav(out, pieces, rate, query, peak=peak, check=check)
    return out.getvalue()


def write_wav(
    out: BinaryIO,
    pieces: Iterable[npt.NDArray[np.float32]],
    rate: int,
    query: AudioQuery,
    *,
    peak: float,
    check: Callable[[], None] = lambda: None,
) -> None:
    """:func:`wav_bytes` of the audio ``pieces`` (in order; ``peak``: their largest
    absolute sample) into ``out``, a seekable binary file, a piece at a time: memory
    stays that of one piece however long the audio (a server reads them from a file)."""
    gain = np.float32(query.volumeScale / peak if peak > 0 else query.volumeScale)
    out_rate = query.outputSamplingRate
    resampler = Resampler(rate, out_rate) if out_rate != rate else None
    channels = 2 if query.outputStereo else 1
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(out_rate)
        for block in _blocks(pieces, rate, query, gain):
            check()
            audio = resampler.process(block) if resampler is not None else block
            w.writeframes(pcm16(audio, channels))
        if resampler is not None:
            w.writeframes(pcm16(resampler.flush(), channels))


def _blocks(
    pieces: Iterable[npt.NDArray[np.float32]], rate: int, query: AudioQuery, gain: np.float32
) -> Iterator[npt.NDArray[np.float32]]:
    """The padded, scaled audio in blocks of at most :data:`BLOCK_SECONDS` (memory stays
    small however long the audio, and the work can stop between two)."""
    block = int(rate * BLOCK_SECONDS)
    for pad in (query.prePhonemeLength, None, query.postPhonemeLength):
        if pad is None:
            for piece in pieces:
                for start in range(0, len(piece), block):
                    yield piece[start : start + block].astype(np.float32) * gain
            continue
        silence = int(rate * pad / query.speedScale)
        for start in range(0, silence, block):
            yield np.zeros(min(block, silence - start), np.float32)


def pcm16(audio: npt.NDArray[np.float32], channels: int) -> bytes:
    """16-bit little-endian PCM, each sample repeated per channel (one rounding for every route)."""
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")
    return (np.repeat(pcm, channels) if channels > 1 else pcm).tobytes()
