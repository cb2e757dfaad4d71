"""Child processes that die with the process that started them.

A process killed by SIGTERM, SIGKILL or the OOM killer runs no cleanup, so the
processes it started would live on under PID 1: a batch worker holding a loaded
engine would finish its item for nobody, and a plan's measuring process (~1 GB,
both cores, for minutes) outlived ``yomiage serve`` until someone killed it. So a
child asks Linux to kill it when its parent dies (``prctl(PR_SET_PDEATHSIG)``),
and on every system also watches its parent from a thread and exits when the
parent is gone (it is then re-parented, so ``os.getppid()`` changes).

Linux sends that signal when the *thread* that started the child ends, not the
process: right for a child started by :func:`subprocess.run` (its thread waits
for it to end), wrong for one a long-lived supervisor starts from a thread that
ends before it (the server's worker is restarted from the thread that saw the
last one die), which watches with the thread alone (``kernel=False``).
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
ORPHANED = 70  # exit status of a child whose parent died (EX_SOFTWARE)
# Set by :func:`child_environment`: the process id a child started with it must outlive.
PARENT_ENV = "YOMIAGE_PARENT_PID"


def die_with_parent(
    parent_pid: int, *, poll_seconds: float = WATCH_SECONDS, kernel: bool = True
) -> None:
    """Make this process end when ``parent_pid`` (its parent) ends. Call it first
    thing in the child; if the parent is already gone, the child exits at once.
    ``kernel=False``: the watching thread alone (see the module docstring)."""
    if kernel and sys.platform.startswith("linux"):
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


def child_environment() -> dict[str, str]:
    """This process's environment, naming it as the parent that a child started with
    it dies with (:func:`die_with_parent_from_environment`)."""
    return dict(os.environ, **{PARENT_ENV: str(os.getpid())})


def die_with_parent_from_environment() -> None:
    """:func:`die_with_parent` for the parent :func:`child_environment` named; nothing
    for a process started otherwise (by hand, to debug it)."""
    named = os.environ.get(PARENT_ENV, "")
    if named.isdigit():
        die_with_parent(int(named))


def _watch(parent_pid: int, poll_seconds: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_seconds)
    os._exit(ORPHANED)  # no cleanup: the work in hand has nobody to give it to
