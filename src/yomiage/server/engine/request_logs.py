"""One line per warning and request: the same warning again for the same request is counted,
not written.

The engine warns once per sentence: ``"http://" * 580`` sent to ``/tts`` wrote the
frontend's "skipped : (U+003A) ... no rule reads them" 61 times, one line for each
sentence of the one request. While a request's work runs (a stream's step, a reading),
:func:`for_request` marks the thread with the request's :class:`RequestLogs`;
:class:`OncePerRequest`, on the process's log handlers (:func:`install`), lets the
first record of each message through and counts the others; the request's end
(:meth:`RequestLogs.close`) says how many were left out. Records outside a request
pass as they are.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)
_NAMES_SHOWN = 10  # what a request's repeated warnings named, at most, in its last line
_CURRENT: contextvars.ContextVar[RequestLogs | None] = contextvars.ContextVar(
    "yomiage_request_logs", default=None
)


class RequestLogs:
    """The warnings one request has logged so far, by message (thread-safe: a stream's
    steps may run on different threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (logger, message) -> times it came again, and the first arguments it named
        # that the first record did not (what differs: the characters a warning names)
        self._left_out: dict[tuple[str, str], tuple[int, dict[str, None]]] = {}

    def first(self, record: logging.LogRecord) -> bool:
        """Whether ``record``'s message is new for this request (else it is counted)."""
        key = (record.name, str(record.msg))
        args = record.args if isinstance(record.args, tuple) else ()
        named = str(args[0])[:200] if args else ""
        with self._lock:
            seen = self._left_out.get(key)
            if seen is None:
                self._left_out[key] = (0, {named: None})
                return True
            times, names = seen
            if len(names) < _NAMES_SHOWN:
                names.setdefault(named, None)
            self._left_out[key] = (times + 1, names)
            return False

    def close(self) -> None:
        """Say how many warnings were left out, once per message (then forget them)."""
        with self._lock:
            left_out = {key: seen for key, seen in self._left_out.items() if seen[0]}
            self._left_out.clear()
        for (_, message), (times, names) in left_out.items():
            also = [n for n in list(names)[1:] if n]
            log.warning("the warning %r came %d more time(s) for the same request%s", message,
                        times, f", also naming {'; '.join(also)}" if also else "")  # fmt: skip


@contextlib.contextmanager
def for_request(logs: RequestLogs) -> Iterator[None]:
    """The block's records belong to the request of ``logs``."""
    token = _CURRENT.set(logs)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class OncePerRequest(logging.Filter):
    """Passes a WARNING (or worse) of a request only the first time its message comes."""

    def filter(self, record: logging.LogRecord) -> bool:
        logs = _CURRENT.get()
        if logs is None or record.levelno < logging.WARNING or record.name == __name__:
            return True
        return logs.first(record)


def install() -> None:
    """Put :class:`OncePerRequest` on the root logger's handlers (once each)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OncePerRequest) for f in handler.filters):
            handler.addFilter(OncePerRequest())
