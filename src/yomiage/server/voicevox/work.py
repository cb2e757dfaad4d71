"""One VOICEVOX request's work: in the server's threads, one slot, stopped when its client leaves.

A VOICEVOX request runs several blocking steps (reading the kana, synthesis,
the WAV's post-processing, the zip of ``/multi_synthesis``). Each runs in the
app's worker threads, never on the event loop, so ``/health`` and other
requests are answered meanwhile; the whole request holds one admission slot.
While a step runs the client is watched, as ``/v1/audio/speech`` does: when it
leaves, the step in progress is told to stop (``cancel``, which post-processing
checks between blocks), waited for (the slot then means compute still
running), no later step starts, and the request ends as 499.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from fastapi import Request

from yomiage.errors import Cancelled
from yomiage.server.limits import Slot
from yomiage.server.speech import client_left
from yomiage.server.speech_routes import admit
from yomiage.server.state import ServerState
from yomiage.server.voicevox.http import VoxError

log = logging.getLogger(__name__)
T = TypeVar("T")


class VoxWork:
    """``async with VoxWork(state, request) as work:`` then ``await work.run(fn)`` per step.

    Entering waits for a slot (429/503 as the speech routes); the request's body
    must have been read already, since the client is watched through ``receive``.
    """

    def __init__(self, state: ServerState, request: Request) -> None:
        self._state = state
        self._request = request
        self.cancel = threading.Event()  # set once the client has left
        self._on_cancel: list[Callable[[], None]] = []
        self._cancel_lock = threading.Lock()
        self._slot: Slot | None = None
        self._watch: asyncio.Future[None] | None = None

    def when_cancelled(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` (it must return at once) when the client leaves, or now if it
        has: how a step hands its synthesis stream's ``cancel`` to this request."""
        with self._cancel_lock:
            if not self.cancel.is_set():
                self._on_cancel.append(stop)
                return
        stop()

    def _stop(self) -> None:
        with self._cancel_lock:
            self.cancel.set()
            stops, self._on_cancel = self._on_cancel, []
        for stop in stops:
            stop()

    def check(self) -> None:
        """For blocking steps: raises :class:`Cancelled` once the client has left."""
        if self.cancel.is_set():
            raise Cancelled("the client left")

    async def run(self, step: Callable[[], T]) -> T:
        """``step()`` in the server's threads; 499 if the client leaves meanwhile (after
        the step has stopped)."""
        if self._watch is None:
            raise RuntimeError("VoxWork.run outside its async with")
        if self._watch.done():
            raise self._left()
        loop = asyncio.get_running_loop()
        doing = loop.run_in_executor(self._state.executor, step)
        either: list[asyncio.Future[Any]] = [doing, self._watch]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if doing.done():
            return doing.result()
        self._stop()
        await asyncio.gather(doing, return_exceptions=True)  # the thread is done with it
        raise self._left()

    def _left(self) -> VoxError:
        self._stop()
        return VoxError(499, "the client left; the work was stopped")

    async def __aenter__(self) -> VoxWork:
        self._slot = await admit(self._state, self._request)
        self._watch = asyncio.ensure_future(client_left(self._request.receive))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        if self._slot is not None:
            self._slot.release()
        if isinstance(exc, VoxError) and exc.status == 499:
            self._state.metrics.disconnects.inc()
            log.info("client left %s; its work was stopped", self._request.url.path)
