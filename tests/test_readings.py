"""Numbers, symbols and English read as a Japanese speaker would.

Expected readings (tests/data/*.json) were written by hand, independently of
the implementation. Cases we still read wrongly are marked xfail with the
reason, so fixing one shows up as an XPASS.
"""

from __future__ import annotations

import pytest

from tests.readings import ReadingCase, expected, load_cases, ours
from yomiage.text import Frontend

KNOWN_WRONG = {
    "num-049": "OpenJTalk reads 七日 as シチニチ, not ナノカ",
    "num-058": "3-5日 read サンカラゴニチ; day counters (ミッカ, イツカ) are OpenJTalk's and need 日 after each number",
    "num-065": "the vulgar fraction ½ is folded by NFKC to 1⁄2 and read 一二",
    "num-084": "㈲ becomes 有限会社, which OpenJTalk reads ユーゲンカイシャ",
    "num-122": "leading-zero codes read digit by digit without lengthening 2 (ニ, not ニー)",
    "en-060": "Nike: OpenJTalk has no entry and e2k says ナイク",
    "en-072": "LEGO: all-caps brand spelled letter by letter",
    "en-134": "LinkedIn: camelCase parts read as リンケッド + イン",
    "en-147": "A4: the letter A reads エイ (OpenJTalk's letter name); this case accepts only エー",
    "en-153": "3D: digit before a letter is read in Japanese (サンディー)",
    "en-157": "7-Eleven: digit-dash-word names are not recognised",
    "en-160": "B2B: the 2 between letters is read in Japanese",
    "en-178": "Hong Kong: e2k reads ホングコン",
}


def _params(name: str) -> list[object]:
    return [
        pytest.param(c, id=c.id, marks=pytest.mark.xfail(reason=KNOWN_WRONG[c.id], strict=True))
        if c.id in KNOWN_WRONG
        else pytest.param(c, id=c.id)
        for c in load_cases(name)
    ]


def _check(frontend: Frontend, case: ReadingCase) -> None:
    got = ours(frontend, case.text)
    wanted = [expected(r) for r in case.readings]
    assert got in wanted, (
        f"{case.text}: we read {frontend.normalize(case.text)}, want {case.readings[0]}"
    )


@pytest.mark.parametrize("case", _params("number_readings.json"))
def test_number_reading(frontend: Frontend, case: ReadingCase) -> None:
    _check(frontend, case)


@pytest.mark.parametrize("case", _params("english_readings.json"))
def test_english_reading(frontend: Frontend, case: ReadingCase) -> None:
    _check(frontend, case)


def test_sets_are_large_enough() -> None:
    assert len(load_cases("number_readings.json")) >= 60
    assert len(load_cases("english_readings.json")) >= 80
