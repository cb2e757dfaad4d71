"""BERT calls hold a bounded number of padded tokens, so one text's memory cannot
grow with how many long sentences it has (issue 32)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from yomiage.bert.batches import BATCH_TOKENS, token_batches


def test_every_index_once_and_each_call_within_the_budget() -> None:
    lengths = [300, 12, 64, 64, 150, 7, 280, 64, 64, 33, 90]
    batches = token_batches(lengths, budget=302, most=8)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 8
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 302


def test_eight_long_sentences_are_never_one_call() -> None:
    """The text that took the engine to 1.2 GB: eight sentences of ~250 tokens."""
    assert token_batches([250] * 8) == [[i] for i in range(8)]


def test_short_sentences_still_share_a_call_and_a_long_row_goes_alone() -> None:
    assert token_batches([20] * 10, budget=302, most=8) == [list(range(8)), [8, 9]]
    assert token_batches([400, 5], budget=302) == [[1], [0]]


def test_similar_lengths_are_grouped_whatever_their_order() -> None:
    assert token_batches([150, 20, 150, 20], budget=302) == [[1, 3], [0, 2]]


def test_a_budget_without_room_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        token_batches([3], budget=0)


def test_features_come_back_in_order_and_as_one_call_would_give_them(
    test_voice: Path,
) -> None:
    from yomiage.runtime.engines.sessions import Sessions
    from yomiage.runtime.onnx_bert import OnnxBert

    bert = OnnxBert(test_voice / "bert", Sessions(1, openvino=False), precision="q8")
    texts = ["あ" * (BATCH_TOKENS - 2), "こんにちは", "い" * 150, "今日はいい天気", "う" * 150]
    features = bert.features(texts)
    assert [f.shape[0] for f in features] == [len(t) + 2 for t in texts]
    alone = [bert.features([t])[0] for t in texts]
    # q8 BERT quantizes each call's activations with one scale, so sharing a call moves
    # a row a little; another text of the same length is much further away.
    for feature, own in zip(features, alone, strict=True):
        np.testing.assert_allclose(feature, own, atol=1e-2)
    assert np.abs(features[2] - alone[4]).max() > 10 * np.abs(features[2] - alone[2]).max()
