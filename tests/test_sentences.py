from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from yomiage.text import split_sentences


def test_reference_split_of_the_api_text() -> None:
    path = FIXTURES / "sbv2_tiny" / "cases" / "api.json"
    text = "ねえ、聞いて！？昨日、先生に会ったの。\nそれで、お茶を飲んだ。"
    pieces = [p.strip() for p in split_sentences(text)]
    assert pieces == ["ねえ、聞いて！？", "昨日、先生に会ったの。", "それで、お茶を飲んだ。"]
    if path.exists():
        assert pieces == json.loads(path.read_text("utf-8"))["sentences"]


def test_reference_split_of_the_g2p_fixtures() -> None:
    path = FIXTURES / "g2p" / "g2p_cases.json"
    if not path.exists():
        return
    for case in json.loads(path.read_text("utf-8"))["cases"]:
        if "「" in case["text"] or "『" in case["text"]:
            continue  # we keep quotes whole; SBV2 may cut inside them
        ours = [p.strip() for p in split_sentences(case["text"])]
        assert [p for p in ours if p] == case["split_sentences"], case["id"]


def test_quotes_stay_with_their_sentence() -> None:
    assert split_sentences("「行くよ。待ってて！」と彼は言った。次。") == [
        "「行くよ。待ってて！」と彼は言った。",
        "次。",
    ]


def test_symbol_only_fragments_join_a_neighbour() -> None:
    assert split_sentences("えっ……そんな……。本当に") == ["えっ……そんな……。", "本当に"]
    assert split_sentences("★★ 今日は。") == ["★★ 今日は。"]


def test_long_sentence_is_cut_at_commas() -> None:
    text = "、".join(["これは長い文の一部です"] * 30) + "。"
    pieces = split_sentences(text, max_length=50)
    assert all(len(p) <= 50 for p in pieces)
    assert all(p.endswith(("、", "。")) for p in pieces)
    assert "".join(pieces) == text


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("あいう漢字ABC 1。、！？!?\n「」『』（）…★")), max_size=300
    ),
    st.integers(1, 60),
)
def test_nothing_is_dropped(text: str, max_length: int) -> None:
    pieces = split_sentences(text, max_length)
    assert "".join(pieces) == text
    assert all(pieces)
