"""Raw text to the normalized text the g2p reads (spec §2.2, with better readings).

The order and the final character filter are SBV2's, so plain Japanese
normalizes exactly as SBV2 does; numbers, symbols and English are read by our
own rules (:mod:`yomiage.text.numbers`, :mod:`yomiage.text.english`) where SBV2
drops or misreads them.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Container

from yomiage.text.counters import TenSoundChange
from yomiage.text.enclosed import fold_before_nfkc
from yomiage.text.english import EnglishReader
from yomiage.text.iteration_marks import IterationMarks
from yomiage.text.numbers import read_numbers
from yomiage.text.punctuation import describe_symbol, replace_punctuation, skipped_symbols
from yomiage.text.unreadable import read_dropped_kanji
from yomiage.text.weekdays import read_weekdays

log = logging.getLogger(__name__)

_WAVE_DASH_RE = re.compile("[~〜～]")
PUNCTUATION_ONLY = "!?…,.'-"  # what normalized text may hold that is not read aloud
_COMBINING_SOUND_MARKS_RE = re.compile("[\u3099\u309a]")


def normalize(
    text: str,
    english: EnglishReader,
    keep_words: Container[str] = (),
    ten_sound_change: TenSoundChange | None = None,
    iteration_marks: IterationMarks | None = None,
    *,
    keep_kanji: bool = False,
) -> str:
    """Normalized text: kana, kanji, Greek, letters kept for OpenJTalk and ``!?…,.'-``.

    ``keep_words`` are user-dictionary surfaces, left for OpenJTalk to read;
    ``ten_sound_change`` (the frontend's) gives 三十センチメートル its ジュッ;
    ``iteration_marks`` (the frontend's) writes out the 々 OpenJTalk would read as a pause.
    ``keep_kanji`` (the natural reading): kanji outside OpenJTalk's characters, which
    the last step drops (as SBV2 does), are first written in katakana
    (:func:`~yomiage.text.unreadable.read_dropped_kanji`). Symbols no rule reads
    (emoji, ★) are left out with a warning naming them: a chat message's emoji must
    not stop it from being read, and nothing vanishes without a word.
    """
    written = text
    text = fold_before_nfkc(text)
    text = unicodedata.normalize("NFKC", text)
    text = read_weekdays(text)
    text = read_numbers(text)
    text = english.replace(text, keep_words)
    if ten_sound_change is not None:
        text = ten_sound_change.apply(text)
    if iteration_marks is not None:
        text = iteration_marks.apply(text)
    text = _WAVE_DASH_RE.sub("ー", text)
    if keep_kanji:
        text = read_dropped_kanji(text)
    skipped = skipped_symbols(text)
    text = _COMBINING_SOUND_MARKS_RE.sub("", replace_punctuation(text))
    # With nothing else to read, the frontend's TextError names them: said once, there.
    if skipped and text.strip(PUNCTUATION_ONLY):
        named = ", ".join(describe_symbol(ch) for ch in skipped)
        log.warning("skipped %s in %r: no rule reads them", named, written[:40])
    return text
