"""Our g2p must equal SBV2's on every reference sentence (spec §2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import FIXTURES, reference_cases, require_fixtures
from yomiage.text import Frontend, to_model_inputs
from yomiage.text.g2p import g2p


def _g2p_cases() -> list[dict]:
    path = FIXTURES / "g2p" / "g2p_cases.json"
    return json.loads(path.read_text("utf-8"))["cases"] if path.exists() else []


@pytest.mark.parametrize("case", reference_cases("g2p/g2p_cases.json"))
def test_g2p_matches_reference(frontend: Frontend, case: dict) -> None:
    result = g2p(case["normalized"], frontend._analysers.openjtalk)
    assert list(result.words) == case["sep_text"]
    assert list(result.readings) == case["sep_kata"]
    assert result.bert_text == case["bert_text"]
    assert list(result.phones) == case["phones"]
    assert list(result.tones) == case["tones"]
    assert list(result.word2ph) == case["word2ph"]


def test_all_reference_sentences_are_present() -> None:
    require_fixtures()
    assert len(_g2p_cases()) == 153


@pytest.mark.parametrize("case", reference_cases("sbv2_tiny/cases/cases.json"))
def test_model_inputs_match_tiny_fixture(frontend: Frontend, case: dict) -> None:
    """Whole frontend, raw text to ids with blanks, on the synthesis fixture texts."""
    p = frontend.g2p(case["text"])
    assert p.text == case["norm_text"]
    assert list(p.phones) == case["phones"]
    assert list(p.tones) == case["tones"]
    inputs = to_model_inputs(p.phones, p.tones, p.word2ph)
    np.testing.assert_array_equal(inputs.phone_ids, case["phone_ids"])
    np.testing.assert_array_equal(inputs.tone_ids, case["tone_ids"])
    np.testing.assert_array_equal(inputs.language_ids, case["lang_ids"])
    assert list(inputs.word2ph) == case["word2ph_blank"]
