"""Exceptions raised by yomiage.

Every error a user can cause derives from :class:`YomiageError`, so callers can
catch one type; the subclasses say which part of the input was wrong.
"""

from __future__ import annotations


class YomiageError(Exception):
    """Base class of every error raised on purpose by yomiage."""


class TextError(YomiageError, ValueError):
    """The input text cannot be turned into phonemes (empty, unreadable, too long)."""


class UserDictionaryError(YomiageError, ValueError):
    """A user-dictionary entry is invalid (bad surface, reading or accent) or unknown."""


class DictionaryNotFoundError(YomiageError):
    """The bundled OpenJTalk dictionary is missing from the installation."""


class ModelLoadError(YomiageError):
    """A voice or BERT folder is missing, corrupt or does not match the architecture."""


class MissingExtraError(YomiageError, ImportError):
    """A feature needs an optional dependency that is not installed; names the extra."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(f"{feature} needs the '{module}' package: pip install 'yomiage[{extra}]'")
        self.extra = extra


class AudioFormatError(YomiageError, ValueError):
    """An audio format that yomiage cannot write (unknown name or suffix)."""


class NotPreparedError(YomiageError, RuntimeError):
    """A voice was used before ``TTS.prepare()`` loaded it."""
