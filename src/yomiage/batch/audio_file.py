"""An item's audio written as it is made, so a worker's memory does not grow with the item.

Each chunk goes at once to a spool beside the output (:mod:`yomiage.audio.spool`),
and at the end the spool is encoded into a temporary file in the output folder
that the driver renames into place: the file ``Audio.save`` would write, in any
batch format. What grows is disk, not memory: the spool holds 4 bytes per sample
(about 10 MB per minute at 44.1 kHz) until the item is encoded. Opus holds no
44.1 kHz: its chunks are resampled to 48 kHz as they come (the stream's output
equals the whole signal's, so the file is still ``Audio.save``'s).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yomiage.audio.formats import FORMATS, rate_for
from yomiage.audio.spool import AudioSpool, write_file
from yomiage.errors import AudioFormatError

WAV_MAX_BYTES = 0xFFFFFFFF - 36  # a WAV header counts its size in 32 bits


class AudioFileWriter:
    """Writes one item's audio (or ``yomiage generate``'s file): :meth:`add` each chunk
    as it is made, then :meth:`finish` for the temporary file holding the encoded audio
    (named ``.<final name>.<random>``, as is its spool, which an interrupted job's rerun
    clears).

    Holds one chunk at a time, never the item. Used as a context manager, it removes
    its spool however the block ends (and so what it wrote, if it never finished).
    """

    def __init__(self, final: Path, fmt: str, sample_rate: int) -> None:
        if fmt not in FORMATS:
            raise AudioFormatError(f"a batch cannot write {fmt!r}; use one of {', '.join(FORMATS)}")
        self.final = final
        self.fmt = fmt
        self._spool = AudioSpool.beside(final, sample_rate, to_rate=rate_for(fmt, sample_rate))

    @property
    def sample_rate(self) -> int:
        """The file's (48 kHz for opus from a voice's 44.1 kHz)."""
        return self._spool.sample_rate

    @property
    def seconds(self) -> float:
        return self._spool.seconds

    def add(self, samples: npt.NDArray[np.float32]) -> None:
        """Append a chunk's samples (float32, as the decoder made them)."""
        self._spool.add(samples)
        self._check_size()

    def _check_size(self) -> None:
        """A WAV file counts its size in 32 bits: past that, stop at once (not hours later)."""
        if self.fmt == "wav" and 2 * self._spool.length > WAV_MAX_BYTES:
            raise AudioFormatError(
                f"{self.seconds / 3600:.1f} h of audio is more than a WAV file holds "
                "(4 GiB); use --format flac, or split the text into several items"
            )

    def finish(self) -> Path:
        """Encode the spool into a temporary file beside ``final`` and return its path
        (the spool is removed, whatever happens)."""
        try:
            audio = self._spool.finish()
            self._check_size()
            handle, encoded = tempfile.mkstemp(prefix=f".{self.final.name}.", dir=self.final.parent)
            os.close(handle)
            path = Path(encoded)
            try:
                write_file(audio, self.fmt, path)
                os.chmod(path, 0o644)  # mkstemp makes it private
            except BaseException:
                path.unlink(missing_ok=True)
                raise
        finally:
            self._spool.close()
        return path

    def abort(self) -> None:
        """Remove what was written (a failed item)."""
        self._spool.close()

    def __enter__(self) -> AudioFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()
