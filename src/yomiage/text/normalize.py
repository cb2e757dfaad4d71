"""Raw text to the normalized text the g2p reads (spec §2.2, with better readings).

The order and the final character filter are SBV2's, so plain Japanese
normalizes exactly as SBV2 does; numbers, symbols and English are read by our
own rules (:mod:`yomiage.text.numbers`, :mod:`yomiage.text.english`) where SBV2
drops or misreads them.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Container

from yomiage.text.counters import TenSoundChange
from yomiage.text.english import EnglishReader
from yomiage.text.numbers import read_numbers
from yomiage.text.numerals import int_to_kanji
from yomiage.text.punctuation import replace_punctuation, unreadable_characters
from yomiage.text.unreadable import read_dropped_kanji

log = logging.getLogger(__name__)

# Characters NFKC would mangle (Ⅲ → III, ㈱ → (株), № → No), replaced first.
_ENCLOSED_WORDS = {
    "㈱": "株式会社", "㍿": "株式会社", "㈲": "有限会社", "㈳": "社団法人",
    "㈶": "財団法人", "㈹": "代表", "㈻": "学校法人", "№": "ナンバー", "℡": "電話",
}  # fmt: skip
_ROMAN_OR_ENCLOSED_RE = re.compile(
    "[\u2160-\u2188"  # roman numerals
    "\u2460-\u24ff"  # circled and parenthesised numbers
    "\u2776-\u2793"  # dingbat circled numbers
    "\u3251-\u325f\u32b1-\u32bf]"  # circled numbers 21-50
)
_WAVE_DASH_RE = re.compile("[~〜～]")
_COMBINING_SOUND_MARKS_RE = re.compile("[\u3099\u309a]")


def _replace_enclosed(match: re.Match[str]) -> str:
    char = match.group(0)
    try:
        value = unicodedata.numeric(char)
    except ValueError:
        return char  # circled letters and the like: NFKC handles them
    return int_to_kanji(int(value)) if value == int(value) else char


def fold_before_nfkc(text: str) -> str:
    """Replace characters whose NFKC form reads badly (Ⅲ, ①, ㈱)."""
    for char, word in _ENCLOSED_WORDS.items():
        if char in text:
            text = text.replace(char, word)
    return _ROMAN_OR_ENCLOSED_RE.sub(_replace_enclosed, text)


def normalize(
    text: str,
    english: EnglishReader,
    keep_words: Container[str] = (),
    ten_sound_change: TenSoundChange | None = None,
    *,
    keep_kanji: bool = False,
) -> str:
    """Normalized text: kana, kanji, Greek, letters kept for OpenJTalk and ``!?…,.'-``.

    ``keep_words`` are user-dictionary surfaces, left for OpenJTalk to read;
    ``ten_sound_change`` (the frontend's) gives 三十センチメートル its ジュッ.
    ``keep_kanji`` (the natural reading): kanji outside OpenJTalk's characters, which
    the last step drops (as SBV2 does), are first written in katakana
    (:func:`~yomiage.text.unreadable.read_dropped_kanji`).
    """
    text = fold_before_nfkc(text)
    text = unicodedata.normalize("NFKC", text)
    text = read_numbers(text)
    text = english.replace(text, keep_words)
    if ten_sound_change is not None:
        text = ten_sound_change.apply(text)
    text = _WAVE_DASH_RE.sub("ー", text)
    if keep_kanji:
        text = read_dropped_kanji(text)
    if log.isEnabledFor(logging.DEBUG):
        dropped = unreadable_characters(text).strip()
        if dropped:
            log.debug("dropped characters that cannot be read: %r", dropped)
    text = replace_punctuation(text)
    return _COMBINING_SOUND_MARKS_RE.sub("", text)
