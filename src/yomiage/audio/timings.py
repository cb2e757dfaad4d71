"""When each phoneme and word is heard, derived from the integer durations used.

Times come from whole frames (``frames * hop`` samples) plus the sentence's
sample offset in the output, so they line up with the audio to the sample
(spec §8.4). Every synthesizer token gets an entry, blanks and pads included
(shown as ``_``), as the reference does; words cover their phones only.
:meth:`Timings.without_blanks` gives the phonemes alone (what lip-sync wants,
and what the JSON timings file holds), each blank's time given to a neighbour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import SYMBOLS, ModelInputs

BLANK = "_"  # the token between phonemes (and the pad at each end of a sentence)


@dataclass(frozen=True)
class Span:
    """A piece of text and the seconds of audio it occupies."""

    text: str
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Timings:
    phonemes: tuple[Span, ...] = ()
    words: tuple[Span, ...] = ()

    def __add__(self, other: Timings) -> Timings:
        return Timings(self.phonemes + other.phonemes, self.words + other.words)

    @classmethod
    def join(cls, parts: Sequence[Timings]) -> Timings:
        return cls(
            tuple(s for p in parts for s in p.phonemes), tuple(s for p in parts for s in p.words)
        )

    def without_blanks(self) -> Timings:
        """These timings with no ``_`` blank or pad among the phonemes (see
        :func:`merge_blanks`); the words are unchanged."""
        return Timings(merge_blanks(self.phonemes), self.words)


def merge_blanks(spans: Sequence[Span]) -> tuple[Span, ...]:
    """``spans`` without the ``_`` blanks and pads, their time given to a neighbour.

    A blank goes to the phoneme that ends where it starts (the one before it); a
    blank with none before it (a sentence's leading pad) goes to the phoneme that
    starts where it ends. So the spans stay contiguous within a sentence, cover
    the same time, and every boundary is one of the original ones (exact to the
    sample); a pause between sentences stays a gap.
    """
    out: list[Span] = []
    pending: Span | None = None  # blanks not yet given to a phoneme
    for span in spans:
        if span.text == BLANK:
            if pending is None and out and out[-1].end == span.start:
                out[-1] = Span(out[-1].text, out[-1].start, span.end)
            elif pending is not None and pending.end == span.start:
                pending = Span(BLANK, pending.start, span.end)
            else:
                pending = span
            continue
        start = span.start
        if pending is not None and pending.end == span.start:
            start = pending.start
        pending = None
        out.append(Span(span.text, start, span.end))
    return tuple(out)


def sentence_timings(
    phonemes: Phonemes,
    inputs: ModelInputs,
    durations: npt.NDArray[np.int64],
    *,
    hop_length: int,
    sample_rate: int,
    offset: int,
) -> Timings:
    """Timings of one sentence whose first sample is sample ``offset`` of the output."""
    frames = np.asarray(durations, dtype=np.int64)
    starts = offset + np.concatenate([[0], np.cumsum(frames)]) * hop_length
    seconds = starts / sample_rate
    tokens = tuple(
        Span(SYMBOLS[int(i)], float(seconds[k]), float(seconds[k + 1]))
        for k, i in enumerate(inputs.phone_ids)
    )
    blanks = len(inputs.phone_ids) == 2 * len(phonemes.phones) + 1

    def token_of(phone: int) -> int:
        return 2 * phone + 1 if blanks else phone

    words = []
    # word2ph: one entry per character of bert_text, between the two pads.
    char_phones = phonemes.word2ph[1:-1]
    if sum(len(w) for w in phonemes.words) == len(char_phones):
        char, phone = 0, phonemes.word2ph[0]
        for word in phonemes.words:
            count = sum(char_phones[char : char + len(word)])
            if count:
                first, last = token_of(phone), token_of(phone + count - 1)
                words.append(Span(word, tokens[first].start, tokens[last].end))
            char += len(word)
            phone += count
    return Timings(tokens, tuple(words))
