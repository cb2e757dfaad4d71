from __future__ import annotations

import json
from pathlib import Path

import pytest

from yomiage.errors import UserDictionaryError
from yomiage.text import Frontend, UserDictionary


def test_word_changes_reading_at_once_and_only_in_its_frontend(tmp_path: Path) -> None:
    mine = Frontend(tmp_path / "a.json")
    other = Frontend(tmp_path / "b.json")
    before = mine.g2p("担々麺を食べた。").readings
    mine.add_word("担々麺", "タンタンメン", accent=3)
    assert mine.g2p("担々麺を食べた。").readings[0] == "タンタンメン"
    assert other.g2p("担々麺を食べた。").readings == before
    mine.remove_word("担々麺")
    assert mine.g2p("担々麺を食べた。").readings == before


def test_english_surface_is_not_transliterated(tmp_path: Path) -> None:
    f = Frontend(tmp_path / "d.json")
    f.add_word("yomiage", "ヨミアゲ", accent=0)
    assert f.g2p("yomiageを使う。").readings[0] == "ヨミアゲ"


def test_persisted_and_rebuilt_at_start(tmp_path: Path) -> None:
    path = tmp_path / "dict.json"
    Frontend(path).add_word("鬼滅", "キメツ", accent=0, priority=8, word_type="common_noun")
    data = json.loads(path.read_text("utf-8"))
    assert data["words"][0]["surface"] == "鬼滅"
    again = Frontend(path)
    assert [w.surface for w in again.words] == ["鬼滅"]
    assert again.g2p("鬼滅の刃").readings[0] == "キメツ"


def test_hiragana_reading_is_accepted_as_katakana() -> None:
    assert UserDictionary().add("夢見", "ゆめみ").reading == "ユメミ"


@pytest.mark.parametrize(
    ("surface", "reading", "accent"),
    [
        ("", "アイ", 0),
        ("a,b", "エービー", 0),
        ('say"hi', "セイハイ", 0),
        ("two\nlines", "ツー", 0),
        ("nul\x00", "ヌル", 0),
        ("東京", "Tokyo", 0),
        ("東京", "トーキョー", 5),
        ("東京", "トーキョー", -1),
        ("東京", "ーキョー", 0),
        ("東京", "トーキョー", "2"),
    ],
)
def test_invalid_entries_are_rejected(surface: str, reading: str, accent: object) -> None:
    with pytest.raises(UserDictionaryError):
        UserDictionary().add(surface, reading, accent)  # type: ignore[arg-type]


def test_bad_priority_and_type() -> None:
    with pytest.raises(UserDictionaryError, match="priority"):
        UserDictionary().add("東京", "トーキョー", priority=11)
    with pytest.raises(UserDictionaryError, match="word_type"):
        UserDictionary().add("東京", "トーキョー", word_type="adverb")


def test_remove_unknown_word_names_it() -> None:
    with pytest.raises(UserDictionaryError, match="not in the user dictionary"):
        UserDictionary().remove("存在しない")


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(UserDictionaryError, match=str(path.name)):
        UserDictionary(path)
