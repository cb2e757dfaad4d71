"""A call that a dead worker never began is sent once more, to the worker started after it.

A request sent to a child that had just died, before the parent's reader saw it
go, used to fail with 500 ``worker_crashed`` although the child never saw it
(the first request after a SIGSEGV, now and then). So the child says when it
begins each call, before any work (:mod:`yomiage.server.engine.worker_child`),
and when it dies the parent knows which of its calls it had begun. Those may be
what killed it (an input that reaches a native bug) and fail with
:class:`WorkerCrashed` as before: sent again, such an input would kill the next
worker too, and the next. The others fail with :class:`CallNotStarted`, and the
callers that can start them afresh send them once more, to the restarted worker:
the calls that stand alone (:func:`call_retrying`), and a stream's opening and
first step (:mod:`yomiage.server.engine.worker_stream`). A stream's later steps
are not (its stream died with the worker, and its audio may be out), nor is a
voice change (it holds the lock that the restart's replay of the changes needs).
"""

from __future__ import annotations

import logging
from typing import Any

from yomiage.server.engine.worker_calls import CallNotStarted
from yomiage.server.engine.worker_supervisor import Supervisor

log = logging.getLogger(__name__)


def call_retrying(supervisor: Supervisor, op: str, *args: Any) -> Any:
    """``op`` on the current worker; once more on the next one if this one died before it
    began it (a second such death fails the call)."""
    generation = supervisor.current()
    try:
        return supervisor.call(generation, op, *args)
    except CallNotStarted as exc:
        log.info("%s; sending its %s call to the next worker", exc, op)
        return supervisor.call(supervisor.next_after(generation), op, *args)
