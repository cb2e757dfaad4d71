"""A request's text as the sentences a voice reads, each through g2p.

Sentences are cut from the text (spec §8.1); a sentence whose reading is too
long for the text encoder (digits and letters read out can turn 200
characters into 600 kana) is cut further, and voices that make a sentence's
audio in one graph get shorter sentences. A stream reads its sentences as it
reaches them (:class:`SentenceReader`): a book's first sentence is spoken
before its last is read, and the readings of sentences already spoken are let
go. A text with nothing readable still fails at the call, as the first
readable sentence is looked for there.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Sequence
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
    """The text's sentences through g2p, all of them; TextError if nothing is readable.

    ``quick_start`` reads a long first sentence's first clause on its own.
    Unreadable sentences among others are skipped (logged, with the reason).
    """
    reader = SentenceReader(frontend, text, quick_start=quick_start, max_length=max_length)
    return reader.read_all()


class SentenceReader:
    """A text's sentences, each read through g2p when it is first asked for.

    Indexing (an int or a slice) reads up to what it needs; iterating reads as it goes;
    :meth:`forget_before` lets go of sentences no one will ask for again (a stream
    past them), so what a long text holds is its unread pieces, not its readings.
    Not thread-safe: one stream reads it.
    """

    def __init__(
        self,
        frontend: Frontend | None,
        text: str,
        *,
        quick_start: bool = False,
        max_length: int | None = None,
        sentences: Sequence[Sentence] = (),
    ) -> None:
        self._frontend = frontend
        self._head = text[:80] if isinstance(text, str) else ""
        self._read: list[Sentence] = list(sentences)
        self._first = 0  # the index of self._read[0]: those before it were let go
        self._readable = bool(self._read)
        self._parts: deque[str] = deque()
        self._single = False
        if frontend is None:  # already read (a caller's own reading)
            return
        if not isinstance(text, str):
            raise TextError(f"text must be a string, not {type(text).__name__}")
        parts = [s.strip() for s in frontend.split_sentences(text, max_length)]
        parts = [s for s in parts if s]
        if not parts:
            raise TextError("the text is empty")
        if quick_start:
            parts = first_clause(parts[0]) + parts[1:]
        self._parts = deque(parts)
        self._single = len(parts) == 1

    @classmethod
    def of(cls, sentences: Sequence[Sentence]) -> SentenceReader:
        """Sentences read already (an editor's own phonemes)."""
        return cls(None, "", sentences=sentences)

    def __getitem__(self, index: int) -> Sentence:
        if index < 0 or not self._reach(index + 1):
            raise IndexError(f"no sentence {index}")
        if index < self._first:
            raise IndexError(f"sentence {index} was let go")
        return self._read[index - self._first]

    def span(self, start: int, stop: int) -> list[Sentence]:
        """Sentences ``start:stop`` (fewer at the text's end)."""
        self._reach(stop)
        if start < self._first:
            raise IndexError(f"sentence {start} was let go")
        return self._read[start - self._first : stop - self._first]

    def count_to(self, stop: int) -> int:
        """``stop``, or the number of sentences if the text has fewer."""
        self._reach(stop)
        return min(stop, self._first + len(self._read))

    def __iter__(self) -> Iterator[Sentence]:
        index = self._first
        while self._reach(index + 1):
            yield self[index]
            index += 1

    def __len__(self) -> int:
        """The number of sentences: reads the whole text."""
        while self._next():
            pass
        return self._first + len(self._read)

    def read_all(self) -> list[Sentence]:
        """Every sentence (reads the whole text; none may have been let go)."""
        len(self)
        if self._first:
            raise IndexError(f"sentences before {self._first} were let go")
        return list(self._read)

    def fits(self, characters: int) -> bool:
        """Whether all the sentences' readings (``bert_text``) hold at most ``characters``
        together; reads no further than it takes to tell."""
        total, index = 0, 0
        while self._reach(index + 1):
            total += len(self[index].phonemes.bert_text)
            if total > characters:
                return False
            index += 1
        return True

    def forget_before(self, index: int) -> None:
        """Let go of the sentences before ``index``."""
        drop = min(max(0, index - self._first), len(self._read))
        del self._read[:drop]
        self._first += drop

    def _reach(self, count: int) -> bool:
        """Read until ``count`` sentences are known; False if the text has fewer."""
        while self._first + len(self._read) < count:
            if not self._next():
                return False
        return True

    def _next(self) -> bool:
        """Read the next readable piece; False at the end (TextError there if nothing
        in the whole text was readable)."""
        frontend = self._frontend
        while self._parts and frontend is not None:
            part = self._parts.popleft()
            try:
                self._read += _read(frontend, part, ends_at_comma(part))
            except TextError as exc:
                if self._single:
                    raise
                # Said once, here: nothing vanishes without a word (emoji, a kanji
                # no dictionary knows), and the text goes on.
                log.warning("skipped a sentence: %s", exc)
                continue
            self._readable = True
            return True
        if not self._readable:
            raise TextError(f"nothing readable in the text: {self._head!r}")
        return False


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
