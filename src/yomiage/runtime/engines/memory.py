"""Give freed heap memory back to the operating system between requests.

With ONNX Runtime's arena off, every operator allocates with malloc, from
glibc's per-thread arenas; after a long sentence, freed blocks can stay
mapped and RSS steps up for good (seen once in six runs: 126 → 288 MB over
200 requests). ``malloc_trim`` returns them. glibc only; elsewhere a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> None:
    """Return free heap pages to the OS (microseconds when there is little to return)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
