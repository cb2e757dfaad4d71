"""Numbers written out in kanji or read digit by digit in katakana.

Kanji numerals are what SBV2 models were trained on and let OpenJTalk apply
counter sound changes (一本 イッポン, 六百 ロッピャク); digit-by-digit katakana
is used where a number is a string of digits (phone numbers, decimals).
"""

from __future__ import annotations

_DIGIT_KANJI = "〇一二三四五六七八九"
_SMALL_UNITS = ((1000, "千"), (100, "百"), (10, "十"))
_LARGE_UNITS = ("", "万", "億", "兆", "京", "垓")
MAX_KANJI_DIGITS = 4 * len(_LARGE_UNITS)

# Digits read one by one. In strings of digits (phone numbers) 2 and 5 are
# lengthened, as Japanese speakers do to keep the rhythm.
DIGIT_KANA = ("ゼロ", "イチ", "ニ", "サン", "ヨン", "ゴ", "ロク", "ナナ", "ハチ", "キュー")
DIGIT_KANA_LONG = ("ゼロ", "イチ", "ニー", "サン", "ヨン", "ゴー", "ロク", "ナナ", "ハチ", "キュー")

# Numbers that OpenJTalk's dictionary reads as names when written in kanji
# (九十九 ツクモ, 千八 センパチ), found by reading every number up to 2100 and
# the powers of ten; spelled in katakana instead.
_MISREAD_KANJI = {"九十九": "キュージューキュー", "千八": "センハチ"}


def _below_10000(n: int) -> str:
    out = []
    for value, unit in _SMALL_UNITS:
        digit, n = divmod(n, value)
        if digit:
            out.append(("" if digit == 1 else _DIGIT_KANJI[digit]) + unit)
    if n:
        out.append(_DIGIT_KANJI[n])
    return "".join(out)


def int_to_kanji(n: int) -> str:
    """``1234`` → ``千二百三十四``; ``0`` → ``ゼロ`` (OpenJTalk cannot read a lone 〇)."""
    if n < 0:
        raise ValueError("negative numbers are read with マイナス by the caller")
    if n == 0:
        return "ゼロ"
    if len(str(n)) > MAX_KANJI_DIGITS:
        return digits_to_kana(str(n))
    groups = []
    unit = 0
    while n:
        n, group = divmod(n, 10000)
        if group:
            groups.append(_below_10000(group) + _LARGE_UNITS[unit])
        unit += 1
    kanji = "".join(reversed(groups))
    return _MISREAD_KANJI.get(kanji, kanji)


def digits_to_kana(digits: str, *, long_vowels: bool = False) -> str:
    """``"007"`` → ``ゼロゼロナナ``."""
    table = DIGIT_KANA_LONG if long_vowels else DIGIT_KANA
    return "".join(table[int(d)] for d in digits)


def decimal_to_text(integer: str, fraction: str, *, before_counter: bool = False) -> str:
    """``3.14`` → ``三点イチヨン``: fraction digits in katakana so OpenJTalk
    does not re-read ``一四`` as ``十四``.

    Below one before a counter or unit the zero is written 零 (レー): 0.5秒 is
    レーテンゴビョー, as announcers say it. Alone (濃度は0.5, バージョン0.5)
    it stays ゼロ, the everyday reading.
    """
    zero_is_rei = before_counter and int(integer) == 0
    whole = "零" if zero_is_rei else int_to_kanji(int(integer))
    return f"{whole}点{digits_to_kana(fraction)}"
