from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from yomiage.errors import DictionaryFullError, UserDictionaryError
from yomiage.text import Frontend, UserDictionary
from yomiage.text.user_dict import MAX_WORDS
from yomiage.text.user_word import UserWord


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


def test_update_adds_and_removes_in_one_saved_change(tmp_path: Path) -> None:
    path = tmp_path / "dict.json"
    f = Frontend(path)
    f.add_word("鬼滅", "キメツ")
    new = [UserWord.create("呪術", "ジュジュツ", 1), UserWord.create("推し", "オシ")]
    added = f.update_words(new, ["鬼滅"])
    assert added == tuple(new)
    assert sorted(w["surface"] for w in json.loads(path.read_text("utf-8"))["words"]) == [
        "呪術", "推し",
    ]  # fmt: skip
    assert f.g2p("呪術").readings[0] == "ジュジュツ"
    kept = f.update_words([UserWord.create("呪術", "ジュズツ", 0)], keep_existing=True)
    assert kept == () and f.words[0].reading == "ジュジュツ"


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


def test_corrupt_file_opens_empty_and_refuses_changes_until_fixed(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    dictionary = UserDictionary(path)
    assert dictionary.words == ()
    assert dictionary.problem is not None and path.name in dictionary.problem
    with pytest.raises(UserDictionaryError, match="fix or move"):
        dictionary.add("東京", "トーキョー")
    assert path.read_text("utf-8") == "{not json"  # never overwritten


# -- issue 11: a poisoned dictionary --------------------------------------------


@pytest.mark.parametrize("length", [101, 341, 1000, 2000])
def test_long_reading_is_rejected_before_saving(tmp_path: Path, length: int) -> None:
    path = tmp_path / "d.json"
    frontend = Frontend(path)
    with pytest.raises(UserDictionaryError, match="at most 100"):
        frontend.add_word("中読語", "ア" * length)
    assert not path.exists()
    assert frontend.words == ()


@pytest.mark.parametrize("reading", ["ヷイ", "ア・イ", "ヽア", "ア゠"])
def test_reading_without_phonemes_is_rejected(reading: str) -> None:
    with pytest.raises(UserDictionaryError, match=r"cannot be spoken|katakana"):
        UserDictionary().add("語", reading)


def test_reading_at_the_limit_is_spoken(tmp_path: Path) -> None:
    frontend = Frontend(tmp_path / "d.json")
    frontend.add_word("中読語", "アイウエオ" * 20)
    assert "".join(frontend.g2p("中読語です。").readings).startswith("アイウエオ" * 20)


def _write_entries(path: Path, entries: list[object]) -> None:
    path.write_text(json.dumps({"version": 1, "words": entries}, ensure_ascii=False), "utf-8")


def test_poisoned_file_from_an_older_version_skips_the_bad_entry(tmp_path: Path) -> None:
    """A 2,000-kana reading written before the limit used to kill every start."""
    path = tmp_path / "d.json"
    bad = {"surface": "長い語", "reading": "ア" * 2000, "accent": 0, "priority": 5,
           "word_type": "proper_noun"}  # fmt: skip
    good = {"surface": "鬼滅", "reading": "キメツ", "accent": 0, "priority": 5,
            "word_type": "proper_noun"}  # fmt: skip
    _write_entries(path, [bad, good, "not an entry"])
    frontend = Frontend(path)
    assert [w.surface for w in frontend.words] == ["鬼滅"]
    assert [s.surface for s in frontend.user_dictionary.skipped] == ["長い語", ""]
    assert frontend.g2p("長い語と鬼滅").readings[-1] == "キメツ"
    # A change keeps the skipped entries in the file; removing one drops it.
    frontend.add_word("担々麺", "タンタンメン", accent=3)
    saved = json.loads(path.read_text("utf-8"))["words"]
    assert bad in saved and "not an entry" in saved
    frontend.remove_word("長い語")
    assert bad not in json.loads(path.read_text("utf-8"))["words"]


def test_cli_starts_with_a_poisoned_dictionary(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    _write_entries(path, [{"surface": "長い語", "reading": "ア" * 2000, "accent": 0,
                           "priority": 5, "word_type": "proper_noun"}])  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "yomiage", "g2p", "--user-dict", str(path), "こんにちは"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "長い語" in run.stderr  # says which entry it skipped
    listed = subprocess.run(
        [sys.executable, "-m", "yomiage", "dict", "--user-dict", str(path), "list"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0 and "skipped '長い語'" in listed.stderr


def test_cli_dict_add_rejects_long_reading(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    run = subprocess.run(
        [sys.executable, "-m", "yomiage", "dict", "--user-dict", str(path), "add", "長い語",
         "ア" * 2000],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode != 0
    assert "at most 100" in run.stderr and "Traceback" not in run.stderr
    assert not path.exists()


def test_failed_save_changes_nothing_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed save kept the word in memory and left a .user_dict.* file behind."""
    import errno

    from yomiage import atomic

    folder = tmp_path / "words"
    folder.mkdir()
    path = folder / "d.json"
    frontend = Frontend(path)
    frontend.add_word("鬼滅", "キメツ")

    def disk_full(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", disk_full)
    with pytest.raises(UserDictionaryError, match="No space left"):
        frontend.add_word("担々麺", "タンタンメン", accent=3)
    monkeypatch.undo()
    assert [w.surface for w in frontend.words] == ["鬼滅"]
    assert frontend.g2p("担々麺").readings != ("タンタンメン",)
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) == ["d.json"]
    assert [w.surface for w in UserDictionary(path).words] == ["鬼滅"]


def test_compiled_dictionaries_leave_no_files(tmp_path: Path) -> None:
    """Every add used to leave a compiled copy in /tmp (50 adds: 154 MB), kept after SIGTERM."""
    before = set(Path(tempfile.gettempdir()).glob("yomiage-userdic-*"))
    frontend = Frontend(tmp_path / "d.json")
    for i, surface in enumerate(["鬼滅", "担々麺", "柚子胡椒", "呪術"]):
        frontend.add_word(surface, "タンタンメン", accent=i)
    assert set(Path(tempfile.gettempdir()).glob("yomiage-userdic-*")) == before
    assert frontend.g2p("柚子胡椒").readings == ("タンタンメン",)


def test_library_dictionary_is_in_memory_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TTS() and Frontend() wrote the per-user file: two engines overwrote each other."""
    path = tmp_path / "per-user.json"
    monkeypatch.setenv("YOMIAGE_USER_DICT", str(path))
    frontend = Frontend()
    frontend.add_word("鬼滅", "キメツ")
    assert frontend.g2p("鬼滅").readings == ("キメツ",)
    assert not path.exists()
    assert Frontend().words == ()


def test_two_dictionaries_on_one_file_keep_each_others_words(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    first, second = UserDictionary(path), UserDictionary(path)
    first.add("鬼滅", "キメツ")
    second.add("担々麺", "タンタンメン")  # second had not seen 鬼滅: it is kept anyway
    assert {w.surface for w in second.words} == {"鬼滅", "担々麺"}
    first.remove("担々麺")
    assert [w.surface for w in UserDictionary(path).words] == ["鬼滅"]


_ADDER = """
import sys
from yomiage.text import UserDictionary
d = UserDictionary(sys.argv[1])
for i in range(15):
    d.add(f"{sys.argv[2]}{chr(0x4E00 + i)}", "アイ")
"""


def test_processes_adding_at_once_lose_no_word(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    runs = [subprocess.Popen([sys.executable, "-c", _ADDER, str(path), prefix])
            for prefix in ("甲", "乙", "丙")]  # fmt: skip
    assert [r.wait(timeout=120) for r in runs] == [0, 0, 0]
    assert len(UserDictionary(path).words) == 45


# -- issue 22: a word cap, and changes from other processes --------------------------


def _words(count: int) -> list[UserWord]:
    """``count`` distinct valid words (語 and three kana)."""
    kana = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモ"
    n = len(kana)
    return [
        UserWord.create("語" + kana[i // n // n % n] + kana[i // n % n] + kana[i % n], "テスト")
        for i in range(count)
    ]


def test_adding_past_the_word_cap_fails_and_leaves_the_dictionary_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d.json"
    frontend = Frontend(UserDictionary(path, max_words=3))
    frontend.update_words(_words(3))
    saved = path.read_bytes()
    with pytest.raises(DictionaryFullError, match="at most 3"):
        frontend.add_word("担々麺", "タンタンメン")
    with pytest.raises(DictionaryFullError):
        frontend.update_words(_words(5))
    assert path.read_bytes() == saved
    assert len(frontend.words) == 3 and "担々麺" not in {w.surface for w in frontend.words}
    # Replacing a word, or adding one after a removal, is still allowed at the cap.
    frontend.add_word(_words(1)[0].surface, "カエタ")
    frontend.remove_word(_words(1)[0].surface)
    frontend.add_word("担々麺", "タンタンメン")
    assert frontend.g2p("担々麺").readings[0] == "タンタンメン"


def test_the_default_word_cap_is_ten_thousand() -> None:
    assert MAX_WORDS == 10_000
    dictionary = UserDictionary()
    dictionary.update(_words(MAX_WORDS))
    with pytest.raises(DictionaryFullError, match="10000"):
        dictionary.add("担々麺", "タンタンメン")
    assert len(dictionary.words) == MAX_WORDS


def test_an_add_does_not_parse_an_unchanged_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A single add cost a parse and check of every word of the file: skipped when the
    file is the one this dictionary last read or saved."""
    path = tmp_path / "d.json"
    dictionary = UserDictionary(path)
    dictionary.update(_words(50))
    reads: list[Path] = []
    real = UserDictionary._read

    def counting(self: UserDictionary, p: Path, *, warn: bool) -> Any:
        reads.append(p)
        return real(self, p, warn=warn)

    monkeypatch.setattr(UserDictionary, "_read", counting)
    dictionary.add("担々麺", "タンタンメン")
    dictionary.add("鬼滅", "キメツ")
    assert reads == []
    UserDictionary(path).add("呪術", "ジュジュツ")  # another process's change is read
    reads.clear()
    dictionary.add("推し", "オシ")
    assert reads == [path]
    assert {"担々麺", "鬼滅", "呪術", "推し"} <= dictionary.surfaces


def test_a_frontend_sees_words_another_process_added(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server started before `yomiage dict add` kept the old words without saying so."""
    path = tmp_path / "shared.json"
    server = Frontend(path)
    before = server.g2p("担々麺を食べた。").readings
    cli = Frontend(path)
    cli.add_word("担々麺", "タンタンメン", accent=3)
    with caplog.at_level("INFO", logger="yomiage.text.frontend"):
        assert server.g2p("担々麺を食べた。").readings[0] == "タンタンメン"
    assert "user dictionary reloaded (1 words)" in caplog.text
    assert [w.surface for w in server.words] == ["担々麺"]
    caplog.clear()
    with caplog.at_level("INFO", logger="yomiage.text.frontend"):
        server.g2p("担々麺を食べた。")  # unchanged: no second reload
    assert "reloaded" not in caplog.text
    cli.remove_word("担々麺")
    assert server.g2p("担々麺を食べた。").readings == before


def test_a_file_broken_while_running_keeps_the_words_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    frontend = Frontend(path)
    frontend.add_word("担々麺", "タンタンメン")
    path.write_text("{half a file", encoding="utf-8")
    assert frontend.g2p("担々麺").readings[0] == "タンタンメン"
    assert frontend.user_dictionary.problem is not None
