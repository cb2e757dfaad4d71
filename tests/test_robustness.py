"""Bad input never crashes: a result, or a TextError that says what was wrong."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yomiage.errors import TextError
from yomiage.text import Frontend


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


def test_dropped_characters_are_logged_at_debug(
    frontend: Frontend, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("DEBUG", logger="yomiage"):
        frontend.g2p("今日は😊晴れ★")
    assert any("😊★" in r.getMessage() for r in caplog.records)
