"""Split long text into sentences for synthesis (spec §8.1, extended).

Pieces are cut after ``。！？!?`` and newlines, never inside brackets or
quotes, and at ``、`` (then anywhere) when a sentence is longer than a limit,
so that no sentence overflows OpenJTalk or the decoder. Nothing is dropped:
``"".join(split_sentences(text)) == text``; whitespace between sentences
stays at the end of the earlier piece and callers strip it.
"""

from __future__ import annotations

import re

DEFAULT_MAX_LENGTH = 200
_TERMINATORS = frozenset("。！？!?\n．")
_CLOSERS = "」』）)】》〉”’]｣"
_OPENERS = "「『（(【《〈“‘[｢"
_PAIRS = dict(zip(_CLOSERS, _OPENERS, strict=True))
_COMMAS = frozenset("、，,")
_SPEECH_RE = re.compile(
    "[\u3041-\u3096\u30a1-\u30f6\u4e00-\u9fff\u3005\u3006\u3007"
    "A-Za-z0-9\uff10-\uff19\uff21-\uff3a\uff41-\uff5a\uff66-\uff9f]"
)


def has_speech(text: str) -> bool:
    """True if ``text`` holds anything that is read aloud (not only symbols)."""
    return _SPEECH_RE.search(text) is not None


def _cut_at_terminators(text: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    depth: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _OPENERS:
            depth.append(ch)
        elif ch in _PAIRS and depth and depth[-1] == _PAIRS[ch]:
            depth.pop()
        if ch in _TERMINATORS and (not depth or ch == "\n"):
            depth.clear()
            # Keep "！？", "。」" and the whitespace after them with this sentence.
            i += 1
            while i < len(text) and (text[i] in _TERMINATORS or text[i] in _CLOSERS):
                i += 1
            while i < len(text) and text[i].isspace():
                i += 1
            pieces.append(text[start:i])
            start = i
            continue
        i += 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _cut_long(piece: str, max_length: int) -> list[str]:
    """Cut a too-long sentence after commas, or anywhere as a last resort."""
    if len(piece.strip()) <= max_length:
        return [piece]
    out: list[str] = []
    start = 0
    last_comma = -1
    for i, ch in enumerate(piece):
        if ch in _COMMAS:
            last_comma = i
        if i - start + 1 >= max_length:
            cut = last_comma + 1 if last_comma >= start else i + 1
            out.append(piece[start:cut])
            start = cut
    if start < len(piece):
        out.append(piece[start:])
    return out


def split_sentences(text: str, max_length: int = DEFAULT_MAX_LENGTH) -> list[str]:
    """Sentences of ``text``; pieces with nothing to read join their neighbour."""
    if max_length < 1:
        raise ValueError("max_length must be at least 1")
    pieces = [p for raw in _cut_at_terminators(text) for p in _cut_long(raw, max_length)]
    merged: list[str] = []
    pending = ""  # symbol-only text before the first real sentence
    for piece in pieces:
        if not has_speech(piece):
            if merged:
                merged[-1] += piece
            else:
                pending += piece
            continue
        merged.append(pending + piece)
        pending = ""
    if pending:
        merged.append(pending)
    return merged


def ends_at_comma(piece: str) -> bool:
    """True for a clause cut from a longer sentence (it ends at a comma, not a full stop)."""
    stripped = piece.rstrip()
    return bool(stripped) and stripped[-1] in _COMMAS


def first_clause(sentence: str, *, longer_than: int = 24, min_part: int = 6) -> list[str]:
    """``sentence`` cut after its first comma when it is long, else ``[sentence]``.

    Both parts keep at least ``min_part`` characters, so neither is a lone word.
    """
    text = sentence.strip()
    if len(text) <= longer_than:
        return [sentence]
    for i, ch in enumerate(text):
        if ch in _COMMAS and i + 1 >= min_part and len(text) - i - 1 >= min_part:
            return [text[: i + 1], text[i + 1 :]]
    return [sentence]
