"""A request's text as the sentences a voice reads, each through g2p.

Sentences are cut from the text (spec §8.1); a sentence whose reading is too
long for the text encoder (digits and letters read out can turn 200
characters into 600 kana) is cut further, and voices that make a sentence's
audio in one graph get shorter sentences. Everything is read before any
audio is made, so unreadable text fails at the call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from yomiage.errors import TextError
from yomiage.text.frontend import Frontend
from yomiage.text.g2p import Phonemes
from yomiage.text.sentences import ends_at_comma, first_clause

log = logging.getLogger(__name__)

# The longest reading (normalized text) of one sentence; 200 ordinary characters
# stay below it, a sentence of digits or letters read out is cut further.
MAX_READING_CHARS = 300
# Voices that make a sentence's audio in one graph (HayaKoe's) cannot cut their
# flow (see runtime.chunking), so their sentences are cut shorter instead: at
# about ten frames a character, this many characters at speed 1 stay near the
# span the flow reads at once elsewhere; slower speech gets proportionally fewer.
WHOLE_UTTERANCE_CHARS = 100
_MIN_SENTENCE_CHARS = 20


@dataclass(frozen=True)
class Sentence:
    """One piece of the text as written, its phonemes, and whether it is a clause cut
    from a longer sentence (the next piece then follows without a sentence pause)."""

    text: str
    phonemes: Phonemes
    clause: bool = False


def sentence_length(whole_utterance: bool, speed: float) -> int | None:
    """The longest sentence (characters) for a voice; None: the frontend's default."""
    if not whole_utterance:
        return None
    return max(_MIN_SENTENCE_CHARS, int(WHOLE_UTTERANCE_CHARS / max(1.0, speed)))


def read_sentences(
    frontend: Frontend, text: str, *, quick_start: bool = False, max_length: int | None = None
) -> list[Sentence]:
    """The text's sentences through g2p; TextError if nothing is readable.

    ``quick_start`` reads a long first sentence's first clause on its own.
    Unreadable sentences among others are skipped (logged at debug).
    """
    if not isinstance(text, str):
        raise TextError(f"text must be a string, not {type(text).__name__}")
    parts = [s.strip() for s in frontend.split_sentences(text, max_length)]
    parts = [s for s in parts if s]
    if not parts:
        raise TextError("the text is empty")
    if quick_start:
        parts = first_clause(parts[0]) + parts[1:]
    out: list[Sentence] = []
    for part in parts:
        try:
            out += _read(frontend, part, ends_at_comma(part))
        except TextError:
            if len(parts) == 1:
                raise
            log.debug("skipping unreadable sentence %r", part)
    if not out:
        raise TextError(f"nothing readable in the text: {text[:80]!r}")
    return out


def _read(frontend: Frontend, part: str, clause: bool) -> list[Sentence]:
    """``part`` through g2p, cut in halves while its reading is too long (the text
    encoder's cost grows with the square of its length)."""
    phonemes = frontend.g2p(part)
    if len(phonemes.bert_text) <= MAX_READING_CHARS or len(part) < 2:
        return [Sentence(part, phonemes, clause)]
    halves = [h for h in frontend.split_sentences(part, (len(part) + 1) // 2) if h]
    if len(halves) < 2:  # nothing to cut at (symbols the splitter keeps together)
        return [Sentence(part, phonemes, clause)]
    out: list[Sentence] = []
    for i, half in enumerate(halves):
        # Inside a sentence: the next half follows without a sentence pause.
        out += _read(frontend, half, clause if i == len(halves) - 1 else True)
    return out
