"""Exceptions raised by yomiage.

Every error a user can cause derives from :class:`YomiageError`, so callers can
catch one type; the subclasses say which part of the input was wrong.
"""

from __future__ import annotations


class YomiageError(Exception):
    """Base class of every error raised on purpose by yomiage."""


class TextError(YomiageError, ValueError):
    """The input text cannot be turned into phonemes (empty, unreadable, too long)."""


class OptionError(YomiageError, ValueError):
    """A synthesis option is out of range or unknown; ``field`` names it (``speed``, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field

    def __reduce__(self) -> tuple[type[OptionError], tuple[str, str]]:
        return (type(self), (self.field, str(self)))


class LimitError(YomiageError, ValueError):
    """A request would cost more than the engine allows (seconds of audio per sentence or
    per request); ``limit`` names the limit, so a server can say which one."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[type[LimitError], tuple[str, str]]:
        return (type(self), (self.limit, str(self)))


class Cancelled(YomiageError):
    """The caller cancelled the synthesis (a server's client left); nothing more is computed."""


class UserDictionaryError(YomiageError, ValueError):
    """A user-dictionary entry is invalid (bad surface, reading or accent) or unknown."""


class UnknownWordError(UserDictionaryError, LookupError):
    """The word to remove is not in the user dictionary."""


class DictionaryStorageError(UserDictionaryError):
    """The user dictionary's file cannot be read or written; nothing was changed."""


class DictionaryFullError(UserDictionaryError):
    """The change would take the user dictionary past its word cap; nothing was changed."""


class DictionaryNotFoundError(YomiageError):
    """The bundled OpenJTalk dictionary is missing from the installation."""


class ModelLoadError(YomiageError):
    """A voice or BERT folder is missing, corrupt or does not match the architecture."""


# The torch the README installs before ``yomiage[torch]``: left to the extra's plain
# ``torch`` requirement, pip takes PyPI's Linux build, the multi-GB CUDA one.
TORCH_FIRST = (
    "pip install torch==2.13.0 first (add --index-url https://download.pytorch.org/whl/cpu "
    "for the CPU-only build)"
)


def install_hint(extra: str) -> str:
    """How to install an extra, from PyPI and (until yomiage is published there) a checkout;
    for ``torch``, the PyTorch build to install first."""
    hint = f"pip install 'yomiage[{extra}]' (from a checkout: pip install '.[{extra}]')"
    return f"{TORCH_FIRST}, then {hint}" if extra == "torch" else hint


class MissingExtraError(YomiageError, ImportError):
    """A feature needs an optional dependency that is not installed; names the extra."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(f"{feature} needs the '{module}' package: {install_hint(extra)}")
        self.extra = extra
        self._args = (feature, extra, module)

    def __reduce__(self) -> tuple[type[MissingExtraError], tuple[str, str, str]]:
        return (type(self), self._args)


class AudioFormatError(YomiageError, ValueError):
    """An audio format that yomiage cannot write (unknown name or suffix)."""


class NotPreparedError(YomiageError, RuntimeError):
    """A voice was used before ``TTS.prepare()`` loaded it."""


class VoiceNotLoadedError(YomiageError, LookupError):
    """No voice of that name is loaded (or declared) in the engine: nothing to unload or use."""


class SourceError(ModelLoadError):
    """A voice or BERT source (``hf://``, ``s3://``, ``file://``, a path) cannot be used.

    Derives from :class:`ModelLoadError` so code that catches load failures
    also catches source failures. ``source`` is the source as the user wrote it.
    """

    def __init__(self, message: str, *, source: str = "") -> None:
        super().__init__(message)
        self.source = source


class InvalidSourceError(SourceError, ValueError):
    """A source string or a file name in it is malformed or unsafe (``..``, NUL, absolute)."""


class UnknownVoiceError(SourceError, LookupError):
    """A voice name that is not in the catalog; the message lists the known names."""


class SourceNotFoundError(SourceError):
    """The repository, revision, bucket, prefix or file does not exist (HTTP 404, no objects)."""


class SourceAuthError(SourceError):
    """The source refused access (HTTP 401/403, S3 AccessDenied); says which token to set."""


class SourceNetworkError(SourceError):
    """The source could not be reached or the transfer broke off; a later run resumes it."""


class OfflineError(SourceError):
    """Offline mode, and the cache lacks what is needed; ``command`` would fetch it."""

    def __init__(self, message: str, *, source: str = "", command: str = "") -> None:
        super().__init__(message, source=source)
        self.command = command


class CacheError(SourceError):
    """The cache cannot be written (disk full, read-only, permissions) or a download is corrupt."""


class NoSpaceError(YomiageError):
    """A disk or quota is full where yomiage writes (the cache, a models folder): not the
    fault of what was being written; its message names the folder to free space in."""


class CacheFullError(CacheError, NoSpaceError):
    """The cache's disk or quota is full."""
