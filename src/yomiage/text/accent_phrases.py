"""Accent phrases and moras of an utterance, from OpenJTalk's full-context labels.

This is the structure Japanese TTS editors show and edit (VOICEVOX's
AudioQuery): each accent phrase is a run of moras with one accent nucleus,
maybe followed by a pause, maybe a question. The labels carry it all: the
phoneme (``p3``), the mora's position in its accent phrase (``a2``), the
phrase's accent nucleus (``f2``, 0 for a flat phrase) and question flag
(``f3``); ``pau`` is a pause. Devoiced vowels stay upper case here (the
editors show them unvoiced); SBV2's phonemes fold them to lower case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from yomiage.errors import TextError

MORA_VOWELS = frozenset({"a", "i", "u", "e", "o", "A", "I", "U", "E", "O", "N", "cl"})
DEVOICED = frozenset({"A", "I", "U", "E", "O"})
_P3 = re.compile(r"-(.*?)\+")
_A2 = re.compile(r"\+(\d+)\+")
_F = re.compile(r"/F:(\d+|xx)_(\d+|xx)#(\d+|xx)_")


@dataclass(frozen=True)
class MoraSpec:
    """One mora: its katakana, consonant (None for a bare vowel, ン, ッ) and vowel."""

    text: str
    consonant: str | None
    vowel: str


@dataclass(frozen=True)
class PhraseSpec:
    """An accent phrase: ``accent`` is the 1-based mora of the nucleus (a flat phrase
    has it on its last mora, as VOICEVOX writes it); ``pause``: the punctuation of a
    pause after it, if any."""

    moras: tuple[MoraSpec, ...]
    accent: int
    pause: str | None = None
    interrogative: bool = False

    def tones(self) -> list[int]:
        """SBV2's tone (1 high, 0 low) of each mora: Tokyo accent, the first mora low
        unless it is the nucleus, the moras up to the nucleus high, the rest low."""
        return [
            int((i == 0 and self.accent == 1) or 1 <= i < self.accent)
            for i in range(len(self.moras))
        ]


@cache
def _kana_of() -> dict[tuple[str | None, str], str]:
    """(consonant, vowel) to katakana: the reverse of the g2p's mora table, preferring
    the usual spelling where two kana sound alike (ジ over ヂ, ズ over ヅ, オ over ヲ)."""
    raw = json.loads(files("yomiage.text").joinpath("mora_table.json").read_text("utf-8"))
    table: dict[tuple[str | None, str], str] = {}
    usual_first = sorted(raw, key=lambda kana: (any(c in "ヂヅヲ" for c in kana), len(kana)))
    for kana in usual_first:
        consonant, vowel = raw[kana]
        table.setdefault((consonant or None, vowel), kana)
    table[(None, "cl")] = "ッ"
    table[(None, "N")] = "ン"
    return table


@cache
def _mora_of() -> dict[str, MoraSpec]:
    """Katakana (one or two characters) to its mora, as the editors write it (ッ: cl)."""
    raw = json.loads(files("yomiage.text").joinpath("mora_table.json").read_text("utf-8"))
    return {
        kana: MoraSpec(kana, consonant or None, "cl" if vowel == "q" else vowel)
        for kana, (consonant, vowel) in raw.items()
    }


def kana_mora(kana: str) -> MoraSpec | None:
    """The mora written ``kana`` (e.g. キャ, ッ), or None when it is not one."""
    return _mora_of().get(kana)


def mora_kana(consonant: str | None, vowel: str) -> str:
    """The katakana of a mora (devoiced vowels read as voiced); TextError if none."""
    key = (consonant, "N" if vowel == "N" else "cl" if vowel == "cl" else vowel.lower())
    kana = _kana_of().get(key)
    if kana is None:
        raise TextError(f"no kana for the mora {consonant or ''}{vowel}")
    return kana


def _field(pattern: re.Pattern[str], label: str, group: int = 1) -> int:
    match = pattern.search(label)
    if match is None or match.group(group) == "xx":
        return -1
    return int(match.group(group))


def accent_phrases_from_labels(labels: Sequence[str], pause_text: str = "、") -> list[PhraseSpec]:
    """The accent phrases of one utterance's labels (silences at the ends dropped)."""
    phrases: list[PhraseSpec] = []
    moras: list[MoraSpec] = []
    accent, interrogative = 0, False
    consonant: str | None = None

    def close(pause: str | None) -> None:
        nonlocal moras
        if moras:
            nucleus = accent if 1 <= accent <= len(moras) else len(moras)
            phrases.append(PhraseSpec(tuple(moras), nucleus, pause, interrogative))
            moras = []
        elif pause and phrases and phrases[-1].pause is None:
            last = phrases[-1]
            phrases[-1] = PhraseSpec(last.moras, last.accent, pause, last.interrogative)

    for label in labels:
        match = _P3.search(label)
        if match is None:
            raise TextError(f"malformed OpenJTalk label {label!r}")
        phoneme = match.group(1)
        if phoneme == "sil":
            continue
        if phoneme == "pau":
            close(pause_text)
            continue
        if phoneme not in MORA_VOWELS:
            consonant = phoneme
            continue
        if _field(_A2, label) == 1 and moras:  # the first mora of the next accent phrase
            close(None)
        if not moras:
            accent = _field(_F, label, 2)
            interrogative = _field(_F, label, 3) == 1
        moras.append(MoraSpec(mora_kana(consonant, phoneme), consonant, phoneme))
        consonant = None
    close(None)
    return phrases
