"""One process measures a plan at a time; the others wait for its result.

Two processes loading one voice with an empty cache each measured the whole plan
(1,288 s each on a busy 2-core machine, where one alone took 989 s), each process
taking both cores from the other. So the measuring process holds a lock file per
plan key (:meth:`~yomiage.runtime.plan.store.PlanStore.lock_path`) and writes the
step it is at beside it; another process that needs the same plan waits for the
lock, then reads the plan the first one kept (or resumes from the steps it kept,
if it died: the lock is the operating system's, released with its holder).

The wait is bounded by the holder's progress, not by a fixed time: each of its
steps ends within its own limit (:data:`~yomiage.runtime.plan.measure.CALL_TIMEOUT_S`),
so a holder whose note has not changed for :data:`STALL_S` is taken for stuck,
and the waiter measures by itself. Each change is reported as the waiter's own
progress (:mod:`yomiage.progress`), so a server starting behind another process's
measuring is not given up on while that one moves on.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from yomiage.atomic import write_atomic
from yomiage.progress import progress_to, report_progress
from yomiage.runtime.made_graphs import MAKE_TIMEOUT_S
from yomiage.runtime.plan.measure import CALL_TIMEOUT_S

log = logging.getLogger(__name__)

# The longest a measuring process's note may stay unchanged while it is still working:
# its slowest step (a measuring process, or a decoder made in another layout), and a margin.
STALL_S = max(CALL_TIMEOUT_S, MAKE_TIMEOUT_S) + 60.0
_POLL_S = 0.5


@contextlib.contextmanager
def measuring_turn(
    lock_path: Path,
    note_path: Path,
    watched: Iterable[Path] = (),
    *,
    voice: str = "this voice",
    stall_s: float = STALL_S,
) -> Iterator[bool]:
    """Measure within the block once no other process is measuring the same plan:
    True while this process holds the lock (each report of its progress is noted
    at ``note_path`` for those that wait), False where it measures without it (no
    lock could be made there: a read-only cache; or the holder made no progress,
    by its note or the ``watched`` files, for ``stall_s`` seconds)."""
    lock = _lock(lock_path)
    held = lock is not None and _acquire(lock, note_path, tuple(watched), voice, stall_s)
    if not held or lock is None:
        yield False
        return
    try:
        with progress_to(functools.partial(_note, note_path)):
            yield True
    finally:
        with contextlib.suppress(OSError):
            note_path.unlink(missing_ok=True)
        lock.release()


def _lock(path: Path) -> FileLock | None:
    """The lock file at ``path``, or None where it cannot be made (a read-only cache)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        log.debug("cannot make the lock %s (%s): measuring without it", path, exc)
        return None
    return FileLock(str(path), preserve_lock_file=True, fallback_to_soft=False)


def _acquire(
    lock: FileLock, note: Path, watched: tuple[Path, ...], voice: str, stall_s: float
) -> bool:
    """Take ``lock``, waiting while its holder makes progress; False once it has made
    none for ``stall_s`` seconds."""
    try:
        lock.acquire(timeout=0)
        return True
    except Timeout:
        pass
    except OSError as exc:
        log.debug("cannot take the lock %s (%s): measuring without it", lock.lock_file, exc)
        return False
    log.warning("another process is measuring the plan for %s (%s); waiting for its result",
                voice, _read_note(note) or "starting")  # fmt: skip
    seen = _stamps(note, *watched)
    changed = time.monotonic()
    while True:
        try:
            lock.acquire(timeout=_POLL_S)
            return True
        except Timeout:
            pass
        now = _stamps(note, *watched)
        if now != seen:
            seen, changed = now, time.monotonic()
            report_progress(f"another process measuring: {_read_note(note) or 'a step ended'}")
        elif time.monotonic() - changed > stall_s:
            log.warning("the process measuring the plan for %s made no progress for %.0f s; "
                        "measuring here too", voice, stall_s)  # fmt: skip
            return False


def _note(path: Path, message: str) -> None:
    with contextlib.suppress(OSError):  # a note lost costs a waiter's patience, no more
        write_atomic(path, message)


def _read_note(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:300].strip()
    except OSError:
        return ""


def _stamps(*paths: Path) -> tuple[int, ...]:
    stamps = []
    for path in paths:
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            stamps.append(0)
    return tuple(stamps)
