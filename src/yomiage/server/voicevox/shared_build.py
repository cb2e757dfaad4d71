"""A result built on a thread and shared by the requests that ask for it at once.

``GET /aivm_models`` answers with every installed voice's manifest, icons and
voice samples included: tens of MB for a few voices (AivisSpeech's shape repeats
parts of each). Built and encoded on the event loop, four listings at once of a
file with large icons stalled ``/health`` for 3.4 s and took 950 MB. A
:class:`SharedBuild` builds on a worker thread, one build at a time: a request
that arrives while one runs, with nothing changed since it began, waits for it
and gets the same bytes. A change (:meth:`SharedBuild.changed`) makes the next
request build anew, so no answer predates a change that ended before it asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedBuild(Generic[T]):
    """``build()`` run on a thread for the requests that await :meth:`get` together.

    Used on the event loop only (no lock: nothing else touches it)."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._generation = 0
        self._running: tuple[int, asyncio.Future[T]] | None = None

    def changed(self) -> None:
        """What the build reads changed: a build under way is not shared any more."""
        self._generation += 1

    async def get(self) -> T:
        running = self._running
        if running is None or running[0] != self._generation:
            future = asyncio.ensure_future(asyncio.to_thread(self._build))
            running = self._running = (self._generation, future)
            future.add_done_callback(lambda _: self._finished(running))
        # shield: one client leaving does not cancel the build the others wait for
        return await asyncio.shield(running[1])

    def _finished(self, running: tuple[int, asyncio.Future[T]]) -> None:
        if self._running is running:
            self._running = None
        if not running[1].cancelled():
            running[1].exception()  # retrieved: one raised to no waiter is not logged
