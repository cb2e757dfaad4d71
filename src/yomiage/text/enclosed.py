"""Enclosed, circled and roman characters, replaced before NFKC would mangle them.

NFKC turns Ⅲ into III, ㈱ into (株) and ㈪ into (月); here they become the words they
stand for. A numeral becomes a kanji numeral, and numerals written side by side are
separate items (a list, a sequence of steps), never digits of one number: ①②③
would otherwise reach OpenJTalk as 一二三, which it reads ヒャクニジューサン. They are
read イチ、ニ、サン rather than マルイチ…: the circle is typography, and a reader
reading a list aloud says the numbers, as one ① alone has always been read.
"""

from __future__ import annotations

import re
import unicodedata

from yomiage.text.numerals import int_to_kanji

# Characters that stand for a word wherever they are written.
_ENCLOSED_WORDS = {
    "㈱": "株式会社", "㍿": "株式会社", "㈲": "有限会社", "㈳": "社団法人",
    "㈶": "財団法人", "㈹": "代表", "㈻": "学校法人", "№": "ナンバー", "℡": "電話",
    # parenthesized weekdays, holiday and rest day: calendars use them for nothing else
    "㈪": "月曜日", "㈫": "火曜日", "㈬": "水曜日", "㈭": "木曜日", "㈮": "金曜日",
    "㈯": "土曜日", "㈰": "日曜日", "㈷": "祝日", "㉁": "休日",
}  # fmt: skip
_ENCLOSED_WORDS_RE = re.compile("|".join(_ENCLOSED_WORDS))
# Circled weekdays (㊊ 月 … ㊐ 日) are weekdays only after a date (8日㊊); elsewhere
# NFKC's plain kanji is kept. After a date they become the bracketed form that
# :mod:`yomiage.text.weekdays` reads.
_CIRCLED_WEEKDAY_AFTER_DATE_RE = re.compile(r"(?<=[日\d])\s?([\u328a-\u3290])")
_NUMERAL_RUN_RE = re.compile(
    "[\u2160-\u2188"  # roman numerals
    "\u2460-\u24ff"  # circled and parenthesised numbers (and circled letters)
    "\u2776-\u2793"  # dingbat circled numbers
    "\u3220-\u3229"  # parenthesized ideographs one to ten (㈠)
    "\u3251-\u325f\u3280-\u3289\u32b1-\u32bf]+"  # circled 21-50, ideographs one to ten
)
_ITEM_SEPARATOR = "、"
# Any character one of the steps below replaces: most text holds none and is left at once.
_ANY_RE = re.compile(
    "[" + "".join(_ENCLOSED_WORDS) + "\u328a-\u3290" + _NUMERAL_RUN_RE.pattern[1:-2] + "]"
)


def _numeral(char: str) -> str | None:
    """The kanji numeral an enclosed or roman character stands for (None for letters)."""
    try:
        value = unicodedata.numeric(char)
    except ValueError:
        return None  # circled letters and the like: NFKC makes them letters
    return int_to_kanji(int(value)) if value == int(value) else None


def _numeral_run(match: re.Match[str]) -> str:
    """Each character of the run as its numeral, a separator between two numerals."""
    out: list[str] = []
    previous_was_numeral = False
    for char in match.group(0):
        numeral = _numeral(char)
        if numeral is not None and previous_was_numeral:
            out.append(_ITEM_SEPARATOR)
        out.append(numeral if numeral is not None else char)
        previous_was_numeral = numeral is not None
    return "".join(out)


def fold_before_nfkc(text: str) -> str:
    """Replace characters whose NFKC form reads badly (Ⅲ, ①②, ㈱, ㈪)."""
    if text.isascii() or not _ANY_RE.search(text):
        return text
    text = _ENCLOSED_WORDS_RE.sub(lambda m: _ENCLOSED_WORDS[m.group(0)], text)
    text = _CIRCLED_WEEKDAY_AFTER_DATE_RE.sub(
        lambda m: f"({unicodedata.normalize('NFKC', m.group(1))})", text
    )
    return _NUMERAL_RUN_RE.sub(_numeral_run, text)
