"""Synthesized audio: whole results and the chunks a stream hands out.

Samples stay float32 as the decoder made them; nothing normalizes a chunk on
its own, so loudness never jumps between chunks or sentences. Only
:meth:`Audio.to_int16` scales, once, by the peak of the whole result (what
SBV2 writes, spec §7.2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yomiage.atomic import write_atomic
from yomiage.audio.formats import encode, format_for, rate_for, wav_header
from yomiage.audio.resample import resample
from yomiage.audio.timings import Timings
from yomiage.options import SynthesisOptions

__all__ = ["Audio", "AudioChunk", "wav_header"]


def _to_int16(samples: npt.NDArray[np.float32], scale: float) -> npt.NDArray[np.int16]:
    """Truncation toward zero, as NumPy's cast does (spec §7.2)."""
    scaled = np.clip(samples.astype(np.float32) * np.float32(scale), -32767.0, 32767.0)
    pcm: npt.NDArray[np.int16] = scaled.astype(np.int16)
    return pcm


@dataclass(frozen=True, eq=False)
class AudioChunk:
    """A piece of a stream: ``samples`` start at sample ``offset`` of the whole audio.

    The first chunk of each sentence carries that sentence's timings (known
    before its audio) and begins with the pause before the sentence, as zeros.
    Every chunk carries its sentence's ``text`` (as written) and the request's
    ``options``, whose ``seed`` is the one actually used.
    """

    samples: npt.NDArray[np.float32]
    sample_rate: int
    offset: int
    sentence: int
    timings: Timings = field(default_factory=Timings)
    text: str = ""
    options: SynthesisOptions | None = None

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate

    def to_int16(self) -> npt.NDArray[np.int16]:
        """16-bit PCM without normalization (a stream cannot know the final peak)."""
        return _to_int16(self.samples, 32767.0)

    def to_pcm_bytes(self) -> bytes:
        """Little-endian 16-bit PCM, to follow :func:`wav_header` in a streamed WAV."""
        return self.to_int16().astype("<i2").tobytes()


@dataclass(frozen=True, eq=False)
class Audio:
    """A whole synthesized result (mono float32 in [-1, 1]).

    ``options`` are those it was made with, ``seed`` included (the one drawn
    when none was given), so ``speaker.generate(text, audio.options)`` makes it
    again; ``sentences`` are the texts it read, in order.
    """

    samples: npt.NDArray[np.float32]
    sample_rate: int
    timings: Timings = field(default_factory=Timings)
    options: SynthesisOptions | None = None
    sentences: tuple[str, ...] = ()

    @classmethod
    def from_chunks(cls, chunks: Iterable[AudioChunk], sample_rate: int) -> Audio:
        pieces, timings, sentences = [], [], []
        options = None
        last = -1
        for chunk in chunks:
            pieces.append(chunk.samples)
            timings.append(chunk.timings)
            options = options or chunk.options
            if chunk.sentence != last:
                sentences.append(chunk.text)
                last = chunk.sentence
        samples = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        return cls(
            samples.astype(np.float32, copy=False),
            sample_rate,
            Timings.join(timings),
            options,
            tuple(sentences),
        )

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate

    def to_int16(self, *, normalize: bool = True) -> npt.NDArray[np.int16]:
        """16-bit PCM; by default scaled so the whole result's peak is full scale."""
        peak = float(np.abs(self.samples).max()) if len(self.samples) else 0.0
        scale = 32767.0 / peak if normalize and peak > 0 else 32767.0
        return _to_int16(self.samples, scale)

    def to_bytes(self, fmt: str = "wav", *, normalize: bool = True) -> bytes:
        """The audio in ``fmt``: wav or pcm always; flac, ogg, opus, mp3 with
        ``yomiage[audio]`` (opus at 48 kHz when the voice's rate is not one it holds)."""
        fmt = format_for("", fmt)
        audio = self
        rate = rate_for(fmt, self.sample_rate)
        if rate != self.sample_rate:
            audio = Audio(resample(self.samples, self.sample_rate, rate), rate, self.timings)
        return encode(audio.to_int16(normalize=normalize), audio.sample_rate, fmt)

    def save(self, path: Path | str, fmt: str | None = None, *, normalize: bool = True) -> Path:
        """Write atomically (a temporary file renamed into place); format from the suffix."""
        path = Path(path)
        data = self.to_bytes(format_for(path, fmt), normalize=normalize)
        if not path.parent.is_dir():
            raise FileNotFoundError(f"the folder {path.parent} does not exist (for {path.name})")
        return write_atomic(path, data)
