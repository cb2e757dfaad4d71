"""An item's audio written as it is made, so a worker's memory does not grow with the item.

Normalizing needs the peak of the whole item (``Audio.to_int16`` scales by
it), which is known only at the end. So each chunk goes at once to a float32
*spool* file beside the output, and the peak is kept; at the end the spool is
read back block by block, scaled by that peak exactly as ``Audio.to_int16``
scales, and encoded into a temporary file in the output folder that the
driver renames into place. The file is the one ``Audio.save`` would write.

Every batch format streams this way: wav by the standard library, flac, ogg,
opus and mp3 by libsndfile, which encodes block by block into a file. None needs
the whole audio in memory; what grows is disk: the spool holds 4 bytes per
sample (about 10 MB per minute at 44.1 kHz) until the item is encoded. Opus
holds no 44.1 kHz: its chunks are resampled to 48 kHz as they come (the stream's
output equals the whole signal's, so the file is still ``Audio.save``'s).
"""

from __future__ import annotations

import os
import tempfile
import wave
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from yomiage.audio.formats import _SOUNDFILE, FORMATS, OPUS_RATES, WRITE_BLOCK
from yomiage.audio.resample import Resampler
from yomiage.audio.results import _to_int16
from yomiage.errors import AudioFormatError, MissingExtraError

OPUS_RATE = 48000  # where a voice's rate is not one Opus holds, as Audio.to_bytes does
WAV_MAX_BYTES = 0xFFFFFFFF - 36  # a WAV header counts its size in 32 bits


class AudioFileWriter:
    """Writes one item's audio (or ``yomiage generate``'s file): :meth:`add` each chunk as it is made, then
    :meth:`finish` for the temporary file holding the encoded audio (named
    ``.<final name>.<random>``, which an interrupted job's rerun clears).

    Holds one chunk at a time, never the item. Used as a context manager, it
    removes its files if the block fails before :meth:`finish`.
    """

    def __init__(self, final: Path, fmt: str, sample_rate: int) -> None:
        if fmt not in FORMATS:
            raise AudioFormatError(f"a batch cannot write {fmt!r}; use one of {', '.join(FORMATS)}")
        self.final = final
        self.fmt = fmt
        self._resampler: Resampler | None = None
        if fmt == "opus" and sample_rate not in OPUS_RATES:
            self._resampler = Resampler(sample_rate, OPUS_RATE)
            sample_rate = OPUS_RATE
        self.sample_rate = sample_rate  # of the spool and the file
        self.samples = 0
        self.peak = 0.0
        fd, spool = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".spool", dir=final.parent)
        self._spool_path = Path(spool)
        self._spool: BinaryIO | None = os.fdopen(fd, "wb")

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate

    def add(self, samples: npt.NDArray[np.float32]) -> None:
        """Append a chunk's samples (float32, as the decoder made them)."""
        if self._spool is None:
            raise RuntimeError("the audio file is already finished")
        if self._resampler is not None:
            samples = self._resampler.process(samples)
        self._spooled(samples)

    def _spooled(self, samples: npt.NDArray[np.float32]) -> None:
        if self._spool is not None and len(samples):
            self.peak = max(self.peak, float(np.abs(samples).max()))
            self._spool.write(np.asarray(samples, np.float32).tobytes())
            self.samples += len(samples)
            self._check_size()

    def _check_size(self) -> None:
        """A WAV file counts its size in 32 bits: past that, stop at once (not hours later)."""
        if self.fmt == "wav" and 2 * self.samples > WAV_MAX_BYTES:
            raise AudioFormatError(
                f"{self.seconds / 3600:.1f} h of audio is more than a WAV file holds "
                "(4 GiB); use --format flac, or split the text into several items"
            )

    def finish(self) -> Path:
        """Encode the spool into a temporary file beside ``final`` and return its path."""
        if self._spool is None:
            raise RuntimeError("the audio file is already finished")
        if self._resampler is not None:
            self._spooled(self._resampler.flush())
        self._spool.close()
        self._spool = None
        fd, encoded = tempfile.mkstemp(prefix=f".{self.final.name}.", dir=self.final.parent)
        os.close(fd)
        path = Path(encoded)
        try:
            self._encode(path)
            os.chmod(path, 0o644)  # mkstemp makes it private
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        finally:
            self._spool_path.unlink(missing_ok=True)
        return path

    def abort(self) -> None:
        """Remove what was written (a failed item)."""
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self._spool_path.unlink(missing_ok=True)

    def __enter__(self) -> AudioFileWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is not None:
            self.abort()

    def _encode(self, path: Path) -> None:
        blocks = _pcm_blocks(self._spool_path, self.peak)
        if self.fmt in ("wav", "pcm"):
            with open(path, "wb") as out:
                if self.fmt == "pcm":
                    for block in blocks:
                        out.write(block.astype("<i2").tobytes())
                    return
                with wave.open(out, "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(self.sample_rate)
                    for block in blocks:
                        w.writeframes(block.astype("<i2").tobytes())
            return
        try:
            import soundfile
        except ImportError:
            raise MissingExtraError(f"writing {self.fmt}", "audio", "soundfile") from None
        container, subtype = _SOUNDFILE[self.fmt]
        try:
            with soundfile.SoundFile(
                str(path), "w", self.sample_rate, 1, subtype, format=container
            ) as out:
                for block in blocks:
                    out.write(block)
        except (soundfile.LibsndfileError, TypeError, ValueError, RuntimeError) as exc:
            raise AudioFormatError(
                f"libsndfile cannot write {self.fmt} at {self.sample_rate} Hz"
            ) from exc


def _pcm_blocks(spool: Path, peak: float) -> Iterator[npt.NDArray[np.int16]]:
    """The spool read back as 16-bit PCM, :data:`WRITE_BLOCK` samples at a time, scaled
    as ``Audio.to_int16`` scales (the whole item's peak to full scale)."""
    scale = 32767.0 / peak if peak > 0 else 32767.0
    with open(spool, "rb") as f:
        while data := f.read(4 * WRITE_BLOCK):
            yield _to_int16(np.frombuffer(data, np.float32), scale)
