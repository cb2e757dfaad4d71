"""The ジュッ sound change of 十 that OpenJTalk misses before loanword units.

A Japanese speaker says 十 as ジュッ before a counter starting with k, s, t or p
(三十センチ サンジュッセンチ, 十トン ジュットン, 十ピクセル ジュッピクセル).
OpenJTalk makes the change only before the words its dictionary files as
counters (助数詞: センチ, キロ, トン, パーセント); before katakana units filed
as plain nouns (センチメートル, ピクセル, ショット) it keeps ジュー, so 30cm was
read サンジューセンチメートル. Units starting with other sounds (メートル,
グラム, ヘルツ) take no change.

The normalizer cannot change OpenJTalk's dictionary, and the g2p must stay
SBV2's, so the fix is in the text: where OpenJTalk would read such a 十 as
ジュー, the 十 is written ジュッ in katakana. OpenJTalk reads 三ジュッセンチメートル
with the same words and accents as 三十センチメートル, only the reading changes.
Where OpenJTalk already says ジュッ the text is left alone.

Only 十 is changed: for 一, 六, 八 and 百 the short form is optional before
loanwords (イチキロ and イッキロ, ヒャクパーセント and ヒャッパーセント), and
OpenJTalk already applies it before the counters that take it.
"""

from __future__ import annotations

import re

from yomiage.text.openjtalk import OpenJTalk

# 十 followed by a katakana word whose first mora is voiceless (k, s, t, p;
# ヵ and ヶ are the small カ and ケ of か所 and か月).
_VOICELESS_KATAKANA = "カキクケコサシスセソタチツテトパピプペポヵヶ"
# The group is what OpenJTalk is shown after the 十: the rest of the word
# group, so that it segments as it will in the sentence (十カ月 is a counter,
# 十カ alone is not).
_TEN_BEFORE_VOICELESS_RE = re.compile(
    f"十(?=([{_VOICELESS_KATAKANA}]" + r"[^\s、。,.!?…「」『』()（）]{0,15}))"
)
_CACHE_LIMIT = 4096


class TenSoundChange:
    """Writes 十 as ジュッ before loanword units; safe to share between threads."""

    def __init__(self, openjtalk: OpenJTalk) -> None:
        self._openjtalk = openjtalk
        self._cache: dict[str, bool] = {}

    def apply(self, text: str) -> str:
        """``text`` with every 十 that OpenJTalk would wrongly read ジュー written ジュッ."""
        if "十" not in text:
            return text
        return _TEN_BEFORE_VOICELESS_RE.sub(
            lambda m: "ジュッ" if self._missed(m.group(1)) else m.group(0), text
        )

    def _missed(self, following: str) -> bool:
        """Whether OpenJTalk reads 十 before ``following`` as a numeral read ジュー
        followed by a katakana word (where a speaker says ジュッ)."""
        missed = self._cache.get(following)
        if missed is None:
            nodes = self._openjtalk.run_frontend("十" + following)
            missed = (
                len(nodes) > 1
                and nodes[0]["string"] == "十"
                and nodes[0]["pos_group1"] == "数"
                and str(nodes[0]["pron"]).replace("’", "") == "ジュー"
                and str(nodes[1]["pron"])[:1] in _VOICELESS_KATAKANA
            )
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[following] = missed
        return missed
