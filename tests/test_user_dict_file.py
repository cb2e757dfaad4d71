"""A user dictionary file another process changed (issue 31, item 11, R8).

A file of 100,000 ``[`` raised RecursionError on every request (500) and kept
the worker from starting; a broken file that was then deleted kept refusing
changes; 200,000 bad entries wrote 200,000 WARNING lines; a reload took
50,000 words though a change may make at most 10,000. A bad file is now one
logged refusal of that file (the words in memory are kept), a missing file
clears the problem, and the cap holds for a reload as for a change.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from yomiage.errors import DictionaryStorageError
from yomiage.text import Frontend
from yomiage.text.user_dict import UserDictionary

NESTED = "[" * 100_000


def _entries(count: int, *, valid: bool) -> list[dict[str, object]]:
    """``count`` entries: words (漢字 surfaces, one reading) or entries no word can be."""
    if valid:
        return [{"surface": f"語{i:05d}", "reading": "ゴ", "accent": 0, "priority": 5,
                 "word_type": "proper_noun"} for i in range(count)]  # fmt: skip
    return [{"surface": "x" * 100, "reading": "ゴ"} for _ in range(count)]


def _write(path: Path, entries: list[dict[str, object]]) -> None:
    path.write_text(json.dumps({"version": 1, "words": entries}, ensure_ascii=False), "utf-8")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "yomiage.text.user_dict" and r.levelno >= logging.WARNING]  # fmt: skip


def test_a_deeply_nested_file_at_start_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """R8 (a): a new `yomiage serve --user-dict` on such a file exited 1."""
    path = tmp_path / "user_dict.json"
    path.write_text(NESTED, "utf-8")
    dictionary = UserDictionary(path)
    assert dictionary.words == ()
    assert dictionary.problem is not None and str(path) in dictionary.problem
    frontend = Frontend(path)  # what a worker builds at its start
    assert frontend.g2p("こんにちは。").readings
    with pytest.raises(DictionaryStorageError, match="fix or move"):
        dictionary.add("鬼滅", "キメツ")
    assert path.read_text("utf-8") == NESTED


def test_a_file_nested_while_running_keeps_the_words_and_reads(tmp_path: Path) -> None:
    """R8 (a): every request after the change raised RecursionError (a 500)."""
    path = tmp_path / "user_dict.json"
    frontend = Frontend(path)
    frontend.add_word("担々麺", "タンタンメン")
    path.write_text(NESTED, "utf-8")
    for _ in range(3):
        assert frontend.g2p("担々麺").readings[0] == "タンタンメン"
    assert frontend.user_dictionary.problem is not None


def test_a_broken_file_that_is_deleted_no_longer_refuses_changes(tmp_path: Path) -> None:
    """R8 (b): after `rm` of the broken file, adds still failed "cannot read ...; fix or
    move the file", and readings kept the words of a file that no longer exists."""
    path = tmp_path / "user_dict.json"
    frontend = Frontend(path)
    frontend.add_word("担々麺", "タンタンメン")
    before = Frontend(None).g2p("担々麺").readings
    path.write_text("{not json", "utf-8")
    frontend.g2p("担々麺")  # the broken file is read (and refused)
    assert frontend.user_dictionary.problem is not None
    path.unlink()
    assert frontend.g2p("担々麺").readings == before  # the file's words are gone with it
    assert frontend.user_dictionary.problem is None
    frontend.add_word("鬼滅", "キメツ")
    assert [w.surface for w in UserDictionary(path).words] == ["鬼滅"]


def test_a_missing_file_clears_a_problem_found_at_start(tmp_path: Path) -> None:
    path = tmp_path / "user_dict.json"
    path.write_text("{not json", "utf-8")
    dictionary = UserDictionary(path)
    assert dictionary.problem is not None
    path.unlink()
    assert not dictionary.reload_if_changed()  # no words came or went
    assert dictionary.problem is None
    dictionary.add("鬼滅", "キメツ")
    assert [w.surface for w in UserDictionary(path).words] == ["鬼滅"]


@pytest.mark.parametrize("when", ["start", "reload"])
def test_many_bad_entries_are_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, when: str
) -> None:
    """R8 (c): 200,000 bad entries wrote 200,012 WARNING lines (37 MB) for one reload."""
    path = tmp_path / "user_dict.json"
    dictionary = UserDictionary(path)
    dictionary.add("鬼滅", "キメツ")
    _write(path, [*_entries(3, valid=True), *_entries(2000, valid=False)])
    with caplog.at_level(logging.WARNING, logger="yomiage.text.user_dict"):
        if when == "start":
            dictionary = UserDictionary(path)
        else:
            assert dictionary.reload_if_changed()
    (line,) = _warnings(caplog)
    assert "2000 entries" in line and str(path) in line and "longer than" in line
    assert len(dictionary.words) == 3 and len(dictionary.skipped) == 2000


@pytest.mark.parametrize("when", ["start", "reload"])
def test_the_word_cap_holds_for_a_file_another_process_wrote(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, when: str
) -> None:
    """R8 (c): a reload took 50,000 words; a change may make at most the cap."""
    path = tmp_path / "user_dict.json"
    dictionary = UserDictionary(path, max_words=5)
    dictionary.add("鬼滅", "キメツ")
    _write(path, _entries(6, valid=True))
    with caplog.at_level(logging.WARNING, logger="yomiage.text.user_dict"):
        if when == "start":
            dictionary = UserDictionary(path, max_words=5)
            kept: list[str] = []
        else:
            assert not dictionary.reload_if_changed()  # refused: the words stay
            kept = ["鬼滅"]
    assert [w.surface for w in dictionary.words] == kept
    (line,) = _warnings(caplog)
    assert dictionary.problem is not None and "more than 5 words" in dictionary.problem
    assert "at most 5" in line and str(path) in line
    with pytest.raises(DictionaryStorageError):
        dictionary.add("呪術", "ジュジュツ")
    _write(path, _entries(5, valid=True))  # at the cap: taken
    dictionary.reload_if_changed()
    assert len(dictionary.words) == 5 and dictionary.problem is None


@pytest.mark.server
def test_serve_starts_and_speaks_with_a_deeply_nested_user_dictionary(
    tmp_path: Path, test_voice: Path
) -> None:
    """R8 (a): `yomiage serve --user-dict` on such a file: the worker never started (exit 1)."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from tests.serving import listening_url

    path = tmp_path / "user_dict.json"
    path.write_text(NESTED, "utf-8")
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "1", "--no-warmup", "--user-dict", str(path),
               "--dict-api", "write"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = listening_url(process)
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
            assert http.get("/user_dict").status_code == 200
            refused = http.post("/user_dict_word", params={
                "surface": "鬼滅", "pronunciation": "キメツ", "accent_type": 1})  # fmt: skip
            assert "fix or move" in refused.text
            path.unlink()  # the problem goes with the file
            added = http.post("/user_dict_word", params={
                "surface": "鬼滅", "pronunciation": "キメツ", "accent_type": 1})  # fmt: skip
            assert added.status_code == 200, added.text
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
