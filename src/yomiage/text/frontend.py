"""The text frontend: from a Python string to what a JP-Extra model reads.

A :class:`Frontend` owns its OpenJTalk analyser, its English reader and its
user dictionary; nothing is shared through module globals, so two frontends
with different user dictionaries read differently.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yomiage.errors import TextError, UserDictionaryError
from yomiage.text.english import EnglishReader
from yomiage.text.g2p import Phonemes, g2p
from yomiage.text.normalize import normalize
from yomiage.text.openjtalk import OpenJTalk, bundled_dictionary_dir, compile_user_dictionary
from yomiage.text.sentences import DEFAULT_MAX_LENGTH, split_sentences
from yomiage.text.user_dict import UserDictionary, UserWord

log = logging.getLogger(__name__)

USER_DICT_ENV = "YOMIAGE_USER_DICT"


def default_user_dictionary_path() -> Path:
    """``$YOMIAGE_USER_DICT``, else ``user_dict.json`` in the platform's user data directory."""
    override = os.environ.get(USER_DICT_ENV)
    if override:
        return Path(override)
    from platformdirs import user_data_dir

    return Path(user_data_dir("yomiage", appauthor=False)) / "user_dict.json"


@dataclass(frozen=True)
class _Analysers:
    openjtalk: OpenJTalk
    english: EnglishReader
    keep_words: frozenset[str]


class Frontend:
    """Normalization, sentence splitting and g2p. Safe to share between threads.

    ``user_dictionary``: a :class:`UserDictionary`, a path to its JSON file, or
    ``None`` for the default persisted one (:func:`default_user_dictionary_path`).
    """

    def __init__(
        self,
        user_dictionary: UserDictionary | Path | str | None = None,
        *,
        dictionary_dir: Path | None = None,
        max_sentence_length: int = DEFAULT_MAX_LENGTH,
    ) -> None:
        if not isinstance(user_dictionary, UserDictionary):
            user_dictionary = UserDictionary(user_dictionary or default_user_dictionary_path())
        self.user_dictionary = user_dictionary
        self.max_sentence_length = max_sentence_length
        self._dictionary_dir = dictionary_dir or bundled_dictionary_dir()
        self._rebuild_lock = threading.Lock()
        self._workdir: Path | None = None
        self._compiled = itertools.count()
        self._finalizer: Callable[[], Any] | None = None
        self._analysers = self._build()

    def _build(self) -> _Analysers:
        """Compile the user dictionary (if any) and make fresh analysers over it."""
        csv = self.user_dictionary.mecab_csv()
        compiled: Path | None = None
        if csv:
            if self._workdir is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="yomiage-userdic-"))
                self._finalizer = weakref.finalize(
                    self, shutil.rmtree, self._workdir, ignore_errors=True
                )
            n = next(self._compiled)
            csv_path = self._workdir / f"user-{n}.csv"
            csv_path.write_text(csv, encoding="utf-8")
            compiled = self._workdir / f"user-{n}.dic"
            if not compile_user_dictionary(csv_path, compiled, self._dictionary_dir):
                raise UserDictionaryError("MeCab rejected the user dictionary")
        openjtalk = OpenJTalk(self._dictionary_dir, compiled)
        return _Analysers(openjtalk, EnglishReader(openjtalk), self.user_dictionary.surfaces)

    def _rebuild(self) -> None:
        with self._rebuild_lock:
            self._analysers = self._build()

    # -- user dictionary -------------------------------------------------
    def add_word(
        self,
        surface: str,
        reading: str,
        accent: int | None = None,
        priority: int = 5,
        word_type: str = "proper_noun",
    ) -> UserWord:
        """Add a word; it applies to the next call."""
        word = self.user_dictionary.add(surface, reading, accent, priority, word_type)
        self._rebuild()
        return word

    def remove_word(self, surface: str) -> UserWord:
        word = self.user_dictionary.remove(surface)
        self._rebuild()
        return word

    @property
    def words(self) -> tuple[UserWord, ...]:
        return self.user_dictionary.words

    # -- text ----------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """The normalized text the g2p reads (numbers and English already in words)."""
        if not isinstance(text, str):
            raise TextError(f"text must be a str, not {type(text).__name__}")
        analysers = self._analysers
        return normalize(text, analysers.english, analysers.keep_words)

    def split_sentences(self, text: str) -> list[str]:
        """Sentences of ``text`` (see :func:`yomiage.text.sentences.split_sentences`)."""
        if not isinstance(text, str):
            raise TextError(f"text must be a str, not {type(text).__name__}")
        return split_sentences(text, self.max_sentence_length)

    def g2p(self, text: str) -> Phonemes:
        """Phonemes, tones and word2ph of one sentence, exactly as SBV2 feeds its model.

        Raises :class:`TextError` when nothing in ``text`` can be read aloud.
        """
        normalized = self.normalize(text)
        if not normalized.strip("!?…,.'-"):
            raise TextError(f"nothing to read in {text[:40]!r}: no speakable characters")
        return g2p(normalized, self._analysers.openjtalk)

    def close(self) -> None:
        """Remove the compiled user dictionary; the frontend stays usable until rebuilt."""
        if self._finalizer is not None:
            self._finalizer()
