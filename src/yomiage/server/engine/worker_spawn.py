"""Start one worker process for :mod:`.worker_supervisor` and wait until it is ready.

The wait is bounded by the time since the worker last made progress, not since it
started: a first load that measures its plan reports each step
(:mod:`yomiage.progress`), and took 989 s on a busy 2-core machine against a fixed
limit of 900 s, so the start failed, and every retry measured from the first step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

from yomiage.errors import YomiageError
from yomiage.server.engine.service import VoiceCard
from yomiage.server.engine.worker_calls import WorkerStartError, describe_exit
from yomiage.server.engine.worker_child import ServiceFactory, worker_main
from yomiage.server.engine.worker_logging import LogLevels


def spawn_worker(
    context: Any,  # multiprocessing's spawn context
    factory: ServiceFactory,
    log_levels: LogLevels,
    number: int,
    timeout: float,
) -> tuple[Connection, Any, Mapping[str, VoiceCard]]:
    """A child running :func:`worker_main`, once its engine is built: the parent's end
    of its pipe, the process and its voices. Raises WorkerStartError (or the child's
    own YomiageError, such as a ModelLoadError) when it makes no progress for
    ``timeout`` seconds (since it started or last reported a step of its load);
    nothing is left running then."""
    parent, child = context.Pipe(duplex=True)
    process = context.Process(
        target=worker_main,
        args=(child, factory, log_levels),
        name=f"yomiage-worker-{number}",
        daemon=True,
    )
    process.start()
    child.close()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if not parent.poll(0.2):
                if not process.is_alive():
                    raise WorkerStartError(
                        "the synthesis worker died while loading the voices "
                        f"({describe_exit(process.exitcode)})"
                    )
                if time.monotonic() > deadline:
                    process.kill()
                    raise WorkerStartError(
                        f"the synthesis worker made no progress loading for {timeout:g} s"
                    )
                continue
            kind, payload = parent.recv()
            if kind != "progress":
                break
            deadline = time.monotonic() + timeout
    except (EOFError, OSError):
        process.join(timeout=5)
        raise WorkerStartError(
            f"the synthesis worker died while loading ({describe_exit(process.exitcode)})"
        ) from None
    except BaseException:  # SIGTERM (serve raises it here), Ctrl-C: the worker goes too
        parent.close()
        process.kill()
        process.join(timeout=5)
        raise
    if kind != "ready":
        parent.close()
        process.join(timeout=10)
        if isinstance(payload, YomiageError):
            raise payload
        raise WorkerStartError(f"the synthesis worker could not start: {payload}")
    voices: Mapping[str, VoiceCard] = payload
    return parent, process, voices
