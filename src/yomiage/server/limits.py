"""Admission control: a fixed number of requests synthesize, a bounded number wait.

A request beyond both is refused at once (429 with ``Retry-After``), and one
that waits longer than the queue timeout gives up (503), so load can never
pile up without bound. The requests admitted share the engine call by call
(:mod:`yomiage.synthesis.gate`), so the limit bounds what the server holds and
how many take turns, not who gets the compute: a short request admitted beside
long ones is answered in about its own compute times the requests running.
Used from the event loop only.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class Rejected(Exception):
    """No slot: ``reason`` is ``queue_full``, ``queue_timeout`` or ``shutting_down``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class AdmissionGate:
    """``limit`` slots; at most ``max_queue`` wait, each at most ``timeout`` seconds."""

    def __init__(self, limit: int, max_queue: int, timeout: float) -> None:
        if limit < 1 or max_queue < 0 or timeout <= 0:
            raise ValueError("need limit >= 1, max_queue >= 0 and a positive timeout")
        self.limit = limit
        self.max_queue = max_queue
        self.timeout = timeout
        self._slots = asyncio.Semaphore(limit)
        self._closed: asyncio.Event | None = None
        self._closed_reason = ""
        self.active = 0
        self.waiting = 0

    def close(self, reason: str) -> None:
        """Refuse every waiting and future request (``shutting_down``); running ones go on."""
        self._closed_reason = reason
        self._closed_event().set()

    async def acquire(self) -> Slot:
        closed = self._closed_event()
        if closed.is_set():
            raise Rejected("shutting_down", self._closed_reason)
        if self.active + self.waiting >= self.limit + self.max_queue:
            raise Rejected(
                "queue_full",
                f"the server is busy ({self.active} requests running, {self.waiting} waiting); "
                "retry later",
            )
        self.waiting += 1
        slot = asyncio.ensure_future(self._slots.acquire())
        shutdown = asyncio.ensure_future(closed.wait())
        try:
            await asyncio.wait(
                {slot, shutdown}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self.waiting -= 1
            shutdown.cancel()
            slot.cancel()  # no effect once it holds the slot
        got = slot.done() and not slot.cancelled() and slot.exception() is None
        if got and not closed.is_set():
            self.active += 1
            return Slot(self)
        if got:
            self._slots.release()
        if closed.is_set():
            raise Rejected("shutting_down", self._closed_reason)
        raise Rejected("queue_timeout", f"no synthesis slot became free within {self.timeout:g} s")

    def _closed_event(self) -> asyncio.Event:
        if self._closed is None:
            self._closed = asyncio.Event()
        return self._closed

    def _release(self) -> None:
        self.active -= 1
        self._slots.release()


class Slot:
    """One held slot; :meth:`release` is idempotent so every exit path may call it."""

    def __init__(self, gate: AdmissionGate) -> None:
        self._gate: AdmissionGate | None = gate

    def release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate._release()

    async def __aenter__(self) -> Slot:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
