"""The engine's compute gate: at most N backend calls at once, shared fairly between requests.

Each backend call already uses every intra-op thread, so running more at a
time only makes threads fight for cores; waiting callers queue here instead.
Requests interleave call by call (a BERT batch, an encoder call, a decoder
window), and the gate decides who goes next by start-time fair queueing: each
request (a :class:`Share`) carries the compute time it has used, a call is
tagged with ``max(now's virtual time, its request's finish tag)``, and a freed
slot goes to the waiting call with the smallest tag (the earliest asked on a
tie). So every active request gets an equal share of the slots, whatever
else is running: a one-sentence request that arrives while a book is read
starts at its next call and ends in about its own compute times the number
of requests active, instead of waiting for the book (a plain semaphore let
the thread that just released a slot take it again, so a request making
several calls in a row held the engine).

A request asks for its next call only after its last one returned, when the
slot has already gone to another; it keeps its own finish tag as long as it
asks again before the slot changes hands once more (it is still busy), so
its turn is not lost to the call that overtook it. A new request, or one
that paused (a client reading slowly), comes in at the current virtual time:
it earns no credit for the time it was away and cannot take the slot for a
burst of catching up.

A request may carry a cancel event: it then stops before its next call, also
while it waits for a slot (checked every :data:`_CANCEL_POLL_SECONDS`).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from yomiage.errors import Cancelled

T = TypeVar("T")
_CANCEL_POLL_SECONDS = 0.05


class Share:
    """One request's account at the gate: its finish tag (virtual seconds of compute it
    has had) and the gate's hand-off count when its last call ended. Made per request
    (:class:`GatedCalls` makes one); read and written under the gate's lock."""

    __slots__ = ("finish", "left_at")

    def __init__(self) -> None:
        self.finish = 0.0
        self.left_at = -1  # no call yet


@dataclass(order=True)
class _Waiter:
    tag: float
    order: int
    granted: threading.Event = field(compare=False, default_factory=threading.Event)


class ComputeGate:
    """At most ``slots`` backend calls at once, handed out fairly (see the module docstring).

    ``clock`` measures each call's compute (seconds; tests pass a stand-in).
    """

    def __init__(self, slots: int = 1, *, clock: Callable[[], float] = time.perf_counter) -> None:
        if slots < 1:
            raise ValueError("a compute gate needs at least one slot")
        self.slots = slots
        self._clock = clock
        self._lock = threading.Lock()
        self._free = slots
        self._queue: list[_Waiter] = []  # a heap by (tag, order)
        self._order = itertools.count()
        self._virtual = 0.0  # the largest tag handed a slot so far
        self._handoffs = 0  # calls given a slot so far

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot now."""
        with self._lock:
            return len(self._queue)

    @property
    def running(self) -> int:
        """Calls holding a slot now."""
        with self._lock:
            return self.slots - self._free

    def run(
        self,
        fn: Callable[..., T],
        *args: Any,
        cancel: threading.Event | None = None,
        share: Share | None = None,
    ) -> T:
        """``fn(*args)`` in a slot, its turn set by ``share`` (None: a request of one call);
        :class:`Cancelled` as soon as ``cancel`` is set."""
        share = Share() if share is None else share
        tag = self._enter(share, cancel)
        started = self._clock()
        try:
            if cancel is not None and cancel.is_set():
                raise Cancelled("the synthesis was cancelled")
            return fn(*args)
        finally:
            self._leave(share, tag, self._clock() - started)

    def _enter(self, share: Share, cancel: threading.Event | None) -> float:
        """Wait for a slot; the call's tag once it holds one."""
        with self._lock:
            if share.left_at == self._handoffs:  # back before anyone else got a slot
                tag = share.finish
            else:
                tag = max(self._virtual, share.finish)
            if self._free and not self._queue:
                self._free -= 1
                self._handoffs += 1
                self._virtual = max(self._virtual, tag)
                return tag
            waiter = _Waiter(tag, next(self._order))
            heapq.heappush(self._queue, waiter)
        if cancel is None:
            waiter.granted.wait()
            return tag
        while not waiter.granted.wait(_CANCEL_POLL_SECONDS):
            if cancel.is_set():
                with self._lock:
                    if not waiter.granted.is_set():
                        self._queue.remove(waiter)
                        heapq.heapify(self._queue)
                        raise Cancelled("the synthesis was cancelled")
                break  # granted meanwhile: run() sees the cancel and frees the slot
        return tag

    def _leave(self, share: Share, tag: float, spent: float) -> None:
        """Account the call's compute to its request and hand the slot on."""
        with self._lock:
            share.finish = tag + max(spent, 0.0)
            if self._queue:
                waiter = heapq.heappop(self._queue)
                self._handoffs += 1
                self._virtual = max(self._virtual, waiter.tag)
                waiter.granted.set()
            else:
                self._free += 1
            share.left_at = self._handoffs


@dataclass(frozen=True)
class GatedCalls:
    """One request's way to the backend: the engine's gate, the request's cancel event and
    its share of the gate (every call of one request counts against the same share)."""

    gate: ComputeGate
    cancel: threading.Event | None = None
    share: Share = field(default_factory=Share, compare=False)

    def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return self.gate.run(fn, *args, cancel=self.cancel, share=self.share)
