"""Plain ASGI middleware (no buffering of responses, so streams stay streams).

:class:`ShieldMiddleware`, outermost, answers JSON whatever fails before a
response began (uvicorn would send a text/plain 500), 503 while shutting
down. :class:`MetricsMiddleware` counts every response by route template and
status, times it to the last byte, and writes the access-log line uvicorn
cannot for a client that left (499). :class:`GuardMiddleware` checks the number
of header fields (their bytes are bounded in :mod:`yomiage.server.connections`),
the Host header (DNS rebinding), the API key, that a state-changing request comes
from no page or an allowed origin (a CORS "simple" request runs even though
its page cannot read the answer), that a body is JSON, reads the body within
its size (per route: a VOICEVOX query weighs more than a text) and time limits,
and adds the headers every response carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yomiage.server.config import STREAMED_BODY_PATHS, ServerConfig
from yomiage.server.errors import error_body
from yomiage.server.metrics import ServerMetrics
from yomiage.server.request_body import (
    MAX_JSON_DEPTH,
    BodyRefused,
    ClientGone,
    nests_too_deep,
    read_body,
)

if TYPE_CHECKING:
    from yomiage.server.state import ServerState

log = logging.getLogger(__name__)
access_log = logging.getLogger("uvicorn.access")

# Reachable without the API key: the page (it holds no data) and the probes.
PUBLIC_PATHS = frozenset({"/", "/playground/app.js", "/playground/style.css", "/health", "/ready"})
# Methods that change nothing: any origin may send them (CORS decides what it reads).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Header fields one request may carry (a browser sends ~20; Apache's default limit).
MAX_HEADER_FIELDS = 100


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    headers: dict[str, str] | None = None,
    param: str | None = None,
) -> None:
    body = json.dumps(error_body(status, message, code, param)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class MetricsMiddleware:
    """``idle`` is called (on the event loop) each time the last request in flight ends."""

    def __init__(
        self, app: ASGIApp, metrics: ServerMetrics, idle: Callable[[], None] | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics
        self._idle = idle
        self._open = 0  # requests in flight, all routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self._open += 1
        try:
            await self._counted(scope, receive, send)
        finally:
            self._open -= 1
            if self._open == 0 and self._idle is not None:
                self._idle()

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500  # what the client gets if the app fails before answering

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            if status == 499:  # nobody received it, so uvicorn logs nothing
                client = scope.get("client")
                where = f"{client[0]}:{client[1]}" if client else "-"
                path = scope.get("raw_path", b"").decode("latin-1") or scope["path"]
                version = scope.get("http_version", "1.1")
                access_log.info('%s - "%s %s HTTP/%s" %d', where, scope["method"], path, version,
                                status)  # fmt: skip
            self.metrics.requests.inc(label, scope["method"], str(status))
            self.metrics.latency.observe(time.perf_counter() - started, label)
            if status >= 400 and not self.metrics.turned_away(scope):  # counted apart
                from yomiage.server.errors import error_type

                self.metrics.errors.inc(error_type(status))


class ShieldMiddleware:
    """A JSON error for anything that fails before the response begins, never a bare 500."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except BaseException as exc:
            if not started:
                if isinstance(exc, asyncio.CancelledError):  # a second Ctrl-C, or a forced stop
                    status, message, code = 503, "the server is shutting down", "shutting_down"
                else:
                    log.exception("unhandled error in %s %s", scope["method"], scope["path"])
                    status, message, code = 500, "internal server error", "internal_error"
                with contextlib.suppress(Exception):  # the client may be gone too
                    await send_error(send, status, message, code, {"Retry-After": "5"})
            raise


_PORT = re.compile(r"(?::[0-9]{0,5})?")


def _host_name(header: bytes) -> str | None:
    """The name in a Host header, without its port: ``[::1]:8000`` -> ``::1``; None when
    the header is no host and port (``localhost:evil``: a name the allow-list knows,
    with a port no client can have connected to)."""
    host = header.decode("latin-1").strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        name, port = host[1:end], host[end + 1 :]
    elif host.count(":") == 1:
        name, colon, port = host.partition(":")
        port = colon + port
    else:  # a bare IPv6 address, or a name without a port
        name, port = host, ""
    return name if _PORT.fullmatch(port) else None


def _is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_json(content_type: bytes) -> bool:
    media = content_type.decode("latin-1").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and
                                           media.endswith("+json"))  # fmt: skip


async def _not_json(send: Send) -> None:
    await send_error(
        send,
        415,
        "send the body as JSON, with 'Content-Type: application/json'",
        "unsupported_media_type",
    )


class GuardMiddleware:
    """Host check (400), API key (401), writes from other sites (403), JSON bodies only
    (415), body size (413), time (408) and nesting (400) limits, and defensive response
    headers."""

    def __init__(
        self, app: ASGIApp, config: ServerConfig, body_limits: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.config = config
        # Routes whose bodies weigh more than a text's (VOICEVOX's AudioQuery), by path;
        # the routes fill it in as they are added (ServerState.body_limits).
        self._body_limits = body_limits if body_limits is not None else {}
        key = config.api_key
        self._key = key.encode() if key else None
        self._any_host = "*" in config.allowed_hosts
        self._hosts = frozenset(h.lower().strip("[]") for h in config.allowed_hosts)

    def _host_allowed(self, header: bytes | None) -> bool:
        if header is None:  # HTTP/1.0 without Host: no browser sends that
            return True
        name = _host_name(header)
        return name is not None and (self._any_host or self._host_listed(name))

    def _host_listed(self, name: str) -> bool:
        """Whether ``name`` is on the allow-list itself (``*`` lists none)."""
        return name in self._hosts or ("localhost" in self._hosts and name.endswith(".localhost"))

    def _names_this_server(self, name: str) -> bool:
        """Whether a page whose origin has the Host name ``name`` can only be one this
        server sent: a listed name, a loopback name, or an IP address (a page on an
        address is served from that address and port: here). Any other name may be a
        DNS-rebinding page's own domain pointed at this server, which ``--allowed-host
        '*'`` lets in but must not count as this server's origin."""
        loopback = name == "localhost" or name.endswith(".localhost")
        return loopback or _is_ip_address(name) or self._host_listed(name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
            await send(message)

        if len(scope["headers"]) > MAX_HEADER_FIELDS:  # their bytes are bounded by the parser's
            await send_error(
                guarded,
                431,
                f"the request has {len(scope['headers'])} header fields; at most "
                f"{MAX_HEADER_FIELDS} are read",
                "header_too_large",
                {"Connection": "close"},
            )
            return
        if not self._host_allowed(headers.get(b"host")):
            await send_error(
                guarded,
                400,
                "this server does not answer to that Host name; start it with "
                "--allowed-host NAME to add one",
                "invalid_host",
            )
            return
        public = scope["path"] in PUBLIC_PATHS
        if not public and not self._authorized(headers.get(b"authorization", b"")):
            await send_error(
                guarded,
                401,
                "missing or wrong API key: send 'Authorization: Bearer <key>'",
                "invalid_api_key",
                {"WWW-Authenticate": "Bearer"},
            )
            return
        if scope["method"] not in SAFE_METHODS and not self._same_or_allowed_origin(headers):
            own = " (or --allowed-host NAME, where it is this server's own name)"
            await send_error(
                guarded,
                403,
                "this server does not take changes from pages on that origin; start it with "
                f"--cors-origin ORIGIN to allow one{own if self._any_host else ''}",
                "origin_not_allowed",
            )
            return
        if scope["path"] in STREAMED_BODY_PATHS and scope["method"] == "POST":
            await self.app(scope, receive, guarded)  # the route reads it under its own limits
            return
        limit = self._body_limits.get(scope["path"], self.config.max_body_bytes)
        length = headers.get(b"content-length")
        json_body = _is_json(headers.get(b"content-type", b""))
        if length is not None and (not length.isdigit() or int(length) > limit):
            await send_error(
                guarded, 413, f"the request body exceeds {limit} bytes", "body_too_large"
            )
            return
        if length is not None and int(length) > 0 and not json_body:
            await _not_json(guarded)
            return
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        if (length is None or int(length) == 0) and not chunked:
            await self.app(scope, receive, guarded)
            return
        # A body: read it whole here, within its time and size (request_body.py).
        try:
            body = await read_body(receive, limit, self.config.body_timeout)
        except ClientGone:
            return
        if isinstance(body, BodyRefused):
            close = {"Connection": "close"} if body.status == 408 else None
            await send_error(guarded, body.status, body.message, body.code, close)
            return
        if body and not json_body:
            await _not_json(guarded)
            return
        if nests_too_deep(body):
            await send_error(
                guarded,
                400,
                f"the JSON nests deeper than {MAX_JSON_DEPTH} levels",
                "invalid_json",
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, guarded)

    def _same_or_allowed_origin(self, headers: dict[bytes, bytes]) -> bool:
        """A state-changing request may come from no browser page (curl, servers: no
        Origin), this server's own page, or an origin CORS allows; any other page's
        request is refused before it runs, with or without a body (a CORS "simple"
        request runs on the server even though the page cannot read the answer)."""
        origin = headers.get(b"origin")
        if origin is None:
            return headers.get(b"sec-fetch-site", b"").lower() != b"cross-site"
        name = origin.decode("latin-1").strip()
        host = headers.get(b"host", b"").decode("latin-1").strip().lower()
        if host and name.lower() in (f"http://{host}", f"https://{host}"):
            host_name = _host_name(host.encode("latin-1"))
            if host_name is not None and self._names_this_server(host_name):
                return True
        return self.config.origin_allowed(name)

    def _authorized(self, header: bytes) -> bool:
        if self._key is None:
            return True
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(token.strip(), self._key)
