"""Sample-rate conversion by a rational factor, in one go or chunk by chunk.

The voices make 44.1 kHz; Opus only exists at 8/12/16/24/48 kHz and OpenAI's
``pcm`` is 24 kHz. :class:`Resampler` is a polyphase windowed-sinc filter
(Kaiser window) written with numpy only: the output of a stream fed in any
chunking equals the output of the whole signal at once, sample for sample,
and output sample ``n`` sits at input time ``n * rate_in / rate_out`` (no
delay to trim).
"""

from __future__ import annotations

from math import gcd

import numpy as np
import numpy.typing as npt

__all__ = ["Resampler", "resample"]

_BLOCK = 4096  # outputs computed at once (bounds the temporary arrays)


class Resampler:
    """Streaming conversion of mono float32 audio from ``rate_in`` to ``rate_out``.

    ``half_taps`` input samples on each side of an output's position take
    part in it (quality vs. cost); ``rolloff`` places the cutoff as a
    fraction of the lower Nyquist frequency. Not thread-safe: one per stream.
    """

    def __init__(
        self, rate_in: int, rate_out: int, *, half_taps: int = 24, rolloff: float = 0.94
    ) -> None:
        if rate_in <= 0 or rate_out <= 0:
            raise ValueError(f"sample rates must be positive, not {rate_in} and {rate_out}")
        g = gcd(rate_in, rate_out)
        self.rate_in, self.rate_out = rate_in, rate_out
        self.up, self.down = rate_out // g, rate_in // g
        self.half = half_taps
        self._taps = _polyphase_taps(self.up, self.down, half_taps, rolloff)
        # Input kept from earlier chunks; _start is the index of its first sample.
        self._buffer = np.zeros(0, np.float32)
        self._start = 0
        self._consumed = 0  # input samples received
        self._produced = 0  # output samples handed out
        self._finished = False

    def process(self, samples: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Resampled output that the input so far determines (lags by ``half_taps`` inputs)."""
        if self._finished:
            raise RuntimeError("this Resampler was flushed; make a new one")
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        self._buffer = np.concatenate([self._buffer, x])
        self._consumed += len(x)
        # Output n needs inputs up to floor(n * down / up) + half, so all n
        # with floor(n * down / up) <= last are ready.
        last = self._consumed - 1 - self.half
        end = -(-(last + 1) * self.up // self.down) if last >= 0 else 0
        return self._emit(end)

    def flush(self) -> npt.NDArray[np.float32]:
        """The rest of the output, as if silence followed; the stream then has
        ``ceil(n_in * rate_out / rate_in)`` samples in all."""
        if self._finished:
            return np.zeros(0, np.float32)
        self._finished = True
        self._buffer = np.concatenate([self._buffer, np.zeros(self.half + 1, np.float32)])
        end = -(-self._consumed * self.up // self.down)
        return self._emit(end)

    def _emit(self, end: int) -> npt.NDArray[np.float32]:
        pieces = []
        while self._produced < end:
            pieces.append(self._emit_block(min(end, self._produced + _BLOCK)))
        out: npt.NDArray[np.float32] = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        return out

    def _emit_block(self, end: int) -> npt.NDArray[np.float32]:
        n = np.arange(self._produced, end, dtype=np.int64)
        position = n * self.down  # in units of 1/up input samples
        centre = position // self.up
        phase = position % self.up
        k = np.arange(-self.half, self.half + 1, dtype=np.int64)
        index = centre[:, None] + k[None, :] - self._start
        padded = self._buffer
        lead = int(max(0, -index.min()))  # inputs before the first one are silence
        if lead:
            padded = np.concatenate([np.zeros(lead, np.float32), padded])
        frames = padded[index + lead]
        out: npt.NDArray[np.float32] = np.einsum("ij,ij->i", frames, self._taps[phase]).astype(
            np.float32
        )
        self._produced = end
        # Keep what the next output needs: inputs from its centre - half on.
        keep_from = (self._produced * self.down) // self.up - self.half
        drop = min(max(0, keep_from - self._start), len(self._buffer))
        if drop:
            self._buffer = self._buffer[drop:]
            self._start += drop
        return out


def _polyphase_taps(up: int, down: int, half: int, rolloff: float) -> npt.NDArray[np.float32]:
    """``taps[p, j]``: weight of input ``centre + j - half`` for an output whose
    position is ``p / up`` input samples after ``centre``."""
    cutoff = rolloff * min(1.0, up / down)  # fraction of the input's Nyquist frequency
    beta = 8.6  # Kaiser: about 90 dB stopband
    p = np.arange(up, dtype=np.float64)[:, None] / up
    j = np.arange(-half, half + 1, dtype=np.float64)[None, :]
    t = j - p  # input sample time relative to the output position
    window = np.i0(beta * np.sqrt(np.clip(1.0 - (t / (half + 1)) ** 2, 0.0, 1.0))) / np.i0(beta)
    taps = cutoff * np.sinc(cutoff * t) * window
    taps /= taps.sum(axis=1, keepdims=True)  # unit gain at DC for every phase
    result: npt.NDArray[np.float32] = taps.astype(np.float32)
    return result


def resample(samples: npt.ArrayLike, rate_in: int, rate_out: int) -> npt.NDArray[np.float32]:
    """``samples`` (mono) at ``rate_out``; a copy as float32 when the rates are equal."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    if rate_in == rate_out:
        copy: npt.NDArray[np.float32] = x.copy()
        return copy
    r = Resampler(rate_in, rate_out)
    out: npt.NDArray[np.float32] = np.concatenate([r.process(x), r.flush()])
    return out
