"""Katakana readings to SBV2 phonemes (spec §2.4)."""

from __future__ import annotations

import json
from importlib.resources import files

from yomiage.errors import TextError
from yomiage.text.symbols import PUNCTUATION_SET

LONG_MARK = "ー"
# Small kana join the mora before them (キャ is one mora).
SMALL_KANA = frozenset("ァィゥェォャュョヮ")
# A word-initial ー copies the previous word's last phoneme only when it is one of these.
_CARRIES_LENGTH = frozenset({"a", "i", "u", "e", "o", "N", "q"})


def _load_mora_table() -> dict[str, tuple[str, ...]]:
    raw = json.loads(files("yomiage.text").joinpath("mora_table.json").read_text("utf-8"))
    return {kana: tuple(p for p in pair if p) for kana, pair in raw.items()}


_MORA_TO_PHONEMES = _load_mora_table()
_MAX_MORA_LEN = max(len(k) for k in _MORA_TO_PHONEMES)


def is_katakana(text: str) -> bool:
    return bool(text) and all("\u30a0" <= ch <= "\u30ff" for ch in text)


def is_punctuation(text: str) -> bool:
    return bool(text) and all(ch in PUNCTUATION_SET for ch in text)


def mora_count(reading: str) -> int:
    """Morae of a katakana reading: small kana join the mora before them."""
    return sum(1 for ch in reading if ch not in SMALL_KANA)


def _body_to_phonemes(kana: str) -> list[str]:
    """Longest-match moras; a ー repeats the last character of the phoneme before it."""
    out: list[str] = []
    i = 0
    while i < len(kana):
        if kana[i] == LONG_MARK:
            if not out:
                raise TextError(f"long mark with nothing before it in reading {kana!r}")
            out.append(out[-1][-1])
            i += 1
            continue
        for size in range(min(_MAX_MORA_LEN, len(kana) - i), 0, -1):
            phonemes = _MORA_TO_PHONEMES.get(kana[i : i + size])
            if phonemes is not None:
                out.extend(phonemes)
                i += size
                break
        else:
            raise TextError(f"no phoneme for {kana[i]!r} in reading {kana!r}")
    return out


def reading_to_phonemes(reading: str, previous: list[str]) -> list[str]:
    """Phonemes of one word's reading.

    ``previous`` is the phoneme list of the word before (empty at the start):
    a reading that starts with ー (e.g. ``ーーーそうなんだ``) lengthens the
    previous word's last sound, or becomes ``-`` when there is none to lengthen.
    """
    if is_punctuation(reading):
        return list(reading)
    if not is_katakana(reading):
        raise TextError(f"reading {reading!r} is neither katakana nor punctuation")
    body = reading.lstrip(LONG_MARK)
    leading = len(reading) - len(body)
    out: list[str] = []
    last = previous[-1] if previous else None
    for _ in range(leading):
        if last is None:
            out.append("-")
        elif not out:
            out.append(last if last in _CARRIES_LENGTH else "-")
        else:
            out.append(out[-1][-1])
    if body:
        out.extend(_body_to_phonemes(body))
    return out
