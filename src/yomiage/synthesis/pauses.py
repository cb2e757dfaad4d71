"""Silence between sentences: predicted pauses and trailing silence (spec §8.3-§8.4).

The duration predictor already knows how long the model would hold a
sentence-final ``.``, ``!`` or ``?`` when it reads the text as a whole; that
length, not a constant, becomes the pause. Silence the previous sentence
already ends with counts towards it, and no pause is shorter than
:data:`MIN_PAUSE_SECONDS`.

"The text as a whole" is, as SBV2 does it, the text read and run through BERT
once more; or (yomiage's natural reading) the sentences already read, joined
(:func:`joined_reading`, :func:`yomiage.bert.features.join_token_rows`), so BERT runs once per
sentence and not again for the pauses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import SYMBOL_TO_ID

MIN_PAUSE_SECONDS = 0.08
SILENCE_WINDOW_SECONDS = 0.010
SILENCE_THRESHOLD = 0.02  # of the sentence's peak
_BOUNDARY_IDS = frozenset(SYMBOL_TO_ID[s] for s in (".", "!", "?"))
_BLANK_ID = SYMBOL_TO_ID["_"]


def joined_reading(parts: Sequence[Phonemes]) -> Phonemes:
    """Consecutive sentences' readings as one utterance: their phones between one
    pair of ``_`` pads, as one whole-text g2p would give them (differing only where
    a line break adds a mark or the sentences' accents meet)."""
    if not parts:
        raise ValueError("nothing to join")
    first, last = parts[0], parts[-1]
    return Phonemes(
        text="".join(p.text for p in parts),
        bert_text="".join(p.bert_text for p in parts),
        words=tuple(w for p in parts for w in p.words),
        readings=tuple(r for p in parts for r in p.readings),
        phones=(first.phones[0], *(x for p in parts for x in p.phones[1:-1]), last.phones[-1]),
        tones=(first.tones[0], *(x for p in parts for x in p.tones[1:-1]), last.tones[-1]),
        word2ph=(first.word2ph[0], *(x for p in parts for x in p.word2ph[1:-1]), last.word2ph[-1]),
    )


def boundary_frames(
    phone_ids: npt.NDArray[np.int64], durations: npt.NDArray[np.int64]
) -> list[int]:
    """Frames held at each sentence boundary of a whole-text reading.

    A run of boundary marks separated only by blanks (``!?``) is one boundary,
    counted at its last mark; the blanks on either side of it belong to the pause.
    """
    ids = [int(i) for i in phone_ids]
    positions: list[int] = []
    for p, i in enumerate(ids):
        if i not in _BOUNDARY_IDS:
            continue
        if positions and all(x == _BLANK_ID for x in ids[positions[-1] + 1 : p]):
            positions[-1] = p
        else:
            positions.append(p)
    frames = []
    for p in positions:
        total = int(durations[p])
        if p > 0 and ids[p - 1] == _BLANK_ID:
            total += int(durations[p - 1])
        if p + 1 < len(ids) and ids[p + 1] == _BLANK_ID:
            total += int(durations[p + 1])
        frames.append(total)
    return frames


def trailing_silence(audio: npt.NDArray[np.float32], sample_rate: int) -> float:
    """Seconds of near-silence at the end of ``audio``, in 10 ms steps."""
    window = max(1, int(sample_rate * SILENCE_WINDOW_SECONDS))
    n = len(audio)
    if n < window:
        return 0.0
    peak = float(np.abs(audio).max())
    if peak == 0.0:
        return n / sample_rate
    threshold = SILENCE_THRESHOLD * peak
    end = n
    while end >= window and float(np.abs(audio[end - window : end]).max()) <= threshold:
        end -= window
    return (n - end) / sample_rate


def gap_samples(
    predicted: float | None,
    trailing: float,
    sample_rate: int,
    *,
    chosen: float | None = None,
    scale: float = 1.0,
) -> int:
    """Zeros to insert after a sentence that ends with ``trailing`` seconds of silence:
    the ``predicted`` pause (at least the floor), or the ``chosen`` one, times ``scale``."""
    if chosen is not None:
        target = chosen * scale
    else:
        target = max(MIN_PAUSE_SECONDS if predicted is None else predicted, MIN_PAUSE_SECONDS)
        target *= scale
    if trailing >= target:
        return 0
    return int(sample_rate * (target - trailing))
