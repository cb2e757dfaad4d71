"""Hyphenated English words read as one loanword.

Regression: e-mail was read イー, a ``-`` pause token, メール; re-entry spelled
its prefix (アールイーエントリー).
"""

from __future__ import annotations

import pytest

from yomiage.text import Frontend


@pytest.mark.parametrize(
    "text", ["e-mailで送る。", "T-shirt", "check-in", "Wi-Fi", "e\u2010sports"]
)
def test_hyphenated_word_has_no_pause(frontend: Frontend, text: str) -> None:
    assert "-" not in frontend.g2p(text).phones


def test_hyphen_between_japanese_words_is_kept(frontend: Frontend) -> None:
    assert "-" in frontend.normalize("東京-大阪")


def test_all_caps_pair_stays_initials_and_title_case_pair_is_a_word(frontend: Frontend) -> None:
    assert frontend.normalize("US") == "ユーエス"
    assert frontend.normalize("Us") == "アス"
