"""The compute gate shares its slot between requests call by call (issue 49, item 8).

Each request runs in a thread of its own; each of its calls blocks until the test
lets it finish and then advances a stand-in clock by the call's cost, so the order
in which the gate hands out its slot is decided by the gate alone, never by timing.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from yomiage.errors import Cancelled
from yomiage.synthesis.gate import ComputeGate, GatedCalls

GUARD = 20.0  # seconds before a stuck test fails instead of hanging


def _until(condition: object, what: str) -> None:
    end = time.monotonic() + GUARD
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < end, f"stuck waiting for {what}"
        time.sleep(0.001)


class _Engine:
    """One slot, and calls that finish one at a time when :meth:`step` says so."""

    def __init__(self) -> None:
        self.now = 0.0
        self.gate = ComputeGate(1, clock=lambda: self.now)
        self.order: list[str] = []  # each call's name as it got the slot
        self.left: dict[str, int] = {}  # calls each request has still to finish
        self.paused: set[str] = set()  # requests away from the gate (see request)
        self.finished = 0
        self._go = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []

    def request(
        self, name: str, calls: int, cost: float, *, pause_after: int = 0,
        resume: threading.Event | None = None,
    ) -> None:  # fmt: skip
        """A request of ``calls`` backend calls, each ``cost`` seconds of compute; with
        ``pause_after``, it asks for no call after that one until ``resume`` is set."""
        self.left[name] = calls
        gated = GatedCalls(self.gate)

        def call(index: int) -> None:
            self.order.append(f"{name}{index}")
            assert self._go.acquire(timeout=GUARD), "the test never let the call finish"
            self.now += cost
            self.left[name] -= 1
            if index == pause_after:
                self.paused.add(name)
            self.finished += 1

        def run() -> None:
            for index in range(1, calls + 1):
                if index == pause_after + 1 and resume is not None:
                    assert resume.wait(GUARD)
                    self.paused.discard(name)
                gated(call, index)

        thread = threading.Thread(target=run, daemon=True)
        self._threads.append(thread)
        thread.start()

    def settle(self) -> None:
        """Until each request with calls left is in the gate: one running, the rest queued."""
        active = sum(1 for name, n in self.left.items() if n > 0 and name not in self.paused)
        if active == 0:
            return
        _until(
            lambda: len(self.order) - self.finished == 1 and self.gate.waiting == active - 1,
            f"{active} requests in the gate (so far {self.order})",
        )

    def step(self) -> None:
        """Let the running call finish."""
        finished = self.finished
        self._go.release()
        _until(lambda: self.finished > finished, "the call to finish")

    def done(self) -> bool:
        return all(n == 0 for n in self.left.values())

    def join(self) -> None:
        for thread in self._threads:
            thread.join(GUARD)


def test_a_short_request_is_served_before_the_rest_of_long_ones() -> None:
    """Two long requests take turns on the one slot; a short one that comes in the
    middle gets every other call until it is done, ahead of the calls the long ones
    still have (first come, first served would put it behind them each round)."""
    engine = _Engine()
    engine.request("A", calls=8, cost=3.0)
    engine.settle()
    engine.request("B", calls=8, cost=3.0)
    for _ in range(3):  # A1, B1, A2 finish
        engine.settle()
        engine.step()
    engine.request("S", calls=3, cost=1.0)
    while not engine.done():
        engine.settle()
        engine.step()
    engine.join()
    order = engine.order
    assert order[:4] == ["A1", "B1", "A2", "B2"]
    # between two of the short request's calls at most one long call runs, so the
    # short one ends before either long one makes its fourth call
    shorts = [order.index(f"S{i}") for i in (1, 2, 3)]
    assert all(b - a == 2 for a, b in itertools.pairwise(shorts)), order
    assert shorts[-1] < min(order.index("A4"), order.index("B4")), order


def test_two_equal_requests_alternate() -> None:
    engine = _Engine()
    engine.request("A", calls=4, cost=1.0)
    engine.settle()
    engine.request("B", calls=4, cost=1.0)
    while not engine.done():
        engine.settle()
        engine.step()
    engine.join()
    assert engine.order == ["A1", "B1", "A2", "B2", "A3", "B3", "A4", "B4"]


def test_a_new_request_starts_level_with_the_others() -> None:
    """A request that arrives later is not owed the compute the others had before it:
    it takes turns with them at once, it does not run alone until it has caught up."""
    engine = _Engine()
    engine.request("A", calls=6, cost=1.0)
    for _ in range(4):  # A runs alone: its tags reach 4
        engine.settle()
        engine.step()
    engine.request("B", calls=3, cost=1.0)  # arrives with no service so far
    while not engine.done():
        engine.settle()
        engine.step()
    engine.join()
    assert engine.order == ["A1", "A2", "A3", "A4", "A5", "B1", "A6", "B2", "B3"]


def test_a_request_that_paused_gets_no_credit_for_it() -> None:
    """A request that made no call for a while (its client read slowly) comes back at
    the others' pace: it does not take the slot for a burst of catching up."""
    engine = _Engine()
    resume = threading.Event()
    engine.request("A", calls=8, cost=1.0)
    engine.settle()
    engine.request("B", calls=6, cost=1.0, pause_after=1, resume=resume)
    for _ in range(5):  # A1, B1 (B pauses), then A2, A3, A4 alone
        engine.settle()
        engine.step()
    resume.set()
    _until(lambda: engine.gate.waiting == 1, "B to come back to the gate")
    while not engine.done():
        engine.settle()
        engine.step()
    engine.join()
    assert engine.order == [
        "A1", "B1", "A2", "A3", "A4", "A5", "B2", "A6", "B3", "A7", "B4", "A8", "B5", "B6",
    ]  # fmt: skip


def test_a_cancelled_waiter_leaves_the_queue_and_the_slot_goes_on() -> None:
    gate = ComputeGate(1)
    hold, held = threading.Event(), threading.Event()
    cancel = threading.Event()
    outcome: dict[str, object] = {}

    def holder() -> None:
        held.set()
        hold.wait(GUARD)

    def waiter() -> None:
        try:
            GatedCalls(gate, cancel)(lambda: "ran")
        except Cancelled as exc:
            outcome["waiter"] = exc

    first = threading.Thread(target=lambda: gate.run(holder), daemon=True)
    first.start()
    assert held.wait(GUARD)
    second = threading.Thread(target=waiter, daemon=True)
    second.start()
    _until(lambda: gate.waiting == 1, "the waiter to queue")
    cancel.set()
    second.join(GUARD)
    assert isinstance(outcome.get("waiter"), Cancelled)
    assert gate.waiting == 0
    hold.set()
    first.join(GUARD)
    assert gate.run(lambda: 7) == 7  # the slot came back


def test_a_gate_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="slot"):
        ComputeGate(0)
