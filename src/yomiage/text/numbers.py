"""Read numbers and the symbols around them as a Japanese speaker would.

SBV2 turns every digit run into kanji and then deletes ``%``, ``:``, ``/`` and
units, so 50% becomes ごじゅう and 03-1234-5678 a large number. Here each
construct is recognised first (phone numbers, dates, times, currency, units,
ranges, fractions, signs) and rewritten into words; the remaining digits are
written in kanji, which is what the models were trained on.

The input is NFKC-normalised text (ASCII digits and symbols).
"""

from __future__ import annotations

import re

from yomiage.text.numerals import decimal_to_text, digits_to_kana, int_to_kanji

_NUMBER = r"\d+(?:\.\d+)?"

_THOUSANDS_RE = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,])")
_PHONE_RE = re.compile(r"(?<![\d\-])(0\d{1,4})-(\d{1,4})-(\d{3,4})(?![\d\-])")
# Without the leading 0: three groups ending in four digits (212-836-1725), or a
# local number, two or three digits and four (486-2435) with no counter after it
# (100-2000円 is a range).
_PHONE_GROUPS_RE = re.compile(r"(?<![\d\-.])(\d{2,4})-(\d{2,4})-(\d{4})(?![\d\-.])")
_LOCAL_PHONE_RE = re.compile(r"(?<![\d\-.])(\d{2,3})-(\d{4})(?![\d\-.])")
# A dash written as a long-vowel mark or a typographic dash between two digits
# (４８６ー２４３５: NFKC keeps ー) is a hyphen: no vowel follows a digit.
_DIGIT_DASH_RE = re.compile(r"(?<=\d)[ー‐‑–—―](?=\d)")
# 〒 only marks a postal code: a reader says the code, not the mark (郵便番号は〒106-0032
# said 郵便番号 twice), digit by digit with の at the hyphen.
_POSTAL_RE = re.compile(r"〒\s?(\d{3})-?(\d{4})(?!\d)")
# An address's blocks joined by hyphens (丁目-番-号: 六本木6-10-1) are read with の
# between them (ロクノジューノイチ), never as a range. Three groups of small numbers are
# an address wherever they are (phone numbers and dates are read before this: their
# groups are longer or start with 0); two groups only where the words just before
# them name a place (a kanji run with 都府県市区町村郡 after its first kanji, or 丁目
# right before) and no counter or unit follows: 港区六本木6-10, but 港区で10-20人 and
# 区間10-20km are ranges.
_ADDRESS_RE = re.compile(r"(?<![\d\-.])([1-9]\d{0,2})-([1-9]\d{0,3})-([1-9]\d{0,3})(?![\d\-.])")
_BLOCKS_RE = re.compile(r"(?<![\d\-.])([1-9]\d{0,3})-([1-9]\d{0,3})(?![\d\-.])")
_PLACE_BEFORE_RE = re.compile(
    r"(?:(?:[\u3400-\u9fff々ヶケ]+[都府県市区町村郡]|北海道)[\u3400-\u9fff々ヶケ]*|丁目)$"
)
_UNIT_AFTER_RE = re.compile(r"\s?[A-Za-z%°‰]")
# A race over a distance (100m走, 50メートル走) is ソー; OpenJTalk reads 走 alone as the
# verb (ハシリ). Before a verb ending (10km走った, 5キロ走り) it is the verb.
_RACE_RE = re.compile(
    r"(?<=[\d〇一二三四五六七八九十百千万])(メートル|キロメートル|キロ|マイル|ヤード)走"
    r"(?![らりるれろっ])"
)
_DATE_RE = re.compile(r"(?<![\d.])(\d{4})([/\-.])(\d{1,2})\2(\d{1,2})(?![\d.])")
_YEAR_MONTH_RE = re.compile(r"(?<![\d/])(\d{4})/(\d{1,2})(?![\d/])")
_TIME_RE = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])")
_CURRENCY_RE = re.compile(rf"([$¥£€₩])\s?({_NUMBER})")
_CURRENCY_WORDS = {"$": "ドル", "¥": "円", "£": "ポンド", "€": "ユーロ", "₩": "ウォン"}

# Unit after a number: (word before the number, word after it).
_UNITS: dict[str, tuple[str, str]] = {
    "km/h": ("時速", "キロ"),
    "m/s": ("秒速", "メートル"),
    "km2": ("", "平方キロメートル"),
    "m2": ("", "平方メートル"),
    "m3": ("", "立方メートル"),
    "km": ("", "キロメートル"),
    "cm": ("", "センチメートル"),
    "mm": ("", "ミリメートル"),
    "m": ("", "メートル"),
    "kg": ("", "キログラム"),
    "mg": ("", "ミリグラム"),
    "g": ("", "グラム"),
    "mL": ("", "ミリリットル"),
    "ml": ("", "ミリリットル"),
    "dL": ("", "デシリットル"),
    "L": ("", "リットル"),
    "TB": ("", "テラバイト"),
    "GB": ("", "ギガバイト"),
    "MB": ("", "メガバイト"),
    "KB": ("", "キロバイト"),
    "kB": ("", "キロバイト"),
    "GHz": ("", "ギガヘルツ"),
    "MHz": ("", "メガヘルツ"),
    "kHz": ("", "キロヘルツ"),
    "Hz": ("", "ヘルツ"),
    "kW": ("", "キロワット"),
    "W": ("", "ワット"),
    "V": ("", "ボルト"),
    "mAh": ("", "ミリアンペアアワー"),
    "kcal": ("", "キロカロリー"),
    "ms": ("", "ミリ秒"),
    "dB": ("", "デシベル"),
    "px": ("", "ピクセル"),
    "°C": ("", "度"),
    "°F": ("華氏", "度"),
    "°": ("", "度"),
    "%": ("", "パーセント"),
    "‰": ("", "パーミル"),
}
_UNIT_RE = re.compile(
    rf"({_NUMBER})\s?("
    + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
    + r")(?![A-Za-z0-9])"
)
# 10〜20, 100円〜, 3時~5時: a wave dash after a number (and its counter) reads から.
_WAVE_RANGE_RE = re.compile(r"(\d[^\s\d〜~～\u3040-\u309f,.!?]{0,4}?)\s?[〜~～]")
_DASH_RANGE_RE = re.compile(rf"(?<![\d.\-])({_NUMBER})\s?[\-−]\s?(?=\d)")
_FRACTION_RE = re.compile(r"(?<![\d/])(\d+)/(\d+)(?![\d/])")
_ARITHMETIC = {"×": "かける", "÷": "わる"}
_ARITHMETIC_RE = re.compile(r"(?<=\d)\s?([×÷])\s?(?=\d)")
_VERSION_RE = re.compile(r"(?<![\d.])\d+(?:\.\d+){2,}(?![\d.])")
_LEADING_ZERO_RE = re.compile(r"(?<![\d.])0\d+(?![\d.])")
# A single digit glued to a Latin name is read in English (MP3, F1, G7, PS5),
# except paper sizes (A4, B5), which are read in Japanese.
_NAME_DIGIT_RE = re.compile(r"(?<![A-Za-z])([A-Za-z]+)(\d)(?![\d.,:/\-])")
_ENGLISH_DIGITS = (
    "ゼロ",
    "ワン",
    "ツー",
    "スリー",
    "フォー",
    "ファイブ",
    "シックス",
    "セブン",
    "エイト",
    "ナイン",
)
_PAPER_SIZES = frozenset({"A", "B"})
_SIGN_WORDS = {"-": "マイナス", "−": "マイナス", "+": "プラス", "±": "プラスマイナス"}
_SIGNED_NUMBER_RE = re.compile(r"(?:(?<![0-9A-Za-z.])([\-−+±]))?(\d+)(?:\.(\d+))?")
# A kanji or katakana right after a number starts its counter or unit (units
# are already in katakana by then: 0.5mm → 0.5ミリメートル); the first end of
# a range shares the counter of the second (0.5〜0.8倍, by then 0.5から0.8倍).
_COUNTER_AFTER_RE = re.compile(
    r"(?:から[\-−+]?\d+(?:\.\d+)?)?[\u3400-\u9fff\uf900-\ufaff\u30a1-\u30fa]"
)


def _time(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    second = match.group(3)
    if hour > 30 or minute > 59 or (second is not None and int(second) > 59):
        return match.group(0)
    text = f"{int_to_kanji(hour)}時"
    if minute or second:
        text += f"{int_to_kanji(minute)}分"
    if second and int(second):
        text += f"{int_to_kanji(int(second))}秒"
    return text


def _date(match: re.Match[str]) -> str:
    year, month, day = int(match.group(1)), int(match.group(3)), int(match.group(4))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    return f"{int_to_kanji(year)}年{int_to_kanji(month)}月{int_to_kanji(day)}日"


def _year_month(match: re.Match[str]) -> str:
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        return match.group(0)
    return f"{int_to_kanji(year)}年{int_to_kanji(month)}月"


def _fraction(match: re.Match[str]) -> str:
    numerator, denominator = int(match.group(1)), int(match.group(2))
    if denominator == 0:
        return f"{int_to_kanji(numerator)}スラッシュゼロ"
    # 3/15 and 12/25 are dates far more often than fractions.
    if 1 <= numerator <= 12 and 13 <= denominator <= 31:
        return f"{int_to_kanji(numerator)}月{int_to_kanji(denominator)}日"
    # ぶん in kana: OpenJTalk reads 四分の三 as ヨンプンノサン (minutes).
    return f"{int_to_kanji(denominator)}ぶんの{int_to_kanji(numerator)}"


def _unit(match: re.Match[str]) -> str:
    before, after = _UNITS[match.group(2)]
    return f"{before}{match.group(1)}{after}"


def _phone(match: re.Match[str]) -> str:
    """A phone number: each group digit by digit, a pause between groups."""
    return ",".join(digits_to_kana(g, long_vowels=True) for g in match.groups())


def _address(match: re.Match[str]) -> str:
    return "の".join(int_to_kanji(int(group)) for group in match.groups())


def _blocks(match: re.Match[str]) -> str:
    """Two hyphenated numbers after a place name are an address's blocks; else unchanged."""
    after = match.end()
    if _COUNTER_AFTER_RE.match(match.string, after) or _UNIT_AFTER_RE.match(match.string, after):
        return match.group(0)
    if not _PLACE_BEFORE_RE.search(match.string, 0, match.start()):
        return match.group(0)
    return _address(match)


def _signed_number(match: re.Match[str]) -> str:
    sign, integer, fraction = match.groups()
    words = _SIGN_WORDS.get(sign, "") if sign else ""
    if fraction is not None:
        before_counter = _COUNTER_AFTER_RE.match(match.string, match.end()) is not None
        return words + decimal_to_text(integer, fraction, before_counter=before_counter)
    return words + int_to_kanji(int(integer))


def read_numbers(text: str) -> str:
    """Rewrite every number in ``text`` (and the symbols that belong to it) as words."""
    if not any(ch.isdigit() for ch in text):
        return _RACE_RE.sub(r"\1ソー", text) if "走" in text else text
    text = _NAME_DIGIT_RE.sub(
        lambda m: (
            m.group(0)
            if m.group(1) in _PAPER_SIZES
            else m.group(1) + _ENGLISH_DIGITS[int(m.group(2))]
        ),
        text,
    )
    text = _THOUSANDS_RE.sub(lambda m: m.group(0).replace(",", ""), text)
    text = _POSTAL_RE.sub(
        lambda m: "の".join(digits_to_kana(g, long_vowels=True) for g in m.groups()), text
    )
    text = _DIGIT_DASH_RE.sub("-", text)
    text = _PHONE_RE.sub(_phone, text)
    text = _PHONE_GROUPS_RE.sub(_phone, text)
    text = _LOCAL_PHONE_RE.sub(
        lambda m: m.group(0) if _COUNTER_AFTER_RE.match(text, m.end()) else _phone(m), text
    )
    text = _ADDRESS_RE.sub(_address, text)
    text = _BLOCKS_RE.sub(_blocks, text)
    # Before times, dates and units are spelled out, while both ends are still digits
    # (10:00〜18:00 read 十時ー十八時 when the range came after the times).
    text = _WAVE_RANGE_RE.sub(r"\1から", text)
    text = _DATE_RE.sub(_date, text)
    text = _YEAR_MONTH_RE.sub(_year_month, text)
    text = _TIME_RE.sub(_time, text)
    text = _CURRENCY_RE.sub(lambda m: m.group(2) + _CURRENCY_WORDS[m.group(1)], text)
    text = _UNIT_RE.sub(_unit, text)
    if "走" in text:
        text = _RACE_RE.sub(r"\1ソー", text)
    text = _DASH_RANGE_RE.sub(r"\1から", text)
    text = _FRACTION_RE.sub(_fraction, text)
    text = _ARITHMETIC_RE.sub(lambda m: _ARITHMETIC[m.group(1)], text)
    text = _VERSION_RE.sub(
        lambda m: "点".join(int_to_kanji(int(part)) for part in m.group(0).split(".")), text
    )
    text = _LEADING_ZERO_RE.sub(lambda m: digits_to_kana(m.group(0)), text)
    return _SIGNED_NUMBER_RE.sub(_signed_number, text)
