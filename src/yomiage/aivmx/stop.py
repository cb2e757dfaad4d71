"""A fetch's total time limit, and stopping it from another thread.

A socket timeout bounds one read, not a download: a source that sends one byte
every 20 s passes a 30 s read timeout for ever. So a fetch (:mod:`.fetch`)
carries a :class:`FetchStop`: its deadline shortens every socket wait, and
:meth:`FetchStop.stop` (a server whose client left, or whose own clock ran
out) shuts down the sockets the fetch opened, so a read blocked on a slow
source returns at once instead of at its next byte. Between reads the fetch
calls :meth:`FetchStop.check`, which raises why it must end.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from yomiage.aivmx.upload import shown
from yomiage.errors import SourceError, SourceNetworkError


class DownloadTimeoutError(SourceNetworkError):
    """A fetch ran past its total time limit; nothing was installed."""


class DownloadStoppedError(SourceError):
    """A fetch was stopped from outside (its client left); nothing was installed."""


class FetchStop:
    """The deadline of one fetch (``timeout`` seconds from now; None: none) and its stop.
    ``limit``: the time limit its message names, where the fetch got what was left of
    a longer one (a server's install had received its form first); default ``timeout``.

    Thread-safe: the fetch runs on one thread, :meth:`stop` may come from any other."""

    def __init__(self, timeout: float | None = None, *, limit: float | None = None) -> None:
        self.timeout = timeout if limit is None else limit
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self._lock = threading.Lock()
        self._why: str | None = None
        self._sockets: list[socket.socket] = []

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called or the deadline passed."""
        return self._why is not None or self.remaining() == 0.0

    def remaining(self) -> float | None:
        """Seconds left before the deadline (0 once past it; None without one)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def stop(self, why: str) -> None:
        """End the fetch now: its blocked reads return and its next :meth:`check` raises."""
        with self._lock:
            self._why = self._why or why
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def expire(self) -> None:
        """As :meth:`stop`, for a caller whose own clock for this deadline ran out first:
        the fetch ends with DownloadTimeoutError."""
        with self._lock:
            self.deadline = time.monotonic()
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def check(self, source: str) -> None:
        """Raise DownloadStoppedError or DownloadTimeoutError if the fetch must end."""
        if self._why is not None:
            raise DownloadStoppedError(
                f"the fetch of {shown(source)} was stopped: {self._why}", source=source
            )
        if self.remaining() == 0.0:
            raise DownloadTimeoutError(
                f"the fetch of {shown(source)} did not end within {self.timeout or 0:g} s; the "
                "source is too slow for the server's --install-timeout",
                source=source,
            )

    def wait(self, per_read: float) -> float:
        """The timeout of the next socket wait: ``per_read``, cut to the time left; the
        sockets of the fetch get it too (a read already under way keeps its own)."""
        left = self.remaining()
        timeout = per_read if left is None else max(min(per_read, left), 0.001)
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with suppress(OSError):
                sock.settimeout(timeout)
        return timeout

    def handlers(self) -> list[urllib.request.BaseHandler]:
        """urllib handlers whose connections report their sockets to this stop."""
        return [_HTTPHandler(self), _HTTPSHandler(self)]

    def _watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            stopped = self._why is not None
        if stopped:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Wake a read blocked on ``sock`` (shutdown does; close from another thread may not)."""
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watching(
    kind: type[http.client.HTTPConnection], stop: FetchStop
) -> Callable[..., http.client.HTTPConnection]:
    """A connection class of ``kind`` whose socket ``stop`` learns once connected."""

    def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        connection = kind(host, **kwargs)
        connect = connection.connect

        def connect_and_report() -> None:
            connect()
            stop._watch(connection.sock)

        connection.connect = connect_and_report  # type: ignore[method-assign]
        return connection

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, stop: FetchStop) -> None:
        super().__init__()
        self._stop = stop

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watching(http.client.HTTPConnection, self._stop), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, stop: FetchStop) -> None:
        self._ssl = ssl.create_default_context()  # urllib's own default, kept to pass on
        super().__init__(context=self._ssl)
        self._stop = stop

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        kind = _watching(http.client.HTTPSConnection, self._stop)
        return self.do_open(kind, req, context=self._ssl)
