"""十 before a unit starting with k, s, t or p is said ジュッ.

Regression: 30cm read サンジューセンチメートル because OpenJTalk shortens 十
only before the words its dictionary files as counters (センチ, not センチメートル).
"""

from __future__ import annotations

from yomiage.text import Frontend


def test_ten_before_a_unit_openjtalk_misses_is_written_jut(frontend: Frontend) -> None:
    assert frontend.normalize("30cm") == "三ジュッセンチメートル"
    assert frontend.normalize("10px") == "ジュッピクセル"


def test_ten_is_left_in_kanji_where_openjtalk_already_shortens_it(frontend: Frontend) -> None:
    # BERT reads the kanji the models were trained on wherever OpenJTalk is right.
    assert frontend.normalize("30センチ") == "三十センチ"
    assert frontend.normalize("10ヶ月") == "十ヶ月"


def test_ten_before_a_voiced_or_nasal_unit_is_unchanged(frontend: Frontend) -> None:
    assert frontend.normalize("10メートル") == "十メートル"
    assert frontend.normalize("10mm") == "十ミリメートル"


def test_decimal_below_one_reads_rei(frontend: Frontend) -> None:
    assert frontend.normalize("0.5キロ") == "零点ゴキロ"
    assert frontend.normalize("0.25mm") == "零点ニゴミリメートル"
    assert frontend.normalize("0.5です") == "ゼロ点ゴです"
