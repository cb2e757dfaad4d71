"""Audio kept in a file as it is made, then encoded from there a block at a time.

A whole file of audio is normalized to its peak (``Audio.to_int16`` scales by
it), which is known only once the last sample is made. Held in memory until
then, a long text's audio grows without bound (a batch item grew 2.5 MB/s; a
server's 5,000-character WAV took its process past 600 MB). Instead each chunk
goes at once to a *spool*, a file of float32 samples (native byte order, 4
bytes a sample: about 10 MB a minute at 44.1 kHz) whose peak and length are
kept as it is written (:class:`AudioSpool`); at the end the spool is read back
block by block, scaled exactly as ``Audio.to_int16`` scales, and encoded into
a file (:func:`write_file`): wav and pcm by the standard library, flac, ogg,
opus and mp3 by libsndfile. What is held at once is one block, and the file
is the one ``Audio.save`` writes of the same samples.

``yomiage batch``'s items and ``yomiage generate``'s file
(:mod:`yomiage.batch.audio_file`) and the server's whole responses
(:mod:`yomiage.server.spool`) are all made so.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from yomiage.audio.formats import WRITE_BLOCK, write_blocks
from yomiage.audio.resample import Resampler
from yomiage.audio.results import _to_int16
from yomiage.errors import Cancelled

# Samples read back at a time (1.5 s at 44.1 kHz). A multiple of WRITE_BLOCK, so that
# libsndfile is handed the very pieces Audio.to_bytes hands it.
BLOCK_SAMPLES = 2 * WRITE_BLOCK


@dataclass(frozen=True)
class SpooledAudio:
    """Audio in a file of float32 samples rather than in memory, with what encoding it
    needs: its rate, its ``length`` in samples and its ``peak`` (the largest absolute
    sample). Small and picklable: a server hands it, not the samples, to the process
    that encodes it."""

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

    def pcm_blocks(self) -> Iterator[npt.NDArray[np.int16]]:
        """The samples as 16-bit PCM, a block at a time, scaled as ``Audio.to_int16``
        scales (the whole audio's peak to full scale; silence as it is)."""
        scale = 32767.0 / self.peak if self.peak > 0 else 32767.0
        for block in self.blocks():
            yield _to_int16(block, scale)


class AudioSpool:
    """Samples written to a new file in ``folder`` (the temporary folder when None),
    named ``<prefix><random><suffix>``, as they are made; with ``to_rate``, resampled
    to it on the way (the peak is then that of the resampled audio, as the file
    written from it needs).

    :meth:`add` may be called from one thread at a time, :meth:`close` from any thread
    at any time (a client that left): an :meth:`add` after it raises
    :class:`~yomiage.errors.Cancelled`. The file is removed by :meth:`close`, which
    leaving a ``with`` block calls. OSError where the file cannot be made or written.
    """

    def __init__(
        self,
        sample_rate: int,
        *,
        to_rate: int | None = None,
        folder: Path | str | None = None,
        prefix: str = "yomiage-",
        suffix: str = ".f32",
    ) -> None:
        self._resampler: Resampler | None = None
        if to_rate is not None and to_rate != sample_rate:
            self._resampler = Resampler(sample_rate, to_rate)
            sample_rate = to_rate
        self.sample_rate = sample_rate  # of the file
        self.length = 0
        self.peak = 0.0
        handle, self.path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
        try:
            self._file: BinaryIO | None = os.fdopen(handle, "wb")
        except BaseException:
            os.close(handle)
            os.unlink(self.path)
            raise
        self._finished: SpooledAudio | None = None
        self._lock = threading.Lock()

    @classmethod
    def beside(cls, target: Path, sample_rate: int, *, to_rate: int | None = None) -> AudioSpool:
        """A spool in ``target``'s folder named ``.<its name>.<random>.spool``: hidden,
        and told by its name from the file it is for (a rerun clears such leftovers)."""
        folder, prefix = target.parent, f".{target.name}."
        return cls(sample_rate, to_rate=to_rate, folder=folder, prefix=prefix, suffix=".spool")

    @property
    def seconds(self) -> float:
        return self.length / self.sample_rate

    def add(self, samples: npt.NDArray[np.float32]) -> None:
        """Append a chunk's samples (float32, as the decoder made them)."""
        with self._lock:
            file = self._writable()
            if self._resampler is not None:
                samples = self._resampler.process(samples)
            self._write(file, samples)

    def finish(self) -> SpooledAudio:
        """The audio written, its file complete and closed: no more can be added. The
        file stays until :meth:`close`."""
        with self._lock:
            file = self._writable()
            try:
                if self._resampler is not None:
                    self._write(file, self._resampler.flush())
            finally:
                self._file = None
                file.close()
            self._finished = SpooledAudio(self.path, self.sample_rate, self.length, self.peak)
            return self._finished

    def close(self) -> None:
        """Close and remove the file (idempotent)."""
        with self._lock:
            file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):  # a full disk: the file goes anyway
                file.close()
        Path(self.path).unlink(missing_ok=True)

    def __enter__(self) -> AudioSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _writable(self) -> BinaryIO:
        if self._file is None:
            if self._finished is not None:
                raise RuntimeError("the audio spool is finished; nothing can be added to it")
            raise Cancelled("the audio spool was closed")
        return self._file

    def _write(self, file: BinaryIO, samples: npt.NDArray[np.float32]) -> None:
        block = np.asarray(samples, dtype=np.float32)
        if len(block):
            block.tofile(file)
            self.length += len(block)
            self.peak = max(self.peak, float(np.abs(block).max()))


def write_file(
    audio: SpooledAudio, fmt: str, out: Path | str, *, sample_rate: int | None = None
) -> int:
    """``audio`` in the container ``fmt`` written into the file ``out`` (made, or
    emptied), normalized to its peak: the bytes ``Audio.to_bytes`` makes of the same
    samples. At ``sample_rate`` when given: resampled first into a spool beside
    ``out``, since the peak to scale by is the resampled audio's. Returns the bytes
    written. OSError where a file cannot be read or written; AudioFormatError or
    MissingExtraError as :func:`~yomiage.audio.formats.write_blocks` says."""
    if sample_rate is not None and sample_rate != audio.sample_rate:
        with AudioSpool.beside(Path(out), audio.sample_rate, to_rate=sample_rate) as spool:
            for block in audio.blocks():
                spool.add(block)
            return write_file(spool.finish(), fmt, out)
    with open(out, "wb") as file:
        write_blocks(file, audio.pcm_blocks(), audio.sample_rate, fmt)
    return os.path.getsize(out)
