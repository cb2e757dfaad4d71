"""Plain ASGI middleware (no buffering of responses, so streams stay streams).

:class:`MetricsMiddleware` counts every response by route template and status
and times it to the last byte. :class:`GuardMiddleware` caps the request body,
checks the API key and adds the headers every response carries.
"""

from __future__ import annotations

import hmac
import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yomiage.server.config import ServerConfig
from yomiage.server.errors import error_body
from yomiage.server.metrics import ServerMetrics

# Reachable without the API key: the page (it holds no data) and the probes.
PUBLIC_PATHS = frozenset({"/", "/playground/app.js", "/playground/style.css", "/health", "/ready"})


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    headers: dict[str, str] | None = None,
) -> None:
    body = json.dumps(error_body(status, message, code)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
            self.metrics.requests.inc(label, scope["method"], str(status))
            self.metrics.latency.observe(time.perf_counter() - started, label)
            if status >= 400:
                from yomiage.server.errors import error_type

                self.metrics.errors.inc(error_type(status))


class GuardMiddleware:
    """Body size limit (413), bearer API key (401) and defensive response headers."""

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app = app
        self.config = config
        key = config.api_key
        self._key = key.encode() if key else None

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
        limit = self.config.max_body_bytes
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > limit:
                await send_error(
                    guarded, 413, f"the request body exceeds {limit} bytes", "body_too_large"
                )
                return
            await self.app(scope, receive, guarded)
            return
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, guarded)
            return
        # A body without a length (chunked): read it here, up to the limit.
        body, more, size = [], True, 0
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await send_error(
                    guarded, 413, f"the request body exceeds {limit} bytes", "body_too_large"
                )
                return
            body.append(chunk)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, guarded)

    def _authorized(self, header: bytes) -> bool:
        if self._key is None:
            return True
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(token.strip(), self._key)
