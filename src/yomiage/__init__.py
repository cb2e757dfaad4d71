"""yomiage: fast, CPU-first Japanese text-to-speech for Style-Bert-VITS2 JP-Extra voices.

Importing this package is cheap: it never imports torch, transformers or
fastapi, and loads nothing until asked.
"""

from typing import TYPE_CHECKING, Any

from yomiage._version import __version__
from yomiage.errors import (
    AudioFormatError,
    Cancelled,
    DictionaryNotFoundError,
    LimitError,
    MissingExtraError,
    ModelLoadError,
    NotPreparedError,
    OptionError,
    TextError,
    UserDictionaryError,
    VoiceNotLoadedError,
    YomiageError,
)

if TYPE_CHECKING:
    from yomiage.audio.results import Audio, AudioChunk
    from yomiage.audio.timings import Span, Timings
    from yomiage.engine import TTS
    from yomiage.limits import Limits
    from yomiage.options import SynthesisOptions
    from yomiage.speaker import Speaker


# The public API, imported on first use so that `import yomiage` stays cheap.
_LAZY = {
    "TTS": "yomiage.engine",
    "Speaker": "yomiage.speaker",
    "Audio": "yomiage.audio.results",
    "Limits": "yomiage.limits",
    "AudioChunk": "yomiage.audio.results",
    "SynthesisOptions": "yomiage.options",
    "Span": "yomiage.audio.timings",
    "Timings": "yomiage.audio.timings",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'yomiage' has no attribute {name!r}")


__all__ = [
    "TTS",
    "Audio",
    "AudioChunk",
    "AudioFormatError",
    "Cancelled",
    "DictionaryNotFoundError",
    "LimitError",
    "Limits",
    "MissingExtraError",
    "ModelLoadError",
    "NotPreparedError",
    "OptionError",
    "Span",
    "Speaker",
    "SynthesisOptions",
    "TextError",
    "Timings",
    "UserDictionaryError",
    "VoiceNotLoadedError",
    "YomiageError",
    "__version__",
]
