"""An AudioQuery's settings as the voice's options, and its audio as VOICEVOX's WAV.

What each field means for an SBV2 voice, and why, is in ``docs/voicevox.md``.
"""

from __future__ import annotations

import hashlib
import io
import json
import wave

import numpy as np
import numpy.typing as npt

from yomiage.audio.resample import resample
from yomiage.options import SynthesisOptions
from yomiage.voicevox.ids import VoxStyle
from yomiage.voicevox.model import AudioQuery
from yomiage.voicevox.query import structure


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


def wav_bytes(samples: npt.NDArray[np.float32], rate: int, query: AudioQuery) -> bytes:
    """16-bit WAV: normalized to the peak like every yomiage result, then the query's
    volume, its silence before and after (shortened by speedScale, as VOICEVOX does),
    its sampling rate and channels."""
    peak = float(np.abs(samples).max()) if len(samples) else 0.0
    audio = samples / peak if peak > 0 else samples
    audio = audio * np.float32(query.volumeScale)
    before = np.zeros(int(rate * query.prePhonemeLength / query.speedScale), np.float32)
    after = np.zeros(int(rate * query.postPhonemeLength / query.speedScale), np.float32)
    audio = np.concatenate([before, audio.astype(np.float32), after])
    out_rate = query.outputSamplingRate
    if out_rate != rate:
        audio = resample(audio, rate, out_rate)
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")
    channels = 2 if query.outputStereo else 1
    if channels == 2:
        pcm = np.repeat(pcm, 2)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(out_rate)
        w.writeframes(pcm.tobytes())
    return out.getvalue()
