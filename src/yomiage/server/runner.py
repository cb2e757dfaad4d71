"""uvicorn, told when a stop begins.

uvicorn stops accepting, lets requests in flight finish (up to its graceful
timeout) and then cancels the rest: a request still waiting in the queue
would get nothing. :class:`Server` tells the app first, so queued requests
are answered 503 with ``Retry-After`` at once.
"""

from __future__ import annotations

from types import FrameType

import uvicorn

from yomiage.server.state import ServerState


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self._state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._state.loop
        if loop is not None and not self._state.shutting_down:
            loop.call_soon_threadsafe(self._state.begin_shutdown)
        super().handle_exit(sig, frame)
