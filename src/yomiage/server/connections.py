"""Connections that cannot pile up: a deadline for each request head, and a cap.

uvicorn times out idle keep-alive connections but not a client that opens a
socket and sends its request head a byte at a time, or nothing at all: a
probe held 19,985 such sockets until the process ran out of file
descriptors and ``/health`` stopped answering. :func:`guarded_protocol`
makes uvicorn's HTTP protocol class (httptools, or h11 without it) with two
additions:

* a request head (request line and headers) must be complete within
  ``header_timeout`` seconds of the connection, or of the first byte after a
  response; otherwise the server answers 408 and closes the socket;
* at most ``max_connections`` are open at once. A new one over the cap closes
  the oldest connection that is only waiting for a request head (a stalled
  or idle keep-alive client), so ``/health`` still gets through; if every
  connection is busy with a request, the new one is answered 503 and closed.

Bodies are timed in the app (:mod:`yomiage.server.request_body`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, cast

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from yomiage.server.errors import error_body

_ORDER = itertools.count()


def _raw_response(status: int, reason: str, message: str, code: str) -> bytes:
    body = json.dumps(error_body(status, message, code)).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class _Guard:
    """Mixed in before uvicorn's protocol class (see :func:`guarded_protocol`)."""

    header_timeout: float = 20.0
    max_connections: int = 1000
    # uvicorn's protocol sets these:
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    cycle: Any

    _head_timer: asyncio.TimerHandle | None = None
    _head_marker: Any = None
    _opened: int = 0  # the order connections came in (the oldest idle one goes first)

    def _waiting_for_head(self) -> bool:
        cycle = self.cycle
        return cycle is None or bool(cycle.response_complete)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._opened = next(_ORDER)
        over = len(self.connections) >= self.max_connections
        cast(Any, super()).connection_made(transport)
        if over and not self._evict_idle():
            self._refuse(
                503,
                "Service Unavailable",
                f"the server has {self.max_connections} connections open, all busy; retry shortly",
                "too_many_connections",
            )
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self._waiting_for_head():
            self._arm()
        cast(Any, super()).data_received(data)

    def on_response_complete(self) -> None:
        cast(Any, super()).on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next head (perhaps already half in the parser) has its deadline

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        cast(Any, super()).connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_marker = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_expired)

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.cycle is self._head_marker and self._waiting_for_head():
            self._refuse(
                408,
                "Request Timeout",
                f"the request head did not arrive within {self.header_timeout:g} s",
                "request_timeout",
            )

    def _refuse(self, status: int, reason: str, message: str, code: str) -> None:
        if not self.transport.is_closing():
            self.transport.write(_raw_response(status, reason, message, code))
            self.transport.close()

    def _evict_idle(self) -> bool:
        """Close the oldest other connection that only waits for a request head."""
        idle = [
            c
            for c in self.connections
            if c is not self and isinstance(c, _Guard) and c._waiting_for_head()
            and not c.transport.is_closing()
        ]  # fmt: skip
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._opened)
        oldest.transport.close()
        return True


def guarded_protocol(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with a request-head deadline and a connection cap;
    pass it as ``uvicorn.Config(http=...)``."""
    attributes = {"header_timeout": header_timeout, "max_connections": max_connections}
    cls = type("GuardedHTTPProtocol", (_Guard, AutoHTTPProtocol), attributes)
    return cast(type[asyncio.Protocol], cls)
