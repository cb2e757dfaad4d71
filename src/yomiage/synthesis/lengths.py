"""Phoneme lengths a caller chose (an editor's), as frames of the voice's tokens.

An editor shows each phoneme's length as the duration predictor gave it (the
phoneme's token plus the blank after it, :mod:`yomiage.voicevox.query`) and may
change it. Those lengths replace the predicted frames: the alignment the
decoder reads is exactly what the duration predictor's output would have been,
so nothing else about the sentence changes. A length given back unchanged keeps
the predicted split between the phoneme and its blank; a changed one is split
in the same proportion.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from yomiage.errors import OptionError

PhoneLengths = Sequence[float | None]  # seconds per phoneme between the pads; None: predicted


def edited_durations(
    predicted: npt.NDArray[np.int64],
    lengths: PhoneLengths,
    *,
    frame_seconds: float,
    add_blank: bool,
) -> npt.NDArray[np.int64]:
    """Frames per token with ``lengths`` (one per phoneme between the two pads, each
    with the blank after it) in place of the predicted ones (``predicted``)."""
    n_phones = (len(predicted) - 1) // 2 if add_blank else len(predicted)  # pads included
    if len(lengths) != n_phones - 2:
        raise OptionError(
            "lengths",
            f"{len(lengths)} phoneme lengths for a sentence of {n_phones - 2} phonemes",
        )
    out = np.array(predicted, dtype=np.int64, copy=True)
    for i, seconds in enumerate(lengths, start=1):
        if seconds is None:
            continue
        if not np.isfinite(seconds) or seconds < 0:
            raise OptionError("lengths", f"a phoneme length must be 0 or more, not {seconds!r}")
        frames = round(seconds / frame_seconds)
        if not add_blank:
            out[i] = frames
            continue
        phone, blank = 2 * i + 1, 2 * i + 2
        before = int(out[phone] + out[blank])
        if frames == before:
            continue
        share = out[phone] / before if before else 1.0
        out[phone] = round(frames * share)
        out[blank] = frames - out[phone]
    return out


__all__ = ["PhoneLengths", "edited_durations"]
