"""OpenJTalk's label maker prints raw C warnings for words it skips (issue 31, 18):
``yomiage g2p "龘は読めるか。"`` showed ``WARNING: JPCommonLabel_insert_pause() in
jpcommon_label.c: First mora should not be short pause.`` on the terminal. Those words
are no longer given to it, and the labels are the ones it made with them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from yomiage.text import Frontend, UserDictionary
from yomiage.text.openjtalk import READINGS, OpenJTalk, bundled_dictionary_dir

# A sentence opening with what reads as a pause (a kanji OpenJTalk cannot read, a
# bracket), a question mark or a long-vowel mark, and long-vowel marks after a pause.
SKIPPED_WORDS = ["龘は読めるか。", "「龘」は何。", "？龘は。", "ーッて何。", "はい、ーッ。",
                 "え？ーー。", "〜こんにちは。", "龘。"]  # fmt: skip


@pytest.mark.parametrize("reading", READINGS)
def test_openjtalk_prints_no_warnings_for_the_words_it_skips(
    reading: str, capfd: pytest.CaptureFixture[str]
) -> None:
    frontend = Frontend(UserDictionary(None), reading=reading)
    for text in SKIPPED_WORDS:
        frontend.g2p(text)
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("reading", READINGS)
def test_the_labels_are_those_openjtalk_makes_of_every_word(
    reading: str, capfd: pytest.CaptureFixture[str]
) -> None:
    openjtalk = OpenJTalk(bundled_dictionary_dir(reading))
    for text in [*SKIPPED_WORDS, "今日は、いい天気ですね？", "えー、あの、ーん。"]:
        features, labels = openjtalk.analyze(text)
        assert labels == list(openjtalk._binding.make_label(features)), text
    capfd.readouterr()  # the warnings of the direct calls


def test_g2p_on_the_command_line_prints_only_the_reading() -> None:
    command = [sys.executable, "-m", "yomiage", "g2p", "龘は読めるか。"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("トウは読めるか")
    assert proc.stderr == ""
