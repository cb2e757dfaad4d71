"""Progress of a long load, for whoever waits on it to tell slow from stuck.

The first load of a full-size voice measures its plan (minutes; more on a busy
machine) and may make a decoder in another layout or wait for another process
measuring the same voice. The server's worker had a fixed 900 s to load, and a
busy machine's first start took longer, failing start after start. So each of
those steps reports that it moved on (:func:`report_progress`), and a waiter
counts its deadline from the last report (:func:`progress_to`; the server's
worker does, ``server/engine/worker_child.py``). A step that hangs still ends:
each measuring or making process has a time limit of its own.

Reports travel on the :data:`PROGRESS_LOGGER` logger, to its listeners alone, so
a process with no waiter pays next to nothing for them and its user's log does
not repeat the lines that say the same at WARNING.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

PROGRESS_LOGGER = "yomiage.progress"


def report_progress(message: str) -> None:
    """Say that a long step of a load began or ended (``message`` says which)."""
    _logger().debug(message)


@contextmanager
def progress_to(listener: Callable[[str], None]) -> Iterator[None]:
    """Within the block, hand every report of this process to ``listener`` (from the
    thread that reports, one at a time)."""
    logger = _logger()
    handler = _Listener(listener)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _logger() -> logging.Logger:
    """The reports' logger: every report reaches its listeners, and only them (the user's
    log has the same news at WARNING from whoever reports). Set each time, the same
    way, so that no caller has to undo it."""
    logger = logging.getLogger(PROGRESS_LOGGER)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger


class _Listener(logging.Handler):
    def __init__(self, listener: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self._listener = listener
        self._one = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            with self._one:
                self._listener(record.getMessage())
        except Exception:  # a listener gone (its pipe closed) must not fail a load
            pass
