"""The natural reading: what yomiage does around OpenJTalk's analysis to read
as a person does rather than as OpenJTalk does.

Each pass has one job and its own module; this is where they are put in order.
Before the analysis, the normalizer's ASCII punctuation goes back to Japanese
(MeCab takes ``,`` for a digit separator and reads the word after it as a
suffix: サイズ,色 is サイズ ショク; サイズ、色 is サイズ イロ). After it, words
read from their context (:mod:`yomiage.text.context_readings`), then accent
phrases and nuclei (:mod:`yomiage.text.phrasing`). The "sbv2" reading uses
none of it.
"""

from __future__ import annotations

from yomiage.text.context_readings import read_in_context
from yomiage.text.openjtalk import NJDFeature
from yomiage.text.phrasing import rephrase

# The normalizer writes SBV2's ASCII punctuation; OpenJTalk's dictionary knows the
# Japanese marks as punctuation, the ASCII ones partly as parts of numbers.
_AS_JAPANESE = str.maketrans({",": "、", ".": "。", "!": "！", "?": "？"})


class NaturalReading:
    """The passes of the natural reading (see the module docstring). Words of the
    user dictionary (``user_words``, their surfaces) keep the reading and accent
    their entry gives them: the user dictionary overrides both readings."""

    def __init__(self, user_words: frozenset[str] = frozenset()) -> None:
        self.user_words = user_words

    def before(self, text: str) -> str:
        return text.translate(_AS_JAPANESE)

    def after(self, features: list[NJDFeature]) -> list[NJDFeature]:
        return rephrase(read_in_context(features, self.user_words), self.user_words)
