"""The user dictionary: words whose reading and accent the user fixes.

Entries are kept as JSON (one file per dictionary, written atomically) and
compiled into a MeCab user dictionary that OpenJTalk consults before its own,
so a word gets both its reading and its accent. A dictionary belongs to one
frontend instance; two engines with different dictionaries read differently.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from filelock import Timeout as FileLockTimeout

from yomiage.atomic import write_atomic
from yomiage.errors import (
    DictionaryFullError,
    DictionaryStorageError,
    UnknownWordError,
    UserDictionaryError,
)
from yomiage.text.user_word import UserWord, takes_word

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
LOCK_SECONDS = 10.0  # the longest wait for another process changing the same file
# Every change recompiles the whole MeCab user dictionary and rewrites the JSON
# file (MeCab has no incremental compile); at 10,000 words a single add costs
# about 0.1 s, at 100,000 it took seconds, so a change past the cap is refused.
MAX_WORDS = 10_000


@dataclass(frozen=True)
class SkippedEntry:
    """An entry of the dictionary file that is not used, kept in the file as it was."""

    entry: Any
    reason: str

    @property
    def surface(self) -> str:
        value = self.entry.get("surface") if isinstance(self.entry, Mapping) else None
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class _Contents:
    words: dict[str, UserWord]
    skipped: tuple[SkippedEntry, ...]


_Signature = tuple[int, int, int]


def _signature(path: Path) -> _Signature | None:
    """What changes when the file is replaced or rewritten (None: no file): a
    stat, cheap enough to check before every synthesis."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


_SHAPE = '{"words": [...]}'  # what a file must be, for the message that says it is not


class UserDictionary:
    """Words added by the user: kept in memory only (``path=None``, the default of the
    library), or in a JSON file that several engines and processes may share.

    Thread-safe. A change is applied to the file as it is on disk at that
    moment (under a file lock), so two processes adding words keep both; it is
    saved atomically before it is used, and a change that cannot be saved is
    not made. A file that cannot be read, or entries in it that are not valid,
    never stop the dictionary from opening: bad entries are skipped
    (:attr:`skipped`, and a warning) but kept in the file, and an unreadable
    file (:attr:`problem`) is left alone: changes are refused until it is
    fixed or moved.

    At most ``max_words`` words (:data:`MAX_WORDS`): a change that would hold
    more is refused with :class:`DictionaryFullError`. Changes other processes
    make to the file (``yomiage dict add`` while a server runs) are picked up
    by :meth:`reload_if_changed`, which :class:`~yomiage.text.Frontend` calls
    before each use.
    """

    def __init__(self, path: Path | str | None = None, *, max_words: int = MAX_WORDS) -> None:
        self.path = Path(path) if path is not None else None
        self.max_words = max_words
        self._lock = threading.RLock()
        self.problem: str | None = None
        self._contents = _Contents({}, ())
        self._signature: _Signature | None = None
        if self.path is not None:
            self._signature = _signature(self.path)
            if self._signature is not None:
                self._contents = self._read(self.path, warn=True)

    def changed_on_disk(self) -> bool:
        """Whether the file differs from the one last read or saved (one stat)."""
        return self.path is not None and _signature(self.path) != self._signature

    def reload_if_changed(self) -> bool:
        """Read the file again if another process changed it; True when that changed the
        words. A file that cannot be used (unreadable, or past ``max_words``) is refused
        with one warning and the words already in memory are kept; a file that is gone
        holds no words, and no problem either."""
        if self.path is None:
            return False
        with self._lock:
            signature = _signature(self.path)
            if signature == self._signature:
                return False
            contents = self._read(self.path, warn=True)
            self._signature = signature
            if self.problem is not None or contents.words == self._contents.words:
                return False
            self._contents = contents
            return True

    def _read(self, path: Path, *, warn: bool) -> _Contents:
        """The file's words, and ``problem`` None; or, when the file cannot be used,
        ``problem`` set and nothing (``warn``: each in one log line)."""
        try:
            data = json.loads(path.read_text("utf-8"))
            entries = data.get("words") if isinstance(data, dict) else None
            if not isinstance(entries, list):
                raise TypeError(f"it has no 'words' list (a user dictionary is {_SHAPE})")
        except FileNotFoundError:  # also a broken file since deleted: nothing to refuse
            self.problem = None
            return _Contents({}, ())
        # RecursionError: "[" nested 100,000 deep, which json cannot parse.
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            return self._refuse(f"cannot read the user dictionary {path}: {exc}", warn=warn)
        words: dict[str, UserWord] = {}
        skipped = []
        for entry in entries:
            try:
                if not isinstance(entry, dict):
                    raise UserDictionaryError("an entry must be a JSON object")
                word = UserWord.create(**entry)
            except (UserDictionaryError, TypeError) as exc:
                skipped.append(SkippedEntry(entry, str(exc)))
                continue
            words[word.surface] = word
            if len(words) > self.max_words:  # every change would recompile them all
                return self._refuse(
                    f"the user dictionary {path} holds more than {self.max_words} words "
                    f"(at most {self.max_words}: each change recompiles all of them); "
                    "remove some from the file", warn=warn,
                )  # fmt: skip
        self.problem = None
        if skipped and warn:  # one line, however many: a file of 200,000 wrote 37 MB of log
            examples = "; ".join(f"{_describe(s.entry)}: {s.reason}" for s in skipped[:3])
            log.warning("skipping %d entries of the user dictionary %s that are not valid "
                        "words (kept in the file): %s%s", len(skipped), path, examples,
                        "; ..." if len(skipped) > 3 else "")  # fmt: skip
        return _Contents(words, tuple(skipped))

    def _refuse(self, problem: str, *, warn: bool) -> _Contents:
        """The file cannot be used: say so once, and change no word."""
        self.problem = problem
        if warn:
            log.warning("%s; its words are not used, and the file is left as it is", problem)
        return _Contents({}, ())

    @property
    def words(self) -> tuple[UserWord, ...]:
        with self._lock:
            return tuple(sorted(self._contents.words.values(), key=lambda w: w.surface))

    @property
    def skipped(self) -> tuple[SkippedEntry, ...]:
        """Entries of the file that are not valid words (kept in the file)."""
        return self._contents.skipped

    @property
    def surfaces(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._contents.words)

    @takes_word
    def add(self, word: UserWord) -> UserWord:
        """Add or replace the entry for ``surface``: a shorthand for
        ``update([UserWord.create(...)])``, the path every checked word takes, taking
        its parameters."""
        self.update([word])
        return word

    def update(
        self,
        add: Sequence[UserWord],
        remove: Sequence[str] = (),
        *,
        keep_existing: bool = False,
    ) -> tuple[UserWord, ...]:
        """Remove the words written ``remove`` and add ``add`` as one change (saved
        once, or not at all): an import or a rewrite never leaves half its words.
        ``keep_existing``: a word already in the dictionary is not replaced. Returns
        the words added."""
        keys = {unicodedata.normalize("NFKC", s).strip() for s in remove}
        added: list[UserWord] = []

        def change(contents: _Contents) -> _Contents:
            words = {s: w for s, w in contents.words.items() if s not in keys}
            added.clear()
            for word in add:
                if keep_existing and word.surface in words:
                    continue
                words[word.surface] = word
                added.append(word)
            if len(words) > self.max_words and len(words) > len(contents.words):
                where = f" {self.path}" if self.path is not None else ""
                raise DictionaryFullError(
                    f"the user dictionary{where} would hold {len(words)} words; at most "
                    f"{self.max_words} (each change recompiles all of them): remove some first"
                )
            return _Contents(words, contents.skipped)

        self._change(change)
        return tuple(added)

    def remove(self, surface: str) -> UserWord | SkippedEntry:
        """Remove the word (or the skipped entry) written ``surface``."""
        key = unicodedata.normalize("NFKC", surface).strip() if isinstance(surface, str) else ""
        removed: list[UserWord | SkippedEntry] = []

        def change(contents: _Contents) -> _Contents:
            word = contents.words.get(key)
            skipped = [s for s in contents.skipped if s.surface in (key, surface)]
            if word is None and not skipped:
                known = ", ".join(sorted(contents.words)) or "none"
                raise UnknownWordError(
                    f"{surface!r} is not in the user dictionary (words: {known})"
                )
            removed.append(word if word is not None else skipped[0])
            words = {s: w for s, w in contents.words.items() if s != key}
            return _Contents(words, tuple(s for s in contents.skipped if s not in skipped))

        self._change(change)
        return removed[0]

    def _change(self, change: Callable[[_Contents], _Contents]) -> None:
        """Apply ``change`` to the latest contents, save, then use the result."""
        with self._lock:
            if self.path is None:
                self._contents = change(self._contents)
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                lock = FileLock(f"{self.path}.lock", timeout=LOCK_SECONDS)
                with lock:
                    signature = _signature(self.path)
                    if signature is not None and signature == self._signature and not self.problem:
                        latest = self._contents  # unchanged since read: no need to parse it again
                    else:
                        latest = self._read(self.path, warn=False)
                    if self.problem is not None:
                        raise DictionaryStorageError(
                            f"{self.problem}; fix or move the file before changing its words"
                        )
                    changed = change(latest)
                    _save(self.path, changed)
                    self._signature = _signature(self.path)
            except FileLockTimeout:
                raise DictionaryStorageError(
                    f"another process holds {self.path} for over {LOCK_SECONDS:g} s"
                ) from None
            except OSError as exc:
                raise DictionaryStorageError(
                    f"cannot save the user dictionary to {self.path}: {exc.strerror or exc}"
                ) from exc
            self._contents = changed

    def mecab_csv(self, words: Iterable[UserWord] | None = None) -> str:
        """MeCab's CSV of ``words`` (default: this dictionary's)."""
        chosen = self.words if words is None else words
        return "".join(w.to_mecab_csv_row() + "\n" for w in chosen)


def _save(path: Path, contents: _Contents) -> None:
    """One entry a line: readable and diffable, and written by json's C encoder
    (``indent`` would use the pure-Python one, most of a save's time)."""
    words = sorted(contents.words.values(), key=lambda w: w.surface)
    entries = [w.__dict__ for w in words] + [s.entry for s in contents.skipped]
    lines = ",\n  ".join(json.dumps(e, ensure_ascii=False) for e in entries)
    body = f"[\n  {lines}\n]" if entries else "[]"
    text = f'{{"version": {FORMAT_VERSION}, "words": {body}}}\n'
    write_atomic(path, text, mode=0o600, sync=True)


def _describe(entry: Any) -> str:
    if isinstance(entry, Mapping) and isinstance(entry.get("surface"), str):
        return repr(entry["surface"][:40])
    return repr(entry)[:60]
