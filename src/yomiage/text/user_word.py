"""One user-dictionary word: what makes an entry valid, and the MeCab row it compiles to.

The checks are the ones OpenJTalk needs to survive an entry, not taste: a reading
it can speak, within the buffers it copies readings into, and a surface MeCab's
CSV can hold.

A word's fields are declared once, by :meth:`UserWord.create` (their defaults and
checks); every ``add_word`` takes them through :func:`takes_word`, so a new field is
one change here.
"""

from __future__ import annotations

import functools
import inspect
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

from yomiage.errors import TextError, UserDictionaryError
from yomiage.text.mora import SMALL_KANA, is_katakana, mora_count, reading_to_phonemes

MAX_SURFACE_LENGTH = 64
# OpenJTalk copies a word's reading into 1 KB buffers: a 341-kana reading gives
# garbled text and longer ones crash the process, at every start that loads the
# dictionary. No real word comes near this limit.
MAX_READING_LENGTH = 100
DEFAULT_PRIORITY = 5
DEFAULT_WORD_TYPE = "proper_noun"

# word_type -> MeCab part-of-speech fields of naist-jdic.
WORD_TYPES: dict[str, tuple[str, str, str, str]] = {
    "proper_noun": ("名詞", "固有名詞", "一般", "*"),
    "common_noun": ("名詞", "一般", "*", "*"),
    "verb": ("動詞", "自立", "*", "*"),
    "adjective": ("形容詞", "自立", "*", "*"),
    "suffix": ("名詞", "接尾", "一般", "*"),
}
_FORBIDDEN_IN_SURFACE = frozenset(',"\n\r\t\x00')


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
        priority: int = DEFAULT_PRIORITY,
        word_type: str = DEFAULT_WORD_TYPE,
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
        if len(reading) > MAX_READING_LENGTH:
            raise UserDictionaryError(
                f"the reading has {len(reading)} characters; at most {MAX_READING_LENGTH}"
            )
        if not is_katakana(reading) or reading[0] in SMALL_KANA or reading[0] == "ー":
            raise UserDictionaryError(
                f"the reading {reading[:40]!r} must be katakana (or hiragana), e.g. タンタンメン"
            )
        try:
            reading_to_phonemes(reading, [])
        except TextError as exc:
            raise UserDictionaryError(f"the reading {reading!r} cannot be spoken: {exc}") from None
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


_Fields = ParamSpec("_Fields")
_Owner = TypeVar("_Owner")
_Result = TypeVar("_Result")


def _taking_fields_of(
    create: Callable[_Fields, UserWord],
) -> Callable[
    [Callable[[_Owner, UserWord], _Result]], Callable[Concatenate[_Owner, _Fields], _Result]
]:
    """A decorator giving a method that takes a checked word ``create``'s parameters
    instead, to type checkers and ``help()`` alike."""
    fields = list(inspect.signature(create).parameters.values())

    def decorate(
        method: Callable[[_Owner, UserWord], _Result],
    ) -> Callable[Concatenate[_Owner, _Fields], _Result]:
        @functools.wraps(method)
        def with_fields(owner: _Owner, /, *args: _Fields.args, **kwargs: _Fields.kwargs) -> _Result:
            return method(owner, create(*args, **kwargs))

        signature = inspect.signature(method)
        owner = next(iter(signature.parameters.values()))
        shown = signature.replace(parameters=[owner, *fields])
        with_fields.__signature__ = shown  # type: ignore[attr-defined]
        return with_fields

    return decorate


# ``@takes_word`` on ``def add_word(self, word: UserWord)`` makes it
# ``add_word(self, surface, reading, accent=None, ...)``: the word is checked by
# UserWord.create before the method runs.
takes_word = _taking_fields_of(UserWord.create)
