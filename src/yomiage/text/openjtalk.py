"""The OpenJTalk binding, pointed at the dictionary bundled with yomiage.

We construct ``pyopenjtalk.openjtalk.OpenJTalk`` ourselves and never call the
module-level helpers of ``pyopenjtalk``: those download a dictionary on first
use, which must never happen (offline hosts, read-only installs).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from yomiage.errors import OptionError, TextError
from yomiage.mapped_files import MappedRanges
from yomiage.text.system_dictionary import dictionary_dir

DICTIONARY_NAME = "open_jtalk_dic_utf_8-1.11"  # the one SBV2 voices were trained with
# The compiled dictionary each reading uses. "natural" (the default): pyopenjtalk-plus's
# corrected NAIST-jdic (its wheel's pyopenjtalk/dictionary), which reads context words
# as people do far more often (87.2% -> 89.4% of JSUT sentences read right,
# benchmarks/history/issues-22-23.md); "sbv2": SBV2's own, for exactly the reading its voices saw.
READING_DICTIONARIES = {"natural": "open_jtalk_dic_plus-0.4.1.post10", "sbv2": DICTIONARY_NAME}
READINGS = tuple(READING_DICTIONARIES)
DEFAULT_READING = "natural"

# OpenJTalk's C frontend and MeCab keep state that is not safe to touch from two
# threads at once, even through different instances; one process-wide lock
# serialises every call. A call costs well under a millisecond.
_OPENJTALK_LOCK = threading.Lock()

NJDFeature = dict[str, Any]

# What OpenJTalk's label maker cannot start an utterance with: a pause (the reading
# "、", which symbols and characters it cannot read get), the question flag ("？") and
# the long-vowel mark ("ー", nor after a pause). It skips them and prints a raw
# warning on the C stderr ("First mora should not be short pause", "... question flag",
# "... long vowel symbol"; "No phoneme" when nothing is left), which reached the user's
# terminal (`yomiage g2p "龘は読めるか。"`): :func:`_label_words` leaves them out of
# what it is given, and the labels are the same (checked on 3,000 random mixtures).
_PAUSES = ("、", "？")
_LONG_VOWEL = "ー"


class AnalysisPasses(Protocol):
    """Work around OpenJTalk's analysis: on the text it reads, and on its NJD
    features before the labels are made (the natural reading,
    :class:`yomiage.text.natural.NaturalReading`)."""

    def before(self, text: str) -> str: ...

    def after(self, features: list[NJDFeature]) -> list[NJDFeature]: ...


# OpenJTalk converts its input to full-width UTF-8 into a fixed buffer and
# crashes the process (SIGSEGV) past about 8 KB (measured: 2,500 kana work,
# 3,000 crash). Inputs are checked against a safe margin below that.
MAX_INPUT_BYTES = 6000

# OpenJTalk also joins neighbouring words it reads letter by letter (kana it
# has no entry for, and Latin letters) into one word, then copies that word's
# reading into 1,024-byte stack buffers: 344 katakana in a row, or a user entry
# with a 341-kana reading, crash the process. A joined word's reading is
# bounded here by cutting the text into pieces that OpenJTalk reads one at a
# time, so no run it could join ever reaches this many bytes of reading.
MAX_JOINED_READING_BYTES = 900
# Worst-case reading bytes one character adds to a joined word: a kana reads
# as one katakana (3 bytes); a letter as up to five ("ｗ" is ダブリュー).
_KANA_COST = 3
_OTHER_COST = 15
# Characters after which OpenJTalk never joins (each verified to end a run of
# 60 katakana without crashing at 720): ideographs, digits, punctuation and
# spaces. Newlines and tabs are *not* among them: OpenJTalk drops them and
# joins the kana on both sides.
_JOIN_BREAKERS = frozenset(" \u3000、。，．,.!?！？「」『』（）()・〜～々〆")


def _join_cost(ch: str) -> int:
    """Bytes ``ch`` may add to the reading of a word OpenJTalk joins; 0 if it ends the word."""
    code = ord(ch)
    if ch in _JOIN_BREAKERS or ch.isdigit():
        return 0
    if 0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF:
        return 0
    if 0x3041 <= code <= 0x30FF or 0xFF65 <= code <= 0xFF9F:
        return _KANA_COST
    return _OTHER_COST


def safe_pieces(text: str) -> list[str]:
    """``text`` cut so that no word OpenJTalk could join overflows its buffers.

    Ordinary text comes back whole (a cut needs ~300 kana, or ~60 letters,
    with no ideograph, digit, punctuation or space between them); the pieces
    always join back to ``text``.
    """
    pieces: list[str] = []
    start = 0
    run = 0
    for i, ch in enumerate(text):
        cost = _join_cost(ch)
        if cost == 0:
            run = 0
            continue
        if run + cost > MAX_JOINED_READING_BYTES:
            pieces.append(text[start:i])
            start, run = i, 0
        run += cost
    pieces.append(text[start:])
    return pieces


def _check_length(text: str) -> None:
    size = sum(3 if ord(ch) < 0x80 else len(ch.encode("utf-8")) for ch in text)
    if size > MAX_INPUT_BYTES:
        raise TextError(
            f"a sentence of {len(text)} characters is too long for OpenJTalk "
            f"(at most about {MAX_INPUT_BYTES // 3} characters); "
            "split the text into sentences first"
        )


def check_reading(reading: str) -> str:
    """``reading`` if it names one (OptionError naming the choices otherwise)."""
    if reading not in READING_DICTIONARIES:
        raise OptionError(
            "reading", f"unknown reading {reading!r}; choose from {', '.join(READINGS)}"
        )
    return reading


def bundled_dictionary_dir(reading: str = DEFAULT_READING) -> Path:
    """Directory of the compiled OpenJTalk dictionary bundled with yomiage for
    ``reading`` (see :data:`READING_DICTIONARIES`): the package carries it packed, and
    its first use unpacks it into the yomiage cache (:mod:`yomiage.text.system_dictionary`)."""
    return dictionary_dir(READING_DICTIONARIES[check_reading(reading)])


class OpenJTalk:
    """One OpenJTalk analyser over the bundled (or a given) dictionary.

    Safe to share between threads. ``user_dictionary`` is a compiled MeCab
    user dictionary (see :mod:`yomiage.text.user_dict`); ``passes``, when
    given, rework the text and the features of every analysis.
    """

    def __init__(
        self,
        dictionary_dir: Path | None = None,
        user_dictionary: Path | None = None,
        passes: AnalysisPasses | None = None,
    ) -> None:
        from pyopenjtalk.openjtalk import OpenJTalk as _Binding

        self.dictionary_dir = dictionary_dir or bundled_dictionary_dir()
        self.user_dictionary = user_dictionary
        self._passes = passes
        userdic = str(user_dictionary).encode() if user_dictionary else b""
        with _OPENJTALK_LOCK:
            self._binding = _Binding(dn_mecab=str(self.dictionary_dir).encode(), userdic=userdic)
        # MeCab reads a few entries of its dictionaries per sentence: a page at a time,
        # not in whole large folios (yomiage.mapped_files says why).
        dictionaries = [self.dictionary_dir, *([user_dictionary] if user_dictionary else [])]
        MappedRanges.of(dictionaries).read_sparsely()

    def run_frontend(self, text: str) -> list[NJDFeature]:
        """Word segmentation, readings and accents (NJD features) of ``text``."""
        _check_length(text)
        with _OPENJTALK_LOCK:
            return self._features(text)

    def analyze(self, text: str) -> tuple[list[NJDFeature], list[str]]:
        """NJD features and full-context labels of ``text``, computed under one lock."""
        _check_length(text)
        with _OPENJTALK_LOCK:
            features = self._features(text)
            spoken = _label_words(features)
            labels = list(self._binding.make_label(spoken)) if spoken else []
        return features, labels

    def _features(self, text: str) -> list[NJDFeature]:
        """The features of each safe piece, in order (call with the lock held)."""
        features: list[NJDFeature] = []
        if self._passes is not None:
            text = self._passes.before(text)
        try:
            for piece in safe_pieces(text):
                features.extend(self._binding.run_frontend(piece))
        except UnicodeDecodeError as exc:  # a reading cut inside a character
            raise TextError(f"OpenJTalk could not read {text[:40]!r}") from exc
        return self._passes.after(features) if self._passes is not None else features


def _label_words(features: list[NJDFeature]) -> list[NJDFeature]:
    """``features`` without what the label maker would skip with a warning (see
    :data:`_PAUSES`): pauses before the first word, long-vowel marks that open the
    utterance or follow a pause. The features themselves are not changed."""
    words: list[NJDFeature] = []
    after_pause = True  # the utterance's start is one
    for feature in features:
        pron = str(feature["pron"])
        if not words and all(ch in _PAUSES or ch == _LONG_VOWEL for ch in pron):
            continue
        if after_pause and pron.startswith(_LONG_VOWEL):
            pron = pron.lstrip(_LONG_VOWEL)
            if not pron:
                continue
            feature = {**feature, "pron": pron}
        after_pause = pron in _PAUSES
        words.append(feature)
    return words


def compile_user_dictionary(csv_path: Path, out_path: Path, dictionary_dir: Path) -> bool:
    """Compile a MeCab user-dictionary CSV; returns False when MeCab rejects it."""
    from pyopenjtalk.openjtalk import mecab_dict_index

    with _OPENJTALK_LOCK, _stdout_silenced():
        status = mecab_dict_index(
            str(dictionary_dir).encode(), str(csv_path).encode(), str(out_path).encode()
        )
    return bool(status == 0)


@contextlib.contextmanager
def _stdout_silenced() -> Iterator[None]:
    """MeCab's compiler prints progress on the C stdout, which would corrupt
    output such as ``yomiage g2p --json``; point file descriptor 1 at devnull."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
