"""Free memory given back when the server falls idle.

A request's body, its parsed JSON and its chunks are freed when it ends, but glibc
keeps freed heap pages mapped: after a burst of 180 large VOICEVOX queries the
HTTP process stayed 55 MB above where it began, and the prober's fuzzing left it at
363 MB (69 MB before). :class:`IdleTrim` returns them
(:func:`~yomiage.runtime.engines.memory.release_free_memory`: ``malloc_trim``; 21 of those
55 MB) each time the last request in flight ends, at most once per
:data:`EVERY_S`, on a thread of its own, never on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from yomiage.runtime.engines.memory import release_free_memory

EVERY_S = 1.0  # a server answering /health each second trims once a second at most


class IdleTrim:
    """Call it (on the event loop) when no request is in flight."""

    def __init__(
        self,
        trim: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trim = trim
        self._clock = clock
        self._last = float("-inf")
        self._running = False

    def __call__(self) -> None:
        now = self._clock()
        if self._running or now - self._last < EVERY_S:
            return
        self._last, self._running = now, True
        trim = self._trim or release_free_memory
        done = asyncio.get_running_loop().run_in_executor(None, trim)
        done.add_done_callback(self._finished)

    def _finished(self, done: asyncio.Future[None]) -> None:
        self._running = False
        if not done.cancelled():
            done.exception()  # a failed trim is no request's concern; retrieved here
