"""``reading``: the natural reading by default, SBV2's exact one a word away (issue 23)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from yomiage import TTS
from yomiage.errors import OptionError
from yomiage.text import Frontend, UserDictionary
from yomiage.text.openjtalk import READINGS, bundled_dictionary_dir

# Context words OpenJTalk's own dictionary misreads and the natural reading gets right.
TEXT = "何の人が他の米を食べた。"


def _readings(frontend: Frontend, text: str = TEXT) -> str:
    return "".join(frontend.g2p(text).readings)


def test_the_default_reads_context_words_as_people_do() -> None:
    natural, sbv2 = Frontend(None), Frontend(None, reading="sbv2")
    assert natural.reading == "natural" and sbv2.reading == "sbv2"
    assert _readings(natural).startswith("ナンノヒトガホカノ")
    assert _readings(sbv2).startswith("ナニノヒトガタノ")  # exactly SBV2's reading
    assert bundled_dictionary_dir("sbv2") != bundled_dictionary_dir("natural")


def test_an_unknown_reading_is_an_option_error() -> None:
    with pytest.raises(OptionError, match="choose from natural, sbv2"):
        Frontend(None, reading="plus")
    with pytest.raises(OptionError, match="unknown reading"):
        TTS(reading="")
    assert READINGS == ("natural", "sbv2")


def test_the_user_dictionary_overrides_both_readings(tmp_path: Path) -> None:
    for reading in READINGS:
        words = UserDictionary(tmp_path / f"{reading}.json")
        frontend = Frontend(words, reading=reading)
        frontend.add_word("米", "ヨネ", accent=1)
        assert "ヨネ" in _readings(frontend)


def test_the_engine_and_the_command_line_take_the_reading(test_voice: Path) -> None:
    with TTS(reading="sbv2").load("tiny", source=test_voice) as tts:
        assert tts.frontend.reading == "sbv2"
    for reading, expected in (("sbv2", "nanino"), ("natural", "naNno")):
        out = subprocess.run(
            [sys.executable, "-m", "yomiage", "g2p", "--json", "--reading", reading, "何の本"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert "".join(json.loads(out.stdout)["phones"]).strip("_").startswith(expected)
