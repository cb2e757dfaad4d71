"""Connections that cannot pile up: deadlines for each request head and each send, and a cap.

uvicorn times out idle keep-alive connections but not a client that opens a
socket and sends its request head a byte at a time, or nothing at all: a
probe held 19,985 such sockets until the process ran out of file
descriptors and ``/health`` stopped answering. :func:`guarded_protocol`
makes uvicorn's HTTP protocol class (httptools, or h11 without it) with these
additions:

* a request head (request line and headers) must be complete within
  ``header_timeout`` seconds of the connection, or of the first byte after a
  response; otherwise the server answers 408 and closes the socket;
* at most ``max_connections`` are open at once. A new one over the cap closes
  the oldest connection that is only waiting for a request head (a stalled
  or idle keep-alive client), so ``/health`` still gets through; if every
  connection is busy with a request, the new one is answered 503 and closed
  (in order: its side first, so a client still sending its request reads the
  answer instead of a reset; 408s close the same way);
* a response the client does not take is dropped: once the socket's write
  buffer is full (the transport pauses writing, and a streamed response's
  next send waits), the client must take some of it within ``send_timeout``
  seconds, and again within each ``send_timeout`` after that, until the
  buffer drains. Otherwise the connection is aborted (its unsent bytes
  freed), which the app sees as the client leaving: the synthesis stops and
  its slot is freed. A client that never read held a slot for as long as it
  kept its socket, and each whole WAV sent to one stayed in memory (ten
  clients: 1.6 GB). What the client took is counted where it shows first: the
  bytes the kernel still holds for it (Linux's ``SIOCOUTQ``: sent and not yet
  acknowledged, or not yet sent) besides the transport's buffer, which shrinks
  only once the kernel's has room for a whole write (counted by the transport's
  buffer alone, a client reading 13 kB/s was dropped);
* a request head (request line and header fields) may be at most
  ``max_head_bytes`` long; past that the server answers 431 and closes the socket,
  without reading the rest. Neither parser had a limit of its own that held: one
  64 MB header was read whole and answered 200 (ten at once took the process to
  482 MB). With httptools the bytes are counted here as they come, up to the blank
  line that ends the head; h11 counts its own buffer (``h11_max_incomplete_event_size``,
  which :func:`~yomiage.server.runner.uvicorn_config` sets), and its refusal is
  answered 431 here. A head that follows the previous request's body in the same
  read (a pipelining client) is counted from the next read: at most one read
  (256 KiB) more.

Bodies are timed in the app (:mod:`yomiage.server.request_body`); the number of
header fields is checked there too (:class:`~yomiage.server.middleware.GuardMiddleware`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import struct
import sys
from collections.abc import Callable
from typing import Any, cast

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from yomiage.server.errors import error_body

log = logging.getLogger(__name__)
_ORDER = itertools.count()
# How long a refused connection is kept, its side closed, for its client to close: what the
# client still sends meanwhile is dropped. Closed with the client's bytes unread, the
# kernel resets the connection, and a client still sending loses the answer.
LINGER_S = 2.0
# The ioctl that reads how many bytes a socket's kernel send queue holds (Linux only).
if sys.platform.startswith("linux"):
    import fcntl
    import termios

    _SIOCOUTQ: int | None = termios.TIOCOUTQ  # the same request for a socket
else:
    _SIOCOUTQ = None
# The blank line that ends a request head (h11 and llhttp both take a bare LF too).
_HEAD_END = re.compile(rb"\n\r?\n")


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
    send_timeout: float = 60.0
    max_head_bytes: int = 65536
    # uvicorn's protocol sets these:
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    cycle: Any
    client: tuple[str, int] | None

    _head_timer: asyncio.TimerHandle | None = None
    _head_marker: Any = None
    _opened: int = 0  # the order connections came in (the oldest idle one goes first)
    _send_timer: asyncio.TimerHandle | None = None
    _unsent: int = 0  # bytes waiting in the write buffer when the send deadline was set
    _refused: bool = False  # answered and half-closed: the rest of what arrives is dropped
    _head_too_large: bool = False  # a 431 to send once the response in progress is out

    @staticmethod
    def _dropped() -> None:
        """Called once for each connection dropped for not reading (a metric)."""

    def _waiting_for_head(self) -> bool:
        cycle = self.cycle
        return cycle is None or bool(cycle.response_complete)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._opened = next(_ORDER)
        # Refused ones on their way out (see _refuse) hold no request: they do not count.
        open_ = sum(1 for c in self.connections if not getattr(c, "_refused", False))
        over = open_ >= self.max_connections
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
        if self._refused or self._head_too_large:
            return
        if self._head_timer is None and self._waiting_for_head():
            self._arm()
        cast(Any, super()).data_received(data)

    def on_response_complete(self) -> None:
        cast(Any, super()).on_response_complete()
        if self._head_too_large:  # the answer before it is out: now the 431
            self._head_too_large = False
            self._refuse_head()
        elif not self.transport.is_closing():
            self._arm()  # the next head (perhaps already half in the parser) has its deadline

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._stop_send_deadline()
        cast(Any, super()).connection_lost(exc)

    def pause_writing(self) -> None:
        cast(Any, super()).pause_writing()
        if self._send_timer is None:
            self._unsent = self._untaken()
            self._send_timer = self.loop.call_later(self.send_timeout, self._send_expired)

    def resume_writing(self) -> None:
        self._stop_send_deadline()
        cast(Any, super()).resume_writing()

    def _stop_send_deadline(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_expired(self) -> None:
        """The client had ``send_timeout`` s to take some of what waits for it."""
        self._send_timer = None
        if self.transport.get_write_buffer_size() == 0:  # all passed on; resume_writing next
            return
        unsent = self._untaken()
        if unsent < self._unsent:  # it took some: a slow reader, not a stalled one
            self._unsent = unsent
            self._send_timer = self.loop.call_later(self.send_timeout, self._send_expired)
            return
        where = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.warning(
            "%s took none of its response for %g s (--send-timeout); closed the connection "
            "with %d bytes unsent", where, self.send_timeout, unsent,
        )  # fmt: skip
        self._dropped()
        self.transport.abort()  # frees the buffer; the app sees the client leave

    def _untaken(self) -> int:
        """Bytes of the response its client has not taken: the transport's buffer, and
        the socket's send queue in the kernel where it can be read (Linux)."""
        waiting = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if _SIOCOUTQ is None or sock is None:
            return waiting
        try:
            queued = fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0\0\0\0")
        except (OSError, ValueError):  # not a TCP socket, or closed meanwhile
            return waiting
        return waiting + int(struct.unpack("i", queued)[0])

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
        """Answer ``status`` and close: our side at once, the socket once the client has
        closed its side too, or after :data:`LINGER_S` (see there)."""
        transport = self.transport
        if transport.is_closing():
            return
        transport.write(_raw_response(status, reason, message, code))
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if not transport.can_write_eof():
            transport.close()
            return
        self._refused = True
        transport.write_eof()
        self.loop.call_later(LINGER_S, transport.close)

    def _refuse_head(self) -> None:
        """431 for a head past ``max_head_bytes``; where the request before it (pipelined)
        is still being answered, once that answer is out (nothing more is read)."""
        if not self._waiting_for_head():
            self._head_too_large = True
            return
        self._refuse(
            431,
            "Request Header Fields Too Large",
            f"the request head (request line and header fields) is larger than "
            f"{self.max_head_bytes} bytes",
            "header_too_large",
        )

    def _evict_idle(self) -> bool:
        """Close the oldest other connection that only waits for a request head."""
        idle = [
            c
            for c in self.connections
            if c is not self and isinstance(c, _Guard) and c._waiting_for_head()
            and not c.transport.is_closing() and not c._refused
        ]  # fmt: skip
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._opened)
        oldest.transport.close()
        return True


class _HttpToolsHead:
    """The head's size for httptools, counted before the parser sees the bytes (it
    gathers a header's value whole, however long, before it hands it on)."""

    max_head_bytes: int
    _refused: bool

    _metering: bool = True  # the bytes now arriving belong to a request head
    _head_bytes: int = 0
    _head_begun: bool = False  # a byte other than the CR and LF a head may follow
    _head_tail: bytes = b""  # the head's last two bytes so far (a blank line split across reads)

    def data_received(self, data: bytes) -> None:
        if self._metering and not self._refused and not self._meter(data):
            cast(Any, self)._refuse_head()
            return
        cast(Any, super()).data_received(data)

    def on_message_complete(self) -> None:
        """httptools' callback: the request, body and all, is in; a new head comes next."""
        cast(Any, super()).on_message_complete()
        self._metering, self._head_bytes, self._head_begun, self._head_tail = True, 0, False, b""

    def _meter(self, data: bytes) -> bool:
        """Count what of ``data`` belongs to the head (up to its blank line); False once
        the head is past ``max_head_bytes``."""
        start = 0
        if not self._head_begun:
            start = len(data) - len(data.lstrip(b"\r\n"))
            if start == len(data):
                self._head_bytes += start
                return self._head_bytes <= self.max_head_bytes
            self._head_begun = True
        tail = self._head_tail
        end: int | None = None
        across = _HEAD_END.search(tail + data[start : start + 2])
        if across is not None:
            end = start + across.end() - len(tail)
        else:
            within = _HEAD_END.search(data, start)
            end = within.end() if within is not None else None
        self._head_bytes += (len(data) if end is None else end) - start
        if self._head_bytes > self.max_head_bytes:
            return False
        if end is None:
            self._head_tail = (tail + data[start:])[-2:]
        else:
            self._metering = False  # the rest is its body, until on_message_complete
        return True


class _H11Head:
    """h11 keeps the head in its own buffer, bounded by ``h11_max_incomplete_event_size``;
    uvicorn answers any refusal of h11's 400: one for a head past the bound is a 431."""

    max_head_bytes: int
    conn: Any

    def send_400_response(self, msg: str) -> None:
        buffered, _ = self.conn.trailing_data
        if len(buffered) > self.max_head_bytes:
            cast(Any, self)._refuse_head()
            return
        cast(Any, super()).send_400_response(msg)


def guarded_protocol(
    header_timeout: float,
    max_connections: int,
    send_timeout: float = 60.0,
    dropped: Callable[[], None] | None = None,
    *,
    max_head_bytes: int = 65536,
    base: type[asyncio.Protocol] | None = None,
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (``base``; default: httptools where it is installed, else
    h11) with a request-head deadline and size limit, a send deadline and a connection
    cap; pass it as ``uvicorn.Config(http=..., h11_max_incomplete_event_size=
    max_head_bytes)``. ``dropped`` is called for each connection closed because its
    client did not read (the server's metric)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    base = base or AutoHTTPProtocol
    head = _H11Head if issubclass(base, H11Protocol) else _HttpToolsHead
    attributes: dict[str, Any] = {
        "header_timeout": header_timeout,
        "max_connections": max_connections,
        "send_timeout": send_timeout,
        "max_head_bytes": max_head_bytes,
    }
    if dropped is not None:
        attributes["_dropped"] = staticmethod(dropped)
    cls = type("GuardedHTTPProtocol", (_Guard, head, base), attributes)
    return cast(type[asyncio.Protocol], cls)
