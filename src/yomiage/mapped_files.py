"""Giving back the resident pages of read-only files a library keeps mapped but reads
only now and then.

OpenVINO maps the graph it compiled from (its cache blob, or the ONNX weights) and
keeps the mapping for as long as the compiled model lives. It reads the float32
weights there when it prepares its kernels, on its first call and partly on the
first call at each new length, and never after that, yet those pages still count
as the process's resident memory. So after a call that met a new length, the
mapping's pages are dropped (``madvise(MADV_DONTNEED)``): for a read-only mapping
of a file that is exact, since any page read again is read back from the file.
That takes the whole blob off the resident memory and the high-water mark, at no
measurable cost per call (measured: benchmarks/history/issue-32.md, ninth pass,
"OpenVINO gives back the weights it compiled from").

OpenJTalk maps its dictionary (``sys.dic``, 103 MB) and reads a few entries per
sentence; where the kernel keeps the file's page cache in large folios (Linux 6.x
on ext4, once something read the file through), each entry read maps a whole folio,
and a 7.6 s text left 45-56 MB of it resident, a 40 s one 68-73 MB, where read a
page at a time the same file held 0.9 and 3.3 MB (measured: benchmarks/RESULTS.md,
Intel Xeon with AMX, fifth pass). :meth:`MappedRanges.read_sparsely` has such
mappings read page by page. (Dropping the pages after each analysis instead cost
g2p a third more time per sentence, 0.63 -> 0.85 ms, refaulting them.)

Linux only; elsewhere nothing is dropped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_MADV_RANDOM = 1
_MADV_DONTNEED = 4
_READ_ONLY = ("r--p", "r--s")


def drop_resident_pages(files: Iterable[Path], maps: Path = Path("/proc/self/maps")) -> int:
    """Drop the resident pages of this process's read-only mappings of ``files`` (a
    folder stands for every file in it); the bytes of mapping covered (0 where the
    platform has no such call or nothing is mapped)."""
    return MappedRanges.of(files, maps).drop()


@dataclass(frozen=True)
class MappedRanges:
    """This process's read-only mappings of some files, as (start, length) ranges,
    found once (:meth:`of`) to be dropped as often as wanted (:meth:`drop`) by whoever
    holds what mapped them: once that is closed, the addresses may be memory of
    another kind, which dropping would clear, so the ranges live no longer than it."""

    ranges: tuple[tuple[int, int], ...] = ()
    files: tuple[Path, ...] = ()

    @classmethod
    def of(cls, files: Iterable[Path], maps: Path = Path("/proc/self/maps")) -> MappedRanges:
        """The mappings of ``files`` now (none where the platform cannot drop pages)."""
        if not sys.platform.startswith("linux"):
            return cls()
        wanted = [str(f) for f in files]
        if not wanted:
            return cls()
        try:
            lines = maps.read_text().splitlines()
        except OSError:
            return cls()
        ranges, names = [], []
        for line in lines:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or parts[1] not in _READ_ONLY:
                continue  # anything that could hold writes of its own is never touched
            name = parts[5].strip()
            if not any(name == w or name.startswith(w.rstrip("/") + "/") for w in wanted):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            ranges.append((start, end - start))
            names.append(Path(name))
        return cls(tuple(ranges), tuple(dict.fromkeys(names)))

    def drop(self) -> int:
        """Drop the ranges' resident pages; the bytes covered."""
        return sum(length for start, length in self.ranges if _madvise(start, length))

    def read_sparsely(self) -> None:
        """Tell the kernel these files are read a few pages at a time: no read-ahead
        on the mappings, and the files' cached pages that no process maps let go
        (``POSIX_FADV_DONTNEED``), so that they come back page by page rather than
        in the large folios a sequential read of the file left. The page cache is
        the machine's: other processes read back from the file what they need."""
        for start, length in self.ranges:
            _madvise(start, length, _MADV_RANDOM)
        self.drop()  # this process's own pages, which would keep their folios cached
        for path in self.files:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError as exc:
                log.debug("cannot let go of %s's cached pages (%s)", path, exc)
            finally:
                os.close(fd)


def _madvise(start: int, length: int, advice: int = _MADV_DONTNEED) -> bool:
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), advice) == 0)


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
