"""What the worker's supervisor (:mod:`.worker_supervisor`) and the users of its calls
share: the errors a call to the worker may end in, one call waiting for its answer, and
one worker process with the calls in flight on it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from yomiage.errors import YomiageError


class WorkerCrashed(YomiageError):
    """The worker process died while it worked on this request (it is being restarted)."""


class CallNotStarted(WorkerCrashed):
    """The worker process died before it began this call: it may be sent to the next one
    (:mod:`yomiage.server.engine.worker_retry`)."""


class WorkerUnavailable(YomiageError):
    """No worker process is ready (one is starting); retry shortly."""


class WorkerHung(WorkerUnavailable):
    """The worker did not answer within its deadline: it was killed and is restarting."""


class WorkerStartError(YomiageError):
    """The worker process could not start its engine (its message says why)."""


@dataclass
class Call:
    deadline: float = float("inf")  # time.monotonic() past which the worker counts as hung
    on_ok: Callable[[], None] | None = None
    started: bool = False  # the child said it began it: it may be what kills the child
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    value: Any = None

    def finish(self, ok: bool, value: Any) -> None:
        self.ok, self.value = ok, value
        self.done.set()
        if ok and self.on_ok is not None:
            self.on_ok()


@dataclass
class Generation:
    """One child process and the calls waiting on it."""

    number: int
    conn: Connection
    process: Any  # multiprocessing's SpawnProcess
    calls: dict[int, Call] = field(default_factory=dict)
    alive: bool = True
    gone: threading.Event = field(default_factory=threading.Event)  # set with alive = False
    hung: str | None = None  # why it was killed as hung
    reader: threading.Thread | None = None

    def failure(self, call: Call, how: str) -> WorkerCrashed | WorkerHung:
        """What ``call``, in flight when this process died (``how``: :func:`describe_exit`),
        fails with: only one the child never began may be sent to the next child."""
        if self.hung:
            return WorkerHung(self.hung)
        if call.started:
            return WorkerCrashed(f"the synthesis worker died ({how}); retry shortly")
        return CallNotStarted(f"the synthesis worker died ({how}) before it began the call")


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
