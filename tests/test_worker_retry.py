"""A call that the dead worker never began is sent to the next one; one it began is not.

The race these pin flaked ``test_serve_survives_sigsegv_in_its_worker``: a request sent
to a worker that had just died, before the parent's reader saw it go, failed with 500
``worker_crashed`` although the child never saw it. Here the window is held open on
purpose (the worker is killed just before the call is sent, and the reader is held
until the call has failed on it), so nothing depends on timing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import pytest

from tests import crashing_service

pytest.importorskip("fastapi")

from yomiage.options import SynthesisOptions
from yomiage.server.engine.service import EngineRequest
from yomiage.server.engine.worker import WorkerCrashed, WorkerService
from yomiage.server.engine.worker_calls import (
    Call,
    CallNotStarted,
    Generation,
    WorkerHung,
)

pytestmark = pytest.mark.server

GUARD = 60.0  # how long a test waits for what must happen before it calls it a hang
TEXT = "こんにちは。"


@pytest.fixture(scope="module")
def worker(test_voice: Path) -> Iterator[WorkerService]:
    service = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    yield service
    service.close()


@pytest.fixture
def ready(worker: WorkerService) -> WorkerService:
    """The worker, with a ready child (the test before may have killed the last one)."""
    crashing_service.wait_until_restarted(worker, None)
    return worker


def _kill(generation: Generation) -> None:
    """SIGKILL the child and wait until it is gone (its pipe closed), without reaping it."""
    os.kill(generation.process.pid, signal.SIGKILL)
    assert wait([generation.process.sentinel], GUARD), "the worker did not die"


def _until_stopped(pid: int) -> None:
    """Until SIGSTOP has stopped ``pid`` (where /proc shows it; elsewhere a no-op)."""
    stat = Path(f"/proc/{pid}/stat")
    end = time.monotonic() + GUARD
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in "tT":
        assert time.monotonic() < end, "the worker did not stop"
        time.sleep(0.01)


Sent = list[tuple[int, str, BaseException | None]]  # (generation, op, what it raised)


def _spy(
    worker: WorkerService,
    monkeypatch: pytest.MonkeyPatch,
    before: Callable[[Generation, str], None] | None = None,
    failed: Callable[[], None] | None = None,
) -> Sent:
    """Record each call sent to the worker; ``before(generation, op)`` runs ahead of each,
    ``failed()`` after each that fails (before its caller sees the error)."""
    call = worker.supervisor.call
    sent: Sent = []

    def spied(generation: Generation, op: str, *args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before(generation, op)
        try:
            value = call(generation, op, *args, **kwargs)
        except BaseException as exc:
            sent.append((generation.number, op, exc))
            if failed is not None:
                failed()
            raise
        sent.append((generation.number, op, None))
        return value

    monkeypatch.setattr(worker.supervisor, "call", spied)
    return sent


@pytest.fixture
def dies_unseen(
    worker: WorkerService, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], Sent]]:
    """``dies_unseen(op)``: kill the worker just before the first ``op`` call is sent to it,
    and hold its reader, once it has seen the pipe close, until that call has failed on
    the dead worker: the race window, held open. Returns the calls sent, as they end."""
    # The reader's own step (private): only a test holds it open.
    lost, closed, failed = worker.supervisor._lost, threading.Event(), threading.Event()

    def held(generation: Generation) -> None:
        closed.set()
        failed.wait(GUARD)  # bounded: a failing test must not leave the worker unrestarted
        lost(generation)

    def arrange(op: str) -> Sent:
        def kill_first(generation: Generation, name: str) -> None:
            if name == op and not killed:
                killed.append(generation)
                # Its pipe closes a moment after the process is gone (the kernel releases
                # it late): wait for the reader to see it, not for the process.
                os.kill(generation.process.pid, signal.SIGKILL)
                assert closed.wait(GUARD), "the worker's pipe did not close"
                assert worker.pid == generation.process.pid  # it is still the one handed out

        killed: list[Generation] = []
        monkeypatch.setattr(worker.supervisor, "_lost", held)
        return _spy(worker, monkeypatch, before=kill_first, failed=failed.set)

    yield arrange
    failed.set()  # a failed test leaves no reader held


def test_a_call_sent_to_a_worker_that_just_died_runs_on_the_next_one(
    ready: WorkerService, dies_unseen: Callable[[str], Sent]
) -> None:
    """It failed with WorkerCrashed (500 worker_crashed), though the child never saw it."""
    worker = ready
    crashes, number = worker.crashes, worker.supervisor.current().number
    sent = dies_unseen("read")
    assert len(worker.read("tiny", TEXT, SynthesisOptions())) == 1
    [(first, _, failed), (second, _, ok)] = sent
    assert first == number and isinstance(failed, CallNotStarted) and ok is None
    assert second > number  # once more, on the restarted worker
    assert worker.crashes == crashes + 1  # the death still counts


class _KillsAfterSending:
    """A pipe end that kills the (stopped) child once ``op`` is in the pipe: sent, never read."""

    def __init__(self, generation: Generation, op: str) -> None:
        self._generation, self._conn, self._op = generation, generation.conn, op

    def send(self, message: Any) -> None:
        self._conn.send(message)
        if message[1] == self._op:
            _kill(self._generation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_call_in_the_pipe_of_a_worker_that_dies_runs_on_the_next_one(
    ready: WorkerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sent while the child was alive (stopped, so it cannot read it), then it died."""
    worker = ready
    generation = worker.supervisor.current()
    sent = _spy(worker, monkeypatch)
    os.kill(generation.process.pid, signal.SIGSTOP)
    try:
        _until_stopped(generation.process.pid)
        monkeypatch.setattr(generation, "conn", _KillsAfterSending(generation, "read"))
        readings = worker.read("tiny", TEXT, SynthesisOptions())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(generation.process.pid, signal.SIGCONT)
    assert len(readings) == 1
    [(first, _, failed), (second, _, ok)] = sent
    assert first == generation.number and isinstance(failed, CallNotStarted)
    assert second > first and ok is None


def test_a_stream_whose_first_step_met_a_dead_worker_starts_over_on_the_next(
    ready: WorkerService, dies_unseen: Callable[[str], Sent]
) -> None:
    """Opened in one worker, which died before it began the first step: no audio was made,
    so the stream opens again in the next worker and plays in full."""
    worker = ready
    sent = dies_unseen("next")
    source = worker.open(EngineRequest("tiny", TEXT, SynthesisOptions()))
    chunks = []
    try:
        while (chunk := source.next()) is not None:
            chunks.append(chunk)
    finally:
        source.close()
    assert chunks and sum(len(c.samples) for c in chunks) > 0
    ops = [(op, exc is None) for _, op, exc in sent]
    assert ops[:4] == [("open", True), ("next", False), ("open", True), ("next", True)]
    assert isinstance(sent[1][2], CallNotStarted) and sent[2][0] > sent[1][0]


def test_a_call_the_worker_began_and_died_in_is_not_sent_again(
    ready: WorkerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input that crashes the worker must not crash the next one too (a crash loop)."""
    worker = ready
    pid, crashes, restarts = worker.pid, worker.crashes, worker.restarts
    sent = _spy(worker, monkeypatch)
    source = worker.open(EngineRequest("tiny", crashing_service.CRASH, SynthesisOptions()))
    with pytest.raises(WorkerCrashed) as crashed:
        source.next()
    assert not isinstance(crashed.value, CallNotStarted)
    assert [op for _, op, _ in sent] == ["open", "next"]  # sent once, never again
    source.close()
    crashing_service.wait_until_restarted(worker, pid)
    assert worker.crashes == crashes + 1 and worker.restarts == restarts + 1


def test_only_a_call_the_child_never_began_may_go_to_the_next_one() -> None:
    generation = Generation(1, conn=None, process=None)  # type: ignore[arg-type]
    began = Call(started=True)
    assert type(generation.failure(began, "killed by SIGSEGV")) is WorkerCrashed
    assert type(generation.failure(Call(), "killed by SIGSEGV")) is CallNotStarted
    generation.hung = "stopped answering"
    assert type(generation.failure(Call(), "killed by SIGKILL")) is WorkerHung
