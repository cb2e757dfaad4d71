"""The pauses' whole-text reading made from the sentences already read (synthesis.pauses)."""

from __future__ import annotations

import numpy as np
import pytest

from yomiage.bert.features import join_token_rows
from yomiage.synthesis.pauses import joined_reading
from yomiage.synthesis.reading import read_sentences
from yomiage.text.frontend import Frontend


@pytest.mark.parametrize(
    "text",
    [
        "駅前のパン屋さんは、毎朝六時に店を開けます。焼きたてのパンを買いに、人が並びます。",
        "ねえ、聞いて！？昨日、先生に会ったの。それで、お茶を飲んだ。",
        "今日は3時に帰ります。Hello world. 本当?",
    ],
)
def test_joined_sentences_read_as_the_whole_text(frontend: Frontend, text: str) -> None:
    sentences = read_sentences(frontend, text, max_length=10**6)
    assert len(sentences) >= 2
    joined = joined_reading([s.phonemes for s in sentences])
    whole = frontend.g2p(text)
    assert joined.bert_text == whole.bert_text
    assert joined.phones == whole.phones
    assert joined.word2ph == whole.word2ph
    assert sum(joined.word2ph) == len(joined.phones) == len(joined.tones)


def test_a_line_break_is_the_one_difference(frontend: Frontend) -> None:
    """A whole-text g2p reads ``。\\n`` as two marks; the sentences carry one."""
    text = "昨日、先生に会ったの。\nそれで、お茶を飲んだ。"
    sentences = read_sentences(frontend, text, max_length=10**6)
    joined = joined_reading([s.phonemes for s in sentences])
    whole = frontend.g2p(text)
    assert whole.bert_text == joined.bert_text.replace("の.", "の..")
    assert len(whole.phones) == len(joined.phones) + 1


def test_token_rows_join_like_the_reading() -> None:
    """[CLS] of the first, each sentence's own rows, [SEP] of the last."""
    a = np.arange(4 * 2, dtype=np.float32).reshape(4, 2)  # CLS, 2 tokens, SEP
    b = 100 + np.arange(3 * 2, dtype=np.float32).reshape(3, 2)  # CLS, 1 token, SEP
    rows = np.concatenate(join_token_rows([a, b]))
    np.testing.assert_array_equal(rows, np.concatenate([a[:3], b[1:]]))
    with pytest.raises(ValueError, match="nothing"):
        join_token_rows([])
    with pytest.raises(ValueError, match="nothing"):
        joined_reading([])
