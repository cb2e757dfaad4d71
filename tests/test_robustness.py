"""Bad input never crashes: a result, or a TextError that says what was wrong."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yomiage.errors import TextError
from yomiage.text import Frontend
from yomiage.text.openjtalk import MAX_JOINED_READING_BYTES, safe_pieces


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t ",
        "★☆♪",
        "😊🎉",
        "\x00\x01\x1b\x7f",
        "\ud800",
        "。。。",
        "!!!",
        "-",
        "'",
        "Привет, мир",
    ],
)
def test_unreadable_input_is_a_text_error(frontend: Frontend, text: str) -> None:
    with pytest.raises(TextError):
        frontend.g2p(text)


@pytest.mark.parametrize(("text", "named"), [("\ud800", "U+D800"), ("★\udfff", "U+DFFF")])
def test_what_is_said_about_unwritable_input_can_be_written(
    frontend: Frontend, text: str, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A lone surrogate or a control quoted raw in a log line or an error made the
    line impossible to write as UTF-8 (a log handler's traceback; pytest-xdist lost
    a worker on it): they are named by code point."""
    with pytest.raises(TextError) as caught:
        frontend.g2p(text)
    str(caught.value).encode("utf-8")
    for record in caplog.records:
        record.getMessage().encode("utf-8")
    assert named in str(caught.value)
    # Named once, in the error: no warning says it again (issue 49, 6).
    assert not [r for r in caplog.records if named in r.getMessage()]


@pytest.mark.parametrize(
    "text",
    ["안녕하세요 世界", "𠮷野家の𩸽", "α線とβ線", "ｶﾀｶﾅ", "Ⅲ章と①番", "東京\x00タワー"],
)
def test_mixed_scripts_read_what_can_be_read(frontend: Frontend, text: str) -> None:
    p = frontend.g2p(text)
    assert len(p.phones) > 2
    assert sum(p.word2ph) == len(p.phones)


def test_non_string_is_a_text_error(frontend: Frontend) -> None:
    with pytest.raises(TextError):
        frontend.g2p(b"bytes")  # type: ignore[arg-type]


def test_hundred_thousand_characters(frontend: Frontend) -> None:
    text = "今日はいい天気ですね。散歩に行きましょう、" * 5000
    with pytest.raises(TextError, match="too long"):
        frontend.g2p(text)
    sentences = frontend.split_sentences(text)
    assert "".join(sentences) == text
    results = [frontend.g2p(s) for s in sentences[:50]]
    assert all(len(r.phones) > 2 for r in results)


def test_long_run_without_punctuation_is_split(frontend: Frontend) -> None:
    text = "あ" * 100_000
    pieces = frontend.split_sentences(text)
    assert "".join(pieces) == text
    assert len(frontend.g2p(pieces[0]).phones) == frontend.max_sentence_length + 2


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=80))
def test_random_unicode(frontend: Frontend, text: str) -> None:
    try:
        p = frontend.g2p(text)
    except TextError:
        return
    assert p.phones[0] == p.phones[-1] == "_"
    assert sum(p.word2ph) == len(p.phones) == len(p.tones)
    assert len(p.word2ph) == len(p.bert_text) + 2


def test_dropped_characters_are_logged_as_a_warning(
    frontend: Frontend, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing is dropped silently (issue 31): the warning names each skipped symbol."""
    with caplog.at_level("WARNING", logger="yomiage"):
        frontend.g2p("今日は😊晴れ★")
    assert any(
        "😊 (U+1F60A), ★ (U+2605)" in r.getMessage() and r.levelname == "WARNING"
        for r in caplog.records
    )


# -- issue 11: runs that OpenJTalk joins into one word -------------------------

# One character (or a short unit) of each script, repeated into runs long enough
# to overflow OpenJTalk's 1 KB word buffers (344 katakana used to crash it).
LONG_RUN_UNITS = {
    "katakana": "ア",
    "hiragana": "あ",
    "small katakana": "ッ",
    "small hiragana": "ゃ",
    "yoon": "キャ",
    "vu": "ゔ",
    "archaic kana": "ゑ",
    "half-width katakana": "ｱ",
    "half-width voiced": "ｶﾞ",
    "half-width small": "ｯ",
    "long vowel marks": "ー",
    "kana and long marks": "アー",
    "kana with newlines": "ア\n",
    "kana with tabs": "ア\t",
    "kana with zero-width spaces": "ア\u200b",
    "digits": "9",
    "full-width digits": "９",
    "latin lower": "a",
    "latin upper": "A",
    "full-width latin": "Ａ",
    "kana and letters": "アｗ",
    "symbols": "＠",
    "kanji": "亜",
    "mixed": "アa9ー",
}
LONG_RUN_LENGTHS = (345, 1999)

_CRASH_PROBE = """
import sys
from yomiage.errors import TextError
from yomiage.text import Frontend, UserDictionary
from yomiage.text.openjtalk import OpenJTalk

frontend = Frontend(UserDictionary(None))
openjtalk = OpenJTalk()
for line in sys.stdin.read().split("\\0"):
    if not line:
        continue
    print("CASE", ascii(line[:12]), len(line), flush=True)
    for run in (frontend.g2p, openjtalk.analyze):
        try:
            run(line)
        except TextError:
            pass
print("DONE", flush=True)
"""


def test_long_runs_of_every_script_never_crash_openjtalk() -> None:
    """A run that OpenJTalk joins into one word used to overflow its buffers (SIGSEGV)."""
    cases = [
        (unit * (n // len(unit) + 1))[:n]
        for unit in LONG_RUN_UNITS.values()
        for n in LONG_RUN_LENGTHS
    ]
    run = subprocess.run(
        [sys.executable, "-c", _CRASH_PROBE],
        input="\0".join(cases), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    last = [line for line in run.stdout.splitlines() if line.startswith("CASE")][-1:]
    assert run.returncode == 0, f"died with {run.returncode} at {last}: {run.stderr[-500:]}"
    assert run.stdout.rstrip().endswith("DONE")


def test_safe_pieces_cut_only_what_openjtalk_would_join() -> None:
    natural = "むかしむかしあるところにおじいさんとおばあさんがすんでいました" * 3 + "。"
    assert safe_pieces(natural) == [natural]
    text = "ア" * 1000 + "。" + "ｗ" * 100
    pieces = safe_pieces(text)
    assert "".join(pieces) == text
    assert [len(p) for p in pieces] == [300, 300, 300, 161, 40]  # the 。 ends a run
    assert all(len(p.encode()) <= 2 * MAX_JOINED_READING_BYTES for p in pieces)


def test_cut_runs_still_read_every_kana(frontend: Frontend) -> None:
    p = frontend.g2p("ア" * 700)
    assert p.phones.count("a") == 700
