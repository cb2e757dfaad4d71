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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from yomiage.errors import TextError, UserDictionaryError
from yomiage.text.accent_phrases import PhraseSpec, accent_phrases_from_labels
from yomiage.text.counters import TenSoundChange
from yomiage.text.english import EnglishReader
from yomiage.text.g2p import Phonemes, g2p
from yomiage.text.iteration_marks import IterationMarks
from yomiage.text.natural import NaturalReading
from yomiage.text.normalize import normalize
from yomiage.text.openjtalk import (
    DEFAULT_READING,
    OpenJTalk,
    bundled_dictionary_dir,
    check_reading,
    compile_user_dictionary,
)
from yomiage.text.punctuation import describe_symbol, skipped_symbols
from yomiage.text.sentences import DEFAULT_MAX_LENGTH, split_sentences
from yomiage.text.unreadable import reread, unread_runs, unreadable_error
from yomiage.text.user_dict import SkippedEntry, UserDictionary
from yomiage.text.user_word import UserWord, takes_word

log = logging.getLogger(__name__)

USER_DICT_ENV = "YOMIAGE_USER_DICT"
_COMPILED = itertools.count()  # names of compiled files (unique per process)


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
    ten_sound_change: TenSoundChange
    iteration_marks: IterationMarks
    keep_words: frozenset[str]


class Frontend:
    """Normalization, sentence splitting and g2p. Safe to share between threads.

    ``user_dictionary``: a :class:`UserDictionary`, a path to its JSON file, or
    ``None`` for one in memory only (the per-user file the command line uses is
    :func:`default_user_dictionary_path`; pass it to share those words).
    ``reading``: ``"natural"`` (default) reads words as people do where OpenJTalk's
    own dictionary does not (pyopenjtalk-plus's corrected dictionary);
    ``"sbv2"`` is exactly the reading SBV2 voices were trained with. The user
    dictionary overrides both.
    A word is compiled and checked before it is saved, so a word that MeCab
    rejects never reaches the file; words of an older file that it rejects
    are skipped with a warning (:attr:`rejected_words`), never fatal.

    Changes another process makes to the dictionary's file (``yomiage dict add``
    while a server runs) apply from the next call: each call stats the file and
    rebuilds the analysers when it changed, logging "user dictionary reloaded".
    """

    def __init__(
        self,
        user_dictionary: UserDictionary | Path | str | None = None,
        *,
        dictionary_dir: Path | None = None,
        max_sentence_length: int = DEFAULT_MAX_LENGTH,
        reading: str = DEFAULT_READING,
    ) -> None:
        if not isinstance(user_dictionary, UserDictionary):
            user_dictionary = UserDictionary(user_dictionary)
        self.user_dictionary = user_dictionary
        self.max_sentence_length = max_sentence_length
        self.rejected_words: tuple[UserWord, ...] = ()
        self.reading = check_reading(reading)
        self._dictionary_dir = dictionary_dir or bundled_dictionary_dir(reading)
        self._rebuild_lock = threading.Lock()
        self._analysers = self._build(user_dictionary.words)

    def _current(self) -> _Analysers:
        """The analysers, rebuilt first if the dictionary's file changed on disk."""
        dictionary = self.user_dictionary
        if dictionary.changed_on_disk():
            with self._rebuild_lock:
                if dictionary.reload_if_changed():
                    words = dictionary.words
                    self._analysers = self._build(words)
                    log.info("user dictionary reloaded (%d words) from %s",
                             len(words), dictionary.path)  # fmt: skip
        return self._analysers

    def _build(self, words: Sequence[UserWord]) -> _Analysers:
        """Fresh analysers over ``words``; words MeCab rejects are left out (with a warning)."""
        openjtalk = self._openjtalk(words)
        return _Analysers(
            openjtalk,
            EnglishReader(openjtalk),
            TenSoundChange(openjtalk),
            IterationMarks(openjtalk),
            frozenset(w.surface for w in words),
        )

    def _openjtalk(self, words: Sequence[UserWord]) -> OpenJTalk:
        user_words = frozenset(w.surface for w in words)
        passes = None if self.reading == "sbv2" else NaturalReading(user_words)
        if not words:
            return OpenJTalk(self._dictionary_dir, passes=passes)
        # MeCab reads the compiled dictionary into memory when OpenJTalk opens
        # it, so the files go at once: nothing is left in the temporary folder,
        # however the process ends.
        workdir = Path(tempfile.mkdtemp(prefix="yomiage-userdic-"))
        try:
            compiled = self._compile(words, workdir)
            if compiled is None:
                rejected = self._rejected(words, workdir)
                for word in rejected:
                    log.warning("MeCab rejects user word %r; it is not used", word.surface)
                self.rejected_words = tuple(rejected)
                kept = [w for w in words if w not in rejected]
                compiled = self._compile(kept, workdir) if kept else None
            return OpenJTalk(self._dictionary_dir, compiled, passes)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _compile(self, words: Sequence[UserWord], workdir: Path) -> Path | None:
        n = next(_COMPILED)
        csv_path = workdir / f"user-{n}.csv"
        csv_path.write_text(self.user_dictionary.mecab_csv(words), encoding="utf-8")
        compiled = workdir / f"user-{n}.dic"
        ok = compile_user_dictionary(csv_path, compiled, self._dictionary_dir)
        return compiled if ok else None

    def _rejected(self, words: Sequence[UserWord], workdir: Path) -> list[UserWord]:
        """The words MeCab rejects, found by halving the set."""
        if self._compile(words, workdir) is not None:
            return []
        if len(words) == 1:
            return list(words)
        half = len(words) // 2
        return self._rejected(words[:half], workdir) + self._rejected(words[half:], workdir)

    # -- user dictionary -------------------------------------------------
    @takes_word
    def add_word(self, word: UserWord) -> UserWord:
        """Add a word; it applies to the next call. Nothing changes if it is rejected.
        A shorthand for ``update_words([UserWord.create(...)])``, taking its parameters:
        the words a server or engine has already checked go to :meth:`update_words`."""
        self.update_words([word])
        return word

    def update_words(
        self,
        add: Sequence[UserWord],
        remove: Sequence[str] = (),
        *,
        keep_existing: bool = False,
    ) -> tuple[UserWord, ...]:
        """Remove the words written ``remove`` and add ``add`` (made with
        :meth:`UserWord.create`) in one change, applied to the next call; nothing
        changes if MeCab rejects any of them. Returns the words added (``keep_existing``
        leaves words already there as they are)."""
        with self._rebuild_lock:
            self._check(add)
            added = self.user_dictionary.update(add, remove, keep_existing=keep_existing)
            self._analysers = self._build(self.user_dictionary.words)
        return added

    def _check(self, words: Sequence[UserWord]) -> None:
        """UserDictionaryError naming the words MeCab rejects (before anything is saved)."""
        if not words:
            return
        workdir = Path(tempfile.mkdtemp(prefix="yomiage-userdic-"))
        try:
            rejected = [] if self._compile(words, workdir) else self._rejected(words, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if rejected:
            names = ", ".join(repr(w.surface) for w in rejected[:5])
            raise UserDictionaryError(f"MeCab rejected the user word(s) {names}")

    def remove_word(self, surface: str) -> UserWord | SkippedEntry:
        """Remove a word (or an entry of the file that was skipped)."""
        with self._rebuild_lock:
            removed = self.user_dictionary.remove(surface)
            self._analysers = self._build(self.user_dictionary.words)
        return removed

    @property
    def words(self) -> tuple[UserWord, ...]:
        self._current()
        return self.user_dictionary.words

    # -- text ----------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """The normalized text the g2p reads (numbers and English already in words)."""
        return self._normalize(text, self._current())

    def _normalize(self, text: str, analysers: _Analysers) -> str:
        if not isinstance(text, str):
            raise TextError(f"text must be a str, not {type(text).__name__}")
        return normalize(
            text,
            analysers.english,
            analysers.keep_words,
            analysers.ten_sound_change,
            analysers.iteration_marks,
            keep_kanji=self.reading != "sbv2",
        )

    def split_sentences(self, text: str, max_length: int | None = None) -> list[str]:
        """Sentences of ``text`` of at most ``max_length`` characters (default: this
        frontend's; see :func:`yomiage.text.sentences.split_sentences`)."""
        if not isinstance(text, str):
            raise TextError(f"text must be a str, not {type(text).__name__}")
        return split_sentences(text, max_length or self.max_sentence_length)

    def g2p(self, text: str) -> Phonemes:
        """Phonemes, tones and word2ph of one sentence, exactly as SBV2 feeds its model.

        Raises :class:`TextError` when nothing in ``text`` can be read aloud.
        """
        analysers = self._current()
        normalized = self._normalize(text, analysers)
        if not normalized.strip("!?…,.'-"):
            skipped = "".join(f", skipped {describe_symbol(ch)}" for ch in skipped_symbols(text))
            raise TextError(f"nothing to read in {text[:40]!r}: no speakable characters{skipped}")
        phonemes = g2p(normalized, analysers.openjtalk)
        if self.reading == "sbv2":
            return phonemes  # SBV2 reads kanji it cannot read as silence
        return self._read_unread_kanji(phonemes, analysers.openjtalk, text)

    @staticmethod
    def _read_unread_kanji(phonemes: Phonemes, openjtalk: OpenJTalk, text: str) -> Phonemes:
        """Runs of kanji OpenJTalk read as silence, read again by their pieces
        (:mod:`yomiage.text.unreadable`); TextError names what nothing can read."""
        runs = unread_runs(phonemes)
        if not runs:
            return phonemes
        reread_text, unknown = phonemes.text, []
        for run in runs:
            kana, missing = reread(run, openjtalk)
            unknown += missing
            reread_text = reread_text.replace(run, kana, 1)
        if unknown:
            raise unreadable_error(unknown, text)
        return g2p(reread_text, openjtalk)

    def accent_phrases(self, phonemes: Phonemes) -> list[PhraseSpec]:
        """The accent phrases and moras of a sentence :meth:`g2p` read (the structure
        VOICEVOX editors show), from the same OpenJTalk analysis of its text."""
        _, labels = self._current().openjtalk.analyze(phonemes.text)
        return accent_phrases_from_labels(labels)

    def close(self) -> None:
        """Kept for symmetry with the engine: a frontend holds no files or threads."""
