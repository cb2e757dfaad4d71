"""Worker processes that die with the process that started them.

A batch driver killed by SIGTERM, SIGKILL or the OOM killer runs no cleanup,
so its workers (each holding a loaded engine, hundreds of MB) would live on
under PID 1, finish their item for nobody, then wait on a dead pipe forever.
Each worker therefore asks Linux to kill it when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), and on every system also watches its parent
from a thread and exits when the parent is gone (it is then re-parented, so
``os.getppid()`` changes).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_SECONDS = 1.0  # how often the watchdog looks at its parent
ORPHANED = 70  # exit status of a worker whose driver died (EX_SOFTWARE)


def die_with_parent(parent_pid: int, *, poll_seconds: float = WATCH_SECONDS) -> None:
    """Make this process end when ``parent_pid`` (its parent) ends. Call it first
    thing in the child; if the parent is already gone, the child exits at once."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no libc to ask: the watchdog alone
            pass
    if os.getppid() != parent_pid:  # died before the request took effect
        os._exit(ORPHANED)
    watchdog = threading.Thread(
        target=_watch, args=(parent_pid, poll_seconds), name="yomiage-lifeline", daemon=True
    )
    watchdog.start()


def _watch(parent_pid: int, poll_seconds: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_seconds)
    os._exit(ORPHANED)  # no cleanup: the item in hand has nobody to write it
