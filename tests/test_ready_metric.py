"""``yomiage_ready`` says what ``/ready`` says (issue 31, item 14, R15).

The gauge was set to 1 at start and to 0 at shutdown only, so it stayed 1
while a worker was stopped, hung or restarting and ``/ready`` answered 503:
a scraper saw a ready server that a load balancer had taken out. It is now
read when scraped, from the same state ``/ready`` answers from.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from tests import crashing_service  # noqa: E402
from tests.serving import RunningServer, serve  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402
from yomiage.server.engine.liveness import Liveness  # noqa: E402
from yomiage.server.engine.service import LocalService  # noqa: E402
from yomiage.server.engine.worker import WorkerService  # noqa: E402

pytestmark = pytest.mark.server
GUARD = 30.0  # how long a test waits for what must happen before it calls it a hang


def _until(condition: Any, what: str) -> None:
    end = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < end, f"{what} did not happen"
        time.sleep(0.02)


def _agree(server: RunningServer, expected: int) -> None:
    """/ready's status and the gauge, read one after the other, say the same."""
    status = httpx.get(f"{server.url}/ready", timeout=10).status_code
    assert status == (200 if expected else 503)
    assert server.metric("yomiage_ready") == expected


def test_the_ready_gauge_follows_ready_while_the_engine_is_unavailable(
    engine: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve(engine, ServerConfig(warmup=False)) as server:
        _agree(server, 1)
        monkeypatch.setattr(LocalService, "available", property(lambda self: False))
        _agree(server, 0)
        monkeypatch.undo()
        _agree(server, 1)
        server.state.loop.call_soon_threadsafe(server.state.begin_shutdown)
        _until(lambda: server.state.shutting_down, "the shutdown")
        _agree(server, 0)


def test_the_ready_gauge_is_0_until_warm_up_ends(engine: TTS) -> None:
    """Before warm-up ends (here: it failed) /ready is 503, and so is the gauge 0."""

    class FailingWarmUp(LocalService):
        def warm(self, voice: str) -> None:
            raise RuntimeError("no warm-up today")

    with serve(FailingWarmUp(engine), ServerConfig(warmup=True)) as server:  # type: ignore[arg-type]
        _until(lambda: server.state.ready_error is not None, "the warm-up failing")
        _agree(server, 0)


def test_the_ready_gauge_is_0_while_the_worker_is_stopped(test_voice: Path) -> None:
    """R15: SIGSTOP of the worker: /ready 503 at 6-10 s, yomiage_ready 1 throughout."""
    live = Liveness(call_timeout=600.0, heartbeat_interval=0.05, heartbeat_timeout=0.2,
                    silent_timeout=600.0)  # fmt: skip
    worker = WorkerService(
        functools.partial(crashing_service.build_warm, str(test_voice)), liveness=live
    )
    try:
        with serve(worker, ServerConfig(warmup=False)) as server:  # type: ignore[arg-type]
            _agree(server, 1)
            pid = worker.pid
            os.kill(pid, signal.SIGSTOP)
            try:
                _until(
                    lambda: httpx.get(f"{server.url}/ready", timeout=10).status_code == 503,
                    "/ready turning 503",
                )
                assert server.metric("yomiage_ready") == 0
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            _until(lambda: server.metric("yomiage_ready") == 1, "the gauge turning 1 again")
    finally:
        worker.close()
