"""Kanji nothing reads: read them by their parts, or name them; never drop them silently.

OpenJTalk gives a run of kanji it cannot segment one "symbol" node, and SBV2
reads that as silence: 四川省雅安県高頤墓闕 (a place name with two rare kanji)
vanished whole, 四川省 included. The normalizer drops ideographs outside
OpenJTalk's character set (𠮷) the same way. SBV2's reading keeps that
(``reading="sbv2"``, exactly what its voices saw); the natural reading re-reads
such a run by its longest readable pieces, a kanji no piece reads by its
reading in Unihan (``kanji_readings.json.xz``: one katakana reading for each of
51,583 kanji, Unihan's kJapanese as pyopenjtalk-plus 0.4.1.post10 selected it;
Unicode License v3), and raises :class:`TextError` naming the characters
nothing knows, with the command that teaches one.
"""

from __future__ import annotations

import functools
import json
import lzma
import unicodedata
from collections.abc import Iterable, Mapping
from importlib.resources import files
from types import MappingProxyType

from yomiage.errors import TextError
from yomiage.text.g2p import Phonemes
from yomiage.text.openjtalk import OpenJTalk
from yomiage.text.punctuation import describe_symbol, unreadable_characters

MAX_PIECE = 8  # the longest piece of an unread run tried as one word
SYMBOL_READING = "、"  # OpenJTalk's reading of anything it takes for a symbol


def is_ideograph(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEO"))


def unread_runs(phonemes: Phonemes) -> list[str]:
    """Words of a g2p result read as silence although they hold kanji."""
    return [
        word
        for word, reading in zip(phonemes.words, phonemes.readings, strict=True)
        if set(reading) == {"'"} and any(is_ideograph(ch) for ch in word)
    ]


def read_dropped_kanji(text: str) -> str:
    """``text`` (normalized but for the last step, which drops every character outside
    those kept for OpenJTalk) with such kanji written in katakana, by their Unihan
    reading (TextError naming any that has none)."""
    dropped = _unique(ch for ch in unreadable_characters(text) if is_ideograph(ch))
    if not dropped:
        return text
    readings = kanji_readings()
    unknown = [ch for ch in dropped if ch not in readings]
    if unknown:
        raise unreadable_error(unknown, text, dropped=True)
    return "".join(readings.get(ch, ch) if ch in dropped else ch for ch in text)


def reread(run: str, openjtalk: OpenJTalk) -> tuple[str, list[str]]:
    """``run`` in katakana, read piece by piece (the longest piece OpenJTalk reads whole,
    from left to right), and the characters no piece could read."""
    out: list[str] = []
    unknown: list[str] = []
    i = 0
    while i < len(run):
        for end in range(min(len(run), i + MAX_PIECE), i, -1):
            reading = piece_reading(run[i:end], openjtalk)
            if reading is not None:
                out.append(reading)
                i = end
                break
        else:
            reading = kanji_readings().get(run[i])
            if reading is None:
                unknown.append(run[i])
            else:
                out.append(reading)
            i += 1
    return "".join(out), unknown


@functools.cache
def kanji_readings() -> Mapping[str, str]:
    """Kanji -> one katakana reading (read-only; loaded on first use, ~30 ms)."""
    raw = files("yomiage.text").joinpath("kanji_readings.json.xz").read_bytes()
    table: dict[str, str] = json.loads(lzma.decompress(raw))
    return MappingProxyType(table)


def unreadable_error(characters: Iterable[str], text: str, *, dropped: bool = False) -> TextError:
    """``dropped``: the characters are outside OpenJTalk's character set, so a user
    dictionary cannot teach them either (normalization removes them first)."""
    chars = _unique(characters)
    named = ", ".join(describe_symbol(ch) for ch in chars)
    them = "it" if len(chars) == 1 else "them"
    if dropped:
        how = f"OpenJTalk reads no character outside its set: write {them} in kana"
    else:
        how = (f"no dictionary knows {them}: give a reading with `yomiage dict add "
               f"{chars[0]} <katakana>` (or TTS.add_word)")  # fmt: skip
    return TextError(
        f"cannot read {named} in {text[:40]!r}; {how}, or use reading='sbv2' to read "
        f"{them} as silence as SBV2 does"
    )


def piece_reading(piece: str, openjtalk: OpenJTalk) -> str | None:
    """The katakana OpenJTalk gives ``piece`` if it reads all of it, else None."""
    nodes = openjtalk.run_frontend(piece)
    readings = [str(n["pron"]).replace("’", "") for n in nodes]
    if not readings or any(not r or r == SYMBOL_READING for r in readings):
        return None
    return "".join(readings)


def _unique(chars: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(chars))
