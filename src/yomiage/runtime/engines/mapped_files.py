"""Giving back the resident pages of read-only files an engine keeps mapped but no
longer reads.

OpenVINO maps the graph it compiled from (its cache blob, or the ONNX weights) and
keeps the mapping for as long as the compiled model lives. It reads the float32
weights there when it prepares its kernels, on its first call and partly on the
first call at each new length, and never after that, yet those pages still count
as the process's resident memory. So after a call that met a new length, the
mapping's pages are dropped (``madvise(MADV_DONTNEED)``): for a read-only mapping
of a file that is exact, since any page read again is read back from the file.
That takes the whole blob off the resident memory and the high-water mark, at no
measurable cost per call (measured: benchmarks/history/issue-32.md, ninth pass,
"OpenVINO gives back the weights it compiled from"). Linux only; elsewhere
nothing is dropped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

_MADV_DONTNEED = 4
_READ_ONLY = ("r--p", "r--s")


def drop_resident_pages(files: Iterable[Path], maps: Path = Path("/proc/self/maps")) -> int:
    """Drop the resident pages of this process's read-only mappings of ``files`` (a
    folder stands for every file in it); the bytes of mapping covered (0 where the
    platform has no such call or nothing is mapped)."""
    if not sys.platform.startswith("linux"):
        return 0
    wanted = [str(f) for f in files]
    if not wanted:
        return 0
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return 0
    covered = 0
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or parts[1] not in _READ_ONLY:
            continue  # anything that could hold writes of its own is never touched
        name = parts[5].strip()
        if not any(name == w or name.startswith(w.rstrip("/") + "/") for w in wanted):
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if _madvise(start, end - start):
            covered += end - start
    return covered


def _madvise(start: int, length: int) -> bool:
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), _MADV_DONTNEED) == 0)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library (loaded once per process: a handle, not state)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError) as exc:
        log.info("cannot give back mapped pages (%s)", exc)
        return None
    return libc
