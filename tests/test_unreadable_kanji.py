"""No text dropped silently in the natural reading (issue 23): kanji OpenJTalk reads as
silence are read by their pieces or their Unihan reading, and what nothing can read is
an error naming it. SBV2's reading keeps SBV2's silence."""

from __future__ import annotations

from pathlib import Path

import pytest

from yomiage.errors import TextError
from yomiage.text import Frontend, UserDictionary


@pytest.fixture(scope="module")
def natural() -> Frontend:
    return Frontend(None)


@pytest.fixture(scope="module")
def sbv2() -> Frontend:
    return Frontend(None, reading="sbv2")


def _kana(frontend: Frontend, text: str) -> str:
    return "".join(frontend.g2p(text).readings)


def test_a_kanji_run_openjtalk_cannot_segment_is_read_not_dropped(
    natural: Frontend, sbv2: Frontend
) -> None:
    """四川省雅安県高頤墓闕 was ten silent marks, 四川省 included."""
    text = "四川省雅安県高頤墓闕を訪ねた。"
    assert "'" not in natural.g2p(text).phones
    assert _kana(natural, text).startswith("シセンショー")
    assert _kana(natural, text).count("ケツ") == 1  # 闕, read alone
    assert "".join(sbv2.g2p(text).readings).startswith("'" * 10)  # SBV2's reading, unchanged


def test_a_kanji_no_word_reads_is_read_by_its_unihan_reading(
    natural: Frontend, sbv2: Frontend
) -> None:
    """花乃 lost its 乃 (JSUT 2036); 𠮷, outside OpenJTalk's characters, vanished in
    normalization."""
    assert _kana(natural, "花乃、嘘泣き。").startswith("ハナノ")
    assert _kana(natural, "𠮷野家に行った。").startswith("キチ")
    assert "𠮷" not in sbv2.normalize("𠮷野家に行った。")  # dropped, as SBV2 drops it


def test_a_character_nothing_can_read_is_an_error_naming_it(
    natural: Frontend, tmp_path: Path
) -> None:
    with pytest.raises(TextError, match=r"彁 \(U\+5F41\).*yomiage dict add 彁"):
        natural.g2p("彁と読む。")
    taught = Frontend(UserDictionary(tmp_path / "words.json"))
    taught.add_word("彁", "カ", accent=1)
    assert _kana(taught, "彁と読む。").startswith("カト")


def test_symbols_stay_silent_without_an_error(natural: Frontend) -> None:
    assert _kana(natural, "☆今日は晴れ♪") == "キョーワハレ"
