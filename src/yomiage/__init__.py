"""yomiage: fast, CPU-first Japanese text-to-speech for Style-Bert-VITS2 JP-Extra voices.

Importing this package is cheap: it never imports torch, transformers or
fastapi, and loads nothing until asked.
"""

from yomiage.errors import (
    DictionaryNotFoundError,
    ModelLoadError,
    TextError,
    UserDictionaryError,
    YomiageError,
)

__version__ = "0.1.0"

__all__ = [
    "DictionaryNotFoundError",
    "ModelLoadError",
    "TextError",
    "UserDictionaryError",
    "YomiageError",
    "__version__",
]
