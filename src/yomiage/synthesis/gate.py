"""The engine's compute gate: at most N backend calls at once, whoever asks.

Each backend call already uses every intra-op thread, so running more at a
time only makes threads fight for cores; waiting callers queue here instead,
and concurrent requests interleave call by call (window by window). A request
may carry a cancel event: it then stops before its next call, also while it
waits for a slot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from yomiage.errors import Cancelled

T = TypeVar("T")
_WAIT_POLL_SECONDS = 0.05


class ComputeGate:
    """At most ``slots`` backend calls at once."""

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError("a compute gate needs at least one slot")
        self._slots = threading.BoundedSemaphore(slots)

    def run(self, fn: Callable[..., T], *args: Any, cancel: threading.Event | None = None) -> T:
        """``fn(*args)`` in a slot; :class:`Cancelled` as soon as ``cancel`` is set."""
        if cancel is None:
            with self._slots:
                return fn(*args)
        while not self._slots.acquire(timeout=_WAIT_POLL_SECONDS):
            if cancel.is_set():
                raise Cancelled("the synthesis was cancelled")
        try:
            if cancel.is_set():
                raise Cancelled("the synthesis was cancelled")
            return fn(*args)
        finally:
            self._slots.release()


@dataclass(frozen=True)
class GatedCalls:
    """One request's way to the backend: the engine's gate and the request's cancel event."""

    gate: ComputeGate
    cancel: threading.Event | None = None

    def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return self.gate.run(fn, *args, cancel=self.cancel)
