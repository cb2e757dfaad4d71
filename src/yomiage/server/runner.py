"""uvicorn, told when a stop begins.

uvicorn stops accepting, lets requests in flight finish (up to its graceful
timeout) and then cancels the rest: a request still waiting in the queue
would get nothing. :class:`Server` tells the app first, so queued requests
are answered 503 with ``Retry-After`` at once. :func:`uvicorn_config` is
the uvicorn set-up with the app's connection limits (slow clients time out).
"""

from __future__ import annotations

from types import FrameType
from typing import Any

import uvicorn

from yomiage.server.config import ServerConfig
from yomiage.server.connections import guarded_protocol
from yomiage.server.state import ServerState


def connection_cap(wanted: int) -> int:
    """``wanted``, lowered so that the connections fit the process's open-file limit
    with 128 descriptors to spare (the engine, its pipe, logs); at least 2."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # Windows has no such limit
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(2, min(wanted, soft - 128))


def uvicorn_config(app: Any, config: ServerConfig, **kwargs: Any) -> uvicorn.Config:
    """uvicorn's settings for ``app``: request heads within ``config.header_timeout`` and
    ``config.max_head_bytes``, responses taken within ``config.send_timeout``, at most
    ``config.max_connections`` sockets (:mod:`yomiage.server.connections`). Connections
    dropped for not reading are counted in the app's metrics (``create_app``'s app).
    ``http`` (a uvicorn protocol class) picks the parser; default: httptools where it
    is installed, else h11."""
    state = getattr(getattr(app, "state", None), "yomiage", None)
    dropped = state.metrics.send_timeouts.inc if state is not None else None
    protocol = guarded_protocol(
        config.header_timeout, config.max_connections, config.send_timeout, dropped,
        max_head_bytes=config.max_head_bytes, base=kwargs.pop("http", None),
    )  # fmt: skip
    return uvicorn.Config(
        app, http=protocol, h11_max_incomplete_event_size=config.max_head_bytes, **kwargs
    )


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self._state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._state.loop
        if loop is not None and not self._state.shutting_down:
            loop.call_soon_threadsafe(self._state.begin_shutdown)
        super().handle_exit(sig, frame)
