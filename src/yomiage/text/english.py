"""English words inside Japanese text, read in katakana.

Layers, first match wins (SBV2 reads only what OpenJTalk knows, and lets the
rest be spelled letter by letter or go silent):

1. our lexicon (:mod:`yomiage.text.english_lexicon`): phrases, acronyms said
   as words, technical words and brands;
2. ALL-CAPS words: OpenJTalk's own entry when it has one (AI, NHK), otherwise
   letter by letter; any other two-letter word is read as a word when it is
   one (Go, Up, Hi, us);
3. camelCase and mixed words (GitHub, macOS): OpenJTalk's entry for the whole
   word (iPhone), else each part read on its own;
4. OpenJTalk's own reading, as typed or Title-cased;
5. the e2k model (Unlicense), when its n-gram model says the word is pronounceable;
6. letter by letter.

Words joined by hyphens (e-mail, T-shirt, check-in) are one loanword: the
sum of their parts' readings, with no pause where the hyphen was. A library
named with a dot and ``js`` (Node.js, Vue.js) is read with the dot silent.

Words in the user dictionary are never touched: OpenJTalk reads them itself.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from collections.abc import Container
from typing import Any

from yomiage.text.english_lexicon import (
    ACRONYM_WORDS,
    DOT_SUFFIXES,
    HYPHEN_PREFIXES,
    HYPHENATED_WORDS,
    LETTER_NAMES,
    PHRASES,
    TWO_LETTER_WORDS,
    WORDS,
)
from yomiage.text.mora import is_katakana
from yomiage.text.openjtalk import OpenJTalk

log = logging.getLogger(__name__)

_WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_CAMEL_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_MAX_PHRASE = max(len(p) for p in PHRASES)
_CACHE_LIMIT = 4096
_REJECTED_POS = frozenset({"フィラー", "記号"})
# ASCII hyphen-minus and the Unicode hyphens NFKC leaves alone.
_HYPHENS = frozenset("-\u2010\u2011")


def spell(word: str) -> str:
    """Letter-by-letter reading (エーアイ for AI)."""
    return "".join(LETTER_NAMES[ch] for ch in word.lower() if ch in LETTER_NAMES)


class EnglishReader:
    """Reads English words as katakana; safe to share between threads."""

    def __init__(self, openjtalk: OpenJTalk) -> None:
        self._openjtalk = openjtalk
        self._cache: dict[str, str] = {}
        self._model_lock = threading.Lock()
        self._model: Any = None
        self._ngram: Any = None

    def replace(self, text: str, keep: Container[str] = ()) -> str:
        """Replace every run of ASCII letters in ``text`` by its reading."""
        matches = list(_WORD_RE.finditer(text))
        if not matches:
            return text
        out: list[str] = []
        pos = 0
        i = 0
        while i < len(matches):
            match = matches[i]
            out.append(text[pos : match.start()])
            if match.group(0) in keep:
                out.append(match.group(0))
                pos, i = match.end(), i + 1
                continue
            span = self._compound_at(text, matches, i, keep)
            if span > 1:
                parts = [m.group(0) for m in matches[i : i + span]]
                out.append(self.read_word("-".join(parts)))
                pos, i = matches[i + span - 1].end(), i + span
                continue
            if self._dotted_at(text, matches, i, keep):
                suffix = matches[i + 1].group(0).lower()
                out.append(self.read_word(match.group(0)) + DOT_SUFFIXES[suffix])
                pos, i = matches[i + 1].end(), i + 2
                continue
            span = self._phrase_at(text, matches, i)
            if span:
                out.append(PHRASES[tuple(m.group(0).lower() for m in matches[i : i + span])])
                pos, i = matches[i + span - 1].end(), i + span
                continue
            out.append(self.read_word(match.group(0)))
            pos, i = match.end(), i + 1
        out.append(text[pos:])
        return "".join(out)

    @staticmethod
    def _compound_at(text: str, matches: list[re.Match[str]], i: int, keep: Container[str]) -> int:
        """Number of words from word ``i`` joined by single hyphens (1: no compound).

        A compound containing a user-dictionary word is not joined, so that
        word is still left for OpenJTalk.
        """
        end = i + 1
        while (
            end < len(matches)
            and text[matches[end - 1].end() : matches[end].start()] in _HYPHENS
            and matches[end].group(0) not in keep
        ):
            end += 1
        return end - i

    @staticmethod
    def _dotted_at(text: str, matches: list[re.Match[str]], i: int, keep: Container[str]) -> bool:
        """Whether word ``i`` and a library ending (:data:`DOT_SUFFIXES`) are joined by
        one dot and nothing else follows: Node.js, but not Node.js.org or node.jsx."""
        if i + 1 >= len(matches):
            return False
        name, suffix = matches[i], matches[i + 1]
        if text[name.end() : suffix.start()] != "." or suffix.group(0).lower() not in DOT_SUFFIXES:
            return False
        after = text[suffix.end() : suffix.end() + 2]
        dotted_on = after[:1] == "." and after[1:2].isascii() and after[1:2].isalnum()
        return suffix.group(0) not in keep and not dotted_on

    def _phrase_at(self, text: str, matches: list[re.Match[str]], i: int) -> int:
        """Length of the lexicon phrase starting at word ``i`` (words joined by spaces)."""
        for size in range(min(_MAX_PHRASE, len(matches) - i), 1, -1):
            words = matches[i : i + size]
            gaps = (text[a.end() : b.start()] for a, b in itertools.pairwise(words))
            if (
                all(g.strip() == "" and g for g in gaps)
                and tuple(m.group(0).lower() for m in words) in PHRASES
            ):
                return size
        return 0

    def read_word(self, word: str) -> str:
        """Katakana reading of one English word (no spaces; parts may be joined by ``-``)."""
        cached = self._cache.get(word)
        if cached is None:
            # OpenJTalk re-reads the katakana we hand it, and reads シー as スィー
            # (its entry for "sea"); シイ keeps the letter C as Japanese say it.
            cached = self._read_uncached(word).replace("シー", "シイ")
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[word] = cached
        return cached

    def _read_uncached(self, word: str) -> str:
        if "-" in word:
            return self._compound_reading(word)
        lower = word.lower().replace("'", "")
        if len(word) == 1:
            return spell(word)
        if lower in ACRONYM_WORDS:
            return ACRONYM_WORDS[lower]
        if word.isupper():
            # Short capitals are initials (IT, WHO) even when they spell a word.
            known = WORDS.get(lower) if len(word) >= 4 else None
            return self._openjtalk_reading(word, single_node=True) or known or spell(word)
        if lower in TWO_LETTER_WORDS:
            return TWO_LETTER_WORDS[lower]
        if lower in WORDS:
            return WORDS[lower]
        parts = _CAMEL_PART_RE.findall(word.replace("'", ""))
        if len(parts) > 1:
            whole = self._openjtalk_reading(word, single_node=True)
            return whole or "".join(self.read_word(p) for p in parts)
        reading = self._openjtalk_reading(word) or self._openjtalk_reading(word.title())
        return reading or self._model_reading(lower) or spell(word)

    def _compound_reading(self, word: str) -> str:
        """``e-mail`` → イーメール: the lexicon's entry for the hyphenated or the
        joined word (co-op, wi-fi), else each part's reading, run together."""
        lower = word.lower().replace("'", "")
        joined = lower.replace("-", "")
        for table, key in ((HYPHENATED_WORDS, lower), (ACRONYM_WORDS, joined), (WORDS, joined)):
            if key in table:
                return table[key]
        *heads, last = word.split("-")
        # A prefix in capitals is initials (UN-Habitat), not the prefix un-.
        prefixes = [None if h.isupper() else HYPHEN_PREFIXES.get(h.lower()) for h in heads]
        return "".join(
            [prefix or self.read_word(h) for prefix, h in zip(prefixes, heads, strict=True)]
            + [self.read_word(last)]
        )

    def _openjtalk_reading(self, word: str, *, single_node: bool = False) -> str | None:
        """OpenJTalk's dictionary reading, only if the word is a real entry."""
        nodes = self._openjtalk.run_frontend(word)
        if not nodes or (single_node and len(nodes) != 1):
            return None
        if any(node["pos"] in _REJECTED_POS for node in nodes):
            return None
        reading = "".join(str(node["pron"]) for node in nodes).replace("’", "")
        return reading if is_katakana(reading) else None

    def _model_reading(self, word: str) -> str | None:
        """e2k's reading, or None when e2k thinks the word is not pronounceable."""
        with self._model_lock:
            if self._model is None:
                from e2k import C2K, NGram

                self._model = C2K(max_len=32)
                self._ngram = NGram()
            if not self._ngram(word):
                return None
            # Tiny matrices: BLAS threading makes them 20x slower, and the
            # lock keeps the limit's set/restore pairs from interleaving.
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1):
                reading = str(self._model(word))
        if not is_katakana(reading):
            log.debug("e2k gave a non-katakana reading %r for %r", reading, word)
            return None
        return reading
