"""A weekday in brackets after a date: 4月8日(月) is Monday the 8th, not the moon.

Schedules write the weekday as one kanji in brackets after the date; OpenJTalk reads
that kanji alone as a noun (月 ツキ, 火 ヒ, 土 ツチ). After a date (a day ending in 日,
or a month/day written with a slash) the brackets are replaced by the weekday's
full name, 月曜日 ゲツヨービ, as a reader says it aloud; the short form ゲツ would be
lost after a day's reading (ヨーカ ゲツ), and 火 カ or 水 スイ alone are barely
words. Anywhere else a bracketed kanji keeps its own reading.
"""

from __future__ import annotations

import re

_DAY_WORDS = {
    "月": "月曜日", "火": "火曜日", "水": "水曜日", "木": "木曜日", "金": "金曜日",
    "土": "土曜日", "日": "日曜日", "祝": "祝日", "休": "休日",
}  # fmt: skip
_DAY = "[月火水木金土日祝休](?:曜日?)?"
_DAYS = rf"{_DAY}(?:[・･,、/]?{_DAY}){{0,2}}"
# NFKC has made every bracket ASCII by the time this runs.
_WEEKDAY_RE = re.compile(rf"(?<=日)\s?\(({_DAYS})\)")
# 4/8(月), 2024-04-08(月): a date in digits before a weekday is written 年月日 first
# (read_numbers would take 4/8 for a fraction), so the weekday follows a 日.
_DIGIT_DATE_RE = re.compile(
    rf"(?<![\d/.\-])(?:(\d{{4}})([/\-.]))?(\d{{1,2}})(?(2)\2|/)(\d{{1,2}})(?=\s?\({_DAYS}\))"
)
_DAY_RE = re.compile(_DAY)


def _days(match: re.Match[str]) -> str:
    return "・".join(_DAY_WORDS[day[0]] for day in _DAY_RE.findall(match.group(1)))


def _digit_date(match: re.Match[str]) -> str:
    year, _, month, day = match.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return match.group(0)
    return f"{year + '年' if year else ''}{int(month)}月{int(day)}日"


def read_weekdays(text: str) -> str:
    """``text`` (NFKC-normalised) with each bracketed weekday after a date spelled out."""
    if "(" not in text:
        return text
    text = _DIGIT_DATE_RE.sub(_digit_date, text)
    return _WEEKDAY_RE.sub(_days, text)
