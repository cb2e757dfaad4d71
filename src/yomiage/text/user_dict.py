"""The user dictionary: words whose reading and accent the user fixes.

Entries are kept as JSON (one file per dictionary, written atomically) and
compiled into a MeCab user dictionary that OpenJTalk consults before its own,
so a word gets both its reading and its accent. A dictionary belongs to one
frontend instance; two engines with different dictionaries read differently.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

from yomiage.errors import UserDictionaryError
from yomiage.text.mora import is_katakana

FORMAT_VERSION = 1
MAX_SURFACE_LENGTH = 64

# word_type -> MeCab part-of-speech fields of naist-jdic.
WORD_TYPES: dict[str, tuple[str, str, str, str]] = {
    "proper_noun": ("名詞", "固有名詞", "一般", "*"),
    "common_noun": ("名詞", "一般", "*", "*"),
    "verb": ("動詞", "自立", "*", "*"),
    "adjective": ("形容詞", "自立", "*", "*"),
    "suffix": ("名詞", "接尾", "一般", "*"),
}
_SMALL_KANA = frozenset("ァィゥェォャュョヮ")
_FORBIDDEN_IN_SURFACE = frozenset(',"\n\r\t\x00')


def mora_count(reading: str) -> int:
    """Morae of a katakana reading: small kana join the mora before them."""
    return sum(1 for ch in reading if ch not in _SMALL_KANA)


def _to_katakana(text: str) -> str:
    return "".join(chr(ord(ch) + 0x60) if "\u3041" <= ch <= "\u3096" else ch for ch in text)


def _to_full_width(text: str) -> str:
    """OpenJTalk looks words up in full-width form (ＧｉｔＨｕｂ), so entries must match."""
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text)


@dataclass(frozen=True)
class UserWord:
    """One entry. ``accent`` is the mora after which the pitch falls (0: flat)."""

    surface: str
    reading: str
    accent: int
    priority: int
    word_type: str

    @classmethod
    def create(
        cls,
        surface: str,
        reading: str,
        accent: int | None = None,
        priority: int = 5,
        word_type: str = "proper_noun",
    ) -> UserWord:
        """Validate and normalise an entry; raises :class:`UserDictionaryError`."""
        surface = unicodedata.normalize("NFKC", surface).strip() if isinstance(surface, str) else ""
        if not surface:
            raise UserDictionaryError("the surface (the word as written) is empty")
        if len(surface) > MAX_SURFACE_LENGTH:
            raise UserDictionaryError(f"the surface is longer than {MAX_SURFACE_LENGTH} characters")
        bad = sorted({repr(ch) for ch in surface if ch in _FORBIDDEN_IN_SURFACE or ch.isspace()})
        if bad or not surface.isprintable():
            raise UserDictionaryError(
                f"the surface {surface!r} contains characters a dictionary entry cannot hold "
                f"({', '.join(bad) or 'control characters'})"
            )
        if not isinstance(reading, str):
            raise UserDictionaryError("the reading must be a string of katakana")
        reading = _to_katakana(unicodedata.normalize("NFKC", reading).strip())
        if not is_katakana(reading) or reading[0] in _SMALL_KANA or reading[0] == "ー":
            raise UserDictionaryError(
                f"the reading {reading!r} must be katakana (or hiragana), e.g. タンタンメン"
            )
        morae = mora_count(reading)
        accent = 0 if accent is None else accent
        if isinstance(accent, bool) or not isinstance(accent, int) or not 0 <= accent <= morae:
            raise UserDictionaryError(
                f"accent must be an integer from 0 to {morae} (the mora count of {reading})"
            )
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 10:
            raise UserDictionaryError("priority must be an integer from 0 to 10")
        if word_type not in WORD_TYPES:
            raise UserDictionaryError(
                f"unknown word_type {word_type!r}; use one of {', '.join(WORD_TYPES)}"
            )
        return cls(surface, reading, accent, priority, word_type)

    def to_mecab_csv_row(self) -> str:
        # Lower cost wins; priority 10 makes the entry beat almost any analysis.
        cost = (10 - self.priority) * 1000 - 6000
        pos = ",".join(WORD_TYPES[self.word_type])
        surface = _to_full_width(self.surface)
        morae = mora_count(self.reading)
        return (
            f"{surface},,,{cost},{pos},*,*,{surface},{self.reading},{self.reading},"
            f"{self.accent}/{morae},*"
        )


class UserDictionary:
    """Words added by the user, persisted at ``path`` (``None``: kept in memory only).

    Thread-safe. Changes are saved at once; the owning frontend recompiles.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._words: dict[str, UserWord] = {}
        if self.path is not None and self.path.exists():
            self._words = {w.surface: w for w in self._load(self.path)}

    @staticmethod
    def _load(path: Path) -> list[UserWord]:
        try:
            data = json.loads(path.read_text("utf-8"))
            entries = data["words"]
            return [UserWord.create(**entry) for entry in entries]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserDictionaryError(f"cannot read the user dictionary {path}: {exc}") from exc

    @property
    def words(self) -> tuple[UserWord, ...]:
        with self._lock:
            return tuple(sorted(self._words.values(), key=lambda w: w.surface))

    @property
    def surfaces(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._words)

    def add(
        self,
        surface: str,
        reading: str,
        accent: int | None = None,
        priority: int = 5,
        word_type: str = "proper_noun",
    ) -> UserWord:
        """Add or replace the entry for ``surface``."""
        word = UserWord.create(surface, reading, accent, priority, word_type)
        with self._lock:
            self._words[word.surface] = word
            self._save()
        return word

    def remove(self, surface: str) -> UserWord:
        key = unicodedata.normalize("NFKC", surface).strip()
        with self._lock:
            if key not in self._words:
                known = ", ".join(sorted(self._words)) or "none"
                raise UserDictionaryError(
                    f"{surface!r} is not in the user dictionary (words: {known})"
                )
            word = self._words.pop(key)
            self._save()
        return word

    def _save(self) -> None:
        if self.path is None:
            return
        payload = {
            "version": FORMAT_VERSION,
            "words": [asdict(w) for w in sorted(self._words.values(), key=lambda w: w.surface)],
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".user_dict.", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(payload, f, ensure_ascii=False, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise UserDictionaryError(
                f"cannot save the user dictionary to {self.path}: {exc}"
            ) from exc

    def mecab_csv(self) -> str:
        return "".join(w.to_mecab_csv_row() + "\n" for w in self.words)
