"""Accent (tone) extraction from OpenJTalk full-context labels (spec §2.5).

The tones are read from the labels of the whole utterance, independently of
the word readings; g2p then aligns the two (spec §2.6).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from yomiage.errors import TextError

_MISSING = -50
_P3_RE = re.compile(r"-(.*?)\+")
_A1_RE = re.compile(r"/A:([0-9\-]+)\+")
_A2_RE = re.compile(r"\+(\d+)\+")
_A3_RE = re.compile(r"\+(\d+)/")
_E3_RE = re.compile(r"!(\d+)_")
_F1_RE = re.compile(r"/F:(\d+)_")
_PHRASE_END_VOWELS = frozenset({"a", "i", "u", "e", "o", "N", "cl"})
_CLOSES_PHRASE = frozenset({"_", "#", "$", "?"})


def _number(pattern: re.Pattern[str], label: str) -> int:
    match = pattern.search(label)
    return int(match.group(1)) if match else _MISSING


def _phoneme(label: str) -> str:
    match = _P3_RE.search(label)
    if match is None:
        raise TextError(f"malformed OpenJTalk label {label!r}")
    p3 = match.group(1)
    # Devoiced vowels are written in upper case; SBV2 does not distinguish them.
    return p3.lower() if p3 in ("A", "I", "U", "E", "O") else p3


def prosody_symbols(labels: Sequence[str]) -> list[str]:
    """Phonemes interleaved with the markers ``^ $ ? _ # [ ]``."""
    out: list[str] = []
    last = len(labels) - 1
    for n, label in enumerate(labels):
        p3 = _phoneme(label)
        if p3 == "sil":
            if n == 0:
                out.append("^")
            elif n == last:
                e3 = _number(_E3_RE, label)
                if e3 == 0:
                    out.append("$")
                elif e3 == 1:
                    out.append("?")
            continue
        if p3 == "pau":
            out.append("_")
            continue
        out.append(p3)
        a1 = _number(_A1_RE, label)
        a2 = _number(_A2_RE, label)
        a3 = _number(_A3_RE, label)
        f1 = _number(_F1_RE, label)
        a2_next = _number(_A2_RE, labels[n + 1]) if n < last else _MISSING
        if a3 == 1 and a2_next == 1 and p3 in _PHRASE_END_VOWELS:
            out.append("#")
        elif a1 == 0 and a2_next == a2 + 1 and a2 != f1:
            out.append("]")
        elif a2 == 1 and a2_next == 2:
            out.append("[")
    return out


def _normalize_phrase(tones: list[int]) -> list[int]:
    levels = set(tones)
    if levels <= {0, 1}:
        return tones
    if levels == {-1, 0}:
        return [t + 1 for t in tones]
    raise TextError(f"unexpected accent levels {sorted(levels)} in one accent phrase")


def tones_from_labels(labels: Sequence[str]) -> list[tuple[str, int]]:
    """``(phoneme, tone)`` pairs (tone 0 low, 1 high), punctuation and pauses excluded."""
    result: list[tuple[str, int]] = []
    phrase: list[tuple[str, int]] = []
    tone = 0
    for symbol in prosody_symbols(labels):
        if symbol == "^":
            continue
        if symbol in _CLOSES_PHRASE:
            levels = _normalize_phrase([t for _, t in phrase])
            result.extend((p, t) for (p, _), t in zip(phrase, levels, strict=True))
            phrase = []
            tone = 0
        elif symbol == "[":
            tone += 1
        elif symbol == "]":
            tone -= 1
        else:
            phrase.append(("q" if symbol == "cl" else symbol, tone))
    return result
