"""AquesTalk-like kana, the notation VOICEVOX clients send with ``is_kana=true``.

A reading is written as katakana moras in accent phrases: ``/`` separates two
phrases, ``、`` separates them with a pause, ``'`` follows the accent nucleus
(exactly one per phrase), ``_`` before a mora makes its vowel voiceless, and
``？`` at the end of a phrase makes it a question. ``ー`` lengthens the vowel
before it. Errors carry VOICEVOX's error names so clients can show them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from yomiage.errors import YomiageError
from yomiage.text.accent_phrases import MoraSpec, PhraseSpec, kana_mora

ACCENT = "'"
VOICELESS = "_"
PHRASE_BREAK = "/"
PAUSE = "、"
QUESTION = ("？", "?")
MAX_KANA_LENGTH = 2000
_VOICED_VOWELS = frozenset("aiueo")


@dataclass
class KanaError(YomiageError, ValueError):
    """Kana that cannot be read: ``name`` is VOICEVOX's error name, ``args_`` its
    arguments (the text and position at fault)."""

    message: str
    name: str
    args_: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def parse_kana(text: str) -> list[PhraseSpec]:
    """The accent phrases written in ``text``; :class:`KanaError` naming the first fault."""
    if not text:
        raise KanaError("the kana is empty", "EMPTY_PHRASE", {"position": 1})
    if len(text) > MAX_KANA_LENGTH:
        raise KanaError(f"the kana has {len(text)} characters; at most {MAX_KANA_LENGTH}",
                        "UNKNOWN_TEXT", {"text": text[:40]})  # fmt: skip
    parts = re.split(f"([{PHRASE_BREAK}{PAUSE}])", text)  # phrase, mark, phrase, ...
    phrases: list[PhraseSpec] = []
    for n in range(0, len(parts), 2):
        body, mark = parts[n], parts[n + 1] if n + 1 < len(parts) else None
        if not body:
            if mark is None and parts[n - 1] == PAUSE:
                break  # a pause at the very end belongs to the phrase before it
            raise KanaError(f"accent phrase {n // 2 + 1} is empty", "EMPTY_PHRASE",
                            {"position": n // 2 + 1})  # fmt: skip
        phrases.append(_phrase(body, PAUSE if mark == PAUSE else None))
    return phrases


def _phrase(text: str, pause: str | None) -> PhraseSpec:
    interrogative = text.endswith(QUESTION)
    body = text[:-1] if interrogative else text
    if any(q in body for q in QUESTION):
        raise KanaError(f"{text!r}: a question mark may only end an accent phrase",
                        "INTERROGATION_MARK_NOT_AT_END", {"text": text})  # fmt: skip
    moras: list[MoraSpec] = []
    accent = 0
    voiceless = False
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == ACCENT:
            if not moras:
                raise KanaError(f"{text!r}: an accent mark cannot come first",
                                "ACCENT_TOP", {"text": text})  # fmt: skip
            if accent:
                raise KanaError(f"{text!r}: two accent marks in one phrase",
                                "ACCENT_TWICE", {"text": text})  # fmt: skip
            accent = len(moras)
            i += 1
            continue
        if ch == VOICELESS:
            voiceless = True
            i += 1
            continue
        mora, size = _next_mora(body, i, moras)
        if voiceless and mora.vowel in _VOICED_VOWELS:
            mora = MoraSpec(mora.text, mora.consonant, mora.vowel.upper())
        voiceless = False
        moras.append(mora)
        i += size
    if not accent:
        raise KanaError(f"{text!r}: no accent mark (' after the accented mora)",
                        "ACCENT_NOTFOUND", {"text": text})  # fmt: skip
    return PhraseSpec(tuple(moras), accent, pause, interrogative)


def _next_mora(body: str, i: int, before: list[MoraSpec]) -> tuple[MoraSpec, int]:
    if body[i] == "ー":
        if not before or before[-1].vowel.lower() not in _VOICED_VOWELS | {"n"}:
            raise KanaError(f"{body!r}: ー needs a vowel before it", "UNKNOWN_TEXT",
                            {"text": body[i:i + 5]})  # fmt: skip
        vowel = before[-1].vowel.lower()
        return MoraSpec("ー", None, "N" if vowel == "n" else vowel), 1
    for size in (2, 1):
        mora = kana_mora(body[i : i + size]) if i + size <= len(body) else None
        if mora is not None:
            return mora, size
    raise KanaError(f"{body!r}: {body[i]!r} is not a katakana mora", "UNKNOWN_TEXT",
                    {"text": body[i:i + 5]})  # fmt: skip


def kana_text(phrases: list[PhraseSpec]) -> str:
    """The text a voice reads for these phrases: their moras, pauses and questions
    (what BERT sees once only kana is left)."""
    out = []
    for phrase in phrases:
        out.append("".join(m.text for m in phrase.moras))
        if phrase.interrogative:
            out.append("？")
        if phrase.pause:
            out.append(phrase.pause)
    return "".join(out)
