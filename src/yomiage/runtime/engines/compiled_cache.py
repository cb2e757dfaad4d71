"""OpenVINO's compiled graphs in the cache, checked before OpenVINO reads them.

With a cache folder (``CACHE_DIR``), OpenVINO writes what it compiled from a graph
there as a blob and, at later loads, maps that blob instead of compiling again
(:class:`~yomiage.runtime.engines.sessions.Sessions`). It checks a blob's header, not its
content: 64 KiB flipped inside one loaded, and the voice spoke noise (-7.8 dB SNR
against the right audio) with no error, on every start. So once OpenVINO has
written a blob, its sha256 is recorded beside it
(:func:`~yomiage.runtime.integrity.record_made`), and before OpenVINO compiles
with the folder, a blob that is not as recorded is removed (OpenVINO then compiles
the graph again and writes the blob anew). One process at a time does this for
one folder (a lock file in it), so none removes a blob another has just written
and not yet recorded.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from yomiage.runtime.integrity import NOT_RECORDED, record_made, unlike_made

log = logging.getLogger(__name__)

LOCK_FILE = "compiling.lock"
# Longer than compiling the full-size decoder takes on a slow, busy machine; past it,
# a holder is taken for stuck and this process compiles without waiting.
LOCK_WAIT_S = 600.0


@contextlib.contextmanager
def checked_cache(folder: Path | None) -> Iterator[bool]:
    """Around one compile with ``folder`` as OpenVINO's cache: whether it may be used
    (False for no folder, or one holding a blob not as recorded that cannot be
    removed: compile without it). The blobs there once the block ends are recorded."""
    if folder is None:
        yield False
        return
    lock = _lock(folder)
    try:
        usable = _without_unlike_blobs(folder)
        yield usable
        if usable:
            try:
                record_made(folder, _blobs(folder))
            except (
                OSError
            ) as exc:  # a read-only cache: its blobs are compiled over at the next load
                log.debug("cannot record OpenVINO's blobs in %s: %s", folder, exc)
    finally:
        if lock is not None:
            lock.release()


def _without_unlike_blobs(folder: Path) -> bool:
    """Remove the blobs in ``folder`` not as recorded; False if one cannot be removed."""
    for name, why in unlike_made(folder, _blobs(folder)).items():
        level = logging.INFO if why == NOT_RECORDED else logging.WARNING
        log.log(level, "OpenVINO's compiled graph %s: %s; it is compiled again", folder / name, why)
        try:
            (folder / name).unlink()
        except OSError as exc:
            log.warning("cannot remove %s (%s); the graph is compiled without the cache",
                        folder / name, exc)  # fmt: skip
            return False
    return True


def _blobs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.blob") if p.is_file())


def _lock(folder: Path) -> FileLock | None:
    """The folder's lock, held; None where it cannot be taken (a read-only cache), or
    another process held it past :data:`LOCK_WAIT_S`."""
    lock = FileLock(str(folder / LOCK_FILE), preserve_lock_file=True, fallback_to_soft=False)
    try:
        lock.acquire(timeout=LOCK_WAIT_S)
    except Timeout:
        log.warning("another process has been compiling into %s for %.0f s; compiling here too",
                    folder, LOCK_WAIT_S)  # fmt: skip
        return None
    except OSError as exc:
        log.debug("cannot lock %s: %s", folder, exc)
        return None
    return lock
