"""A server measures its plan only while idle (issue 48, item 1): not before it has been
quiet for a while, stopped at once by a call, resumed when quiet again, set aside for a
while after a disturbed measurement, and never again once done."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from yomiage.runtime.plan.steps import MeasureDisturbed, MeasureError, MeasureInterrupted
from yomiage.server.engine.idle_measuring import IdleMeasuring


class Measuring:
    """Stands for ``TTS.measure_plans``: records each start; ends when told, or at the
    stop (MeasureInterrupted), or with ``fail``."""

    def __init__(self, outcomes: list[object]) -> None:
        self.outcomes = outcomes  # per start: "wait" (until stopped), an exception, or a result
        self.started: list[float] = []
        self.running = threading.Event()

    def __call__(self, stop: threading.Event) -> list[str]:
        self.started.append(time.monotonic())
        outcome = self.outcomes.pop(0)
        if outcome == "wait":
            self.running.set()
            assert stop.wait(5), "a call should have stopped the measuring"
            self.running.clear()
            raise MeasureInterrupted("measuring floor stopped")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[return-value]


def test_measuring_waits_for_quiet_stops_for_a_call_and_resumes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    measuring = Measuring(["wait", ["voice"]])
    idle = IdleMeasuring(measuring, idle_s=0.2)
    begun = time.monotonic()
    idle.begin()  # a call in flight from the start: nothing is measured under it
    idle.start()
    time.sleep(0.4)
    assert measuring.started == []
    idle.end()
    assert measuring.running.wait(2)
    assert measuring.started[0] - begun >= 0.6  # 0.4 s busy, then 0.2 s quiet
    with caplog.at_level(logging.INFO):
        idle.begin()  # a request: the measuring process in hand ends at once
        time.sleep(0.3)
        assert len(measuring.started) == 1  # not again while the call runs
        idle.end()
        idle.join(3)
    assert len(measuring.started) == 2 and not measuring.outcomes
    assert measuring.started[1] - measuring.started[0] >= 0.5
    assert "paused for a request" in caplog.text
    assert "measured and kept" in caplog.text and "next start" in caplog.text
    idle.close()


def test_a_disturbed_measurement_is_tried_again_after_the_backoff() -> None:
    measuring = Measuring([MeasureDisturbed("other work"), []])
    idle = IdleMeasuring(measuring, idle_s=0.05, backoff_s=0.4).start()
    idle.join(3)
    assert len(measuring.started) == 2
    assert measuring.started[1] - measuring.started[0] >= 0.4


def test_a_failed_measurement_ends_it_and_close_ends_the_waiting() -> None:
    measuring = Measuring([MeasureError("boom")])
    idle = IdleMeasuring(measuring, idle_s=0.05).start()
    idle.join(3)
    assert len(measuring.started) == 1
    waiting = IdleMeasuring(Measuring([[]]), idle_s=60).start()
    waiting.close()
    waiting.join(3)
    assert not waiting._thread.is_alive()


def test_what_is_measured_is_taken_once_quiet_and_calls_wait_for_the_swap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The voices are loaded anew by their measured plans only with no call running, and
    a call that comes in meanwhile waits for the swap to end (never two loads at once)."""
    swapping = threading.Event()
    release = threading.Event()
    adopted: list[list[str]] = []

    def adopt(names: list[str]) -> None:
        adopted.append(names)
        swapping.set()
        assert release.wait(5)

    with caplog.at_level(logging.INFO):
        idle = IdleMeasuring(Measuring([["voice"]]), adopt=adopt, idle_s=0.1).start()
        assert swapping.wait(3)
        began = threading.Event()

        def call() -> None:
            idle.begin()
            began.set()
            idle.end()

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(0.2)
        assert not began.is_set()  # held back while the voice is swapped
        release.set()
        caller.join(3)
        assert began.is_set()
        idle.join(3)
    assert adopted == [["voice"]]
    assert "taken once the server is idle" in caplog.text
    idle.close()


def test_a_call_between_the_measuring_and_the_swap_puts_the_swap_off() -> None:
    order: list[str] = []
    measuring_done = threading.Event()
    idle_holder: list[IdleMeasuring] = []

    def measure(stop: threading.Event) -> list[str]:
        idle_holder[0].begin()  # a call arrives just as the measuring ends
        order.append("call began")
        measuring_done.set()
        return ["voice"]

    idle = IdleMeasuring(measure, adopt=lambda names: order.append("adopted"), idle_s=0.1)
    idle_holder.append(idle)
    idle.start()
    assert measuring_done.wait(3)
    time.sleep(0.3)
    assert order == ["call began"]  # not while the call runs
    order.append("call ended")
    idle.end()
    idle.join(3)
    assert order == ["call began", "call ended", "adopted"]


def test_a_swap_that_fails_is_logged_and_calls_go_on(caplog: pytest.LogCaptureFixture) -> None:
    def adopt(names: list[str]) -> None:
        raise RuntimeError("cannot load")

    idle = IdleMeasuring(Measuring([["voice"]]), adopt=adopt, idle_s=0.05).start()
    idle.join(3)
    assert "taking this machine's measured plans failed" in caplog.text
    idle.begin()  # not held back
    idle.end()
    idle.close()
