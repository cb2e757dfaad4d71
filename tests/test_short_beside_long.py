"""A short request is answered while long ones are being read (issue 49, item 8).

Two 5,000-character requests held both synthesis slots for 10-14 minutes and every
short request sent meanwhile got 503 after its queue timeout, counted as a server
error. Now requests share the engine call by call, and a full queue is counted as a
rejection. The long requests here are slowed by a stand-in: each decoder window of
theirs holds the engine until the test lets it go, so nothing depends on timing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from tests.serving import RunningServer, serve  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402

pytestmark = pytest.mark.server

GUARD = 60.0  # seconds before a stuck test fails instead of hanging
LONG = "今日はいい天気ですね。" * 30  # 30 decoder windows for the tiny voice
SHORT = "こんにちは。"
LONG_SEEDS = (101, 102)
STEPS = 20  # windows the long requests may finish, in all: far from their 60


class _HeldWindows:
    """The decoder windows of the requests seeded ``LONG_SEEDS`` each wait, holding the
    engine's slot, until :meth:`step` lets one finish (or :meth:`free` lets all)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.waiting = 0  # windows holding the engine until they are let go
        self._permits = 0
        self._free = False

    def install(self, monkeypatch: pytest.MonkeyPatch, tts: TTS) -> None:
        voice = type(tts.speakers["tiny"]._voice)
        real = voice.decode_windows

        def decode_windows(self: Any, encoded: Any, options: Any, rng: Any, **kw: Any) -> Any:
            windows = real(self, encoded, options, rng, **kw)
            return held._held(windows) if options.seed in LONG_SEEDS else windows

        held = self
        monkeypatch.setattr(voice, "decode_windows", decode_windows)

    def _held(self, windows: Iterator[Any]) -> Iterator[Any]:
        for window in windows:
            with self._cond:
                self.waiting += 1
                self._cond.notify_all()
                while not self._free and not self._permits:
                    self._cond.wait()
                if not self._free:
                    self._permits -= 1
                self.waiting -= 1
                self._cond.notify_all()
            yield window

    def step(self) -> None:
        """Let one held window finish; returns once it has."""
        with self._cond:
            self._permits += 1
            self._cond.notify_all()
            assert self._cond.wait_for(lambda: self._permits == 0, GUARD)

    def free(self) -> None:
        with self._cond:
            self._free = True
            self._cond.notify_all()

    def hold(self) -> None:
        """Hold the windows again (after :meth:`free`)."""
        with self._cond:
            self._free = False
            self._permits = 0


def _metrics(server: RunningServer) -> str:
    return httpx.get(f"{server.url}/metrics", timeout=10).text


def test_a_short_request_is_answered_while_long_ones_hold_the_engine(
    engine: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _HeldWindows()
    held.install(monkeypatch, engine)
    results: dict[str, httpx.Response] = {}

    def ask(name: str, path: str, body: dict[str, Any]) -> None:
        with httpx.Client(base_url=server.url, timeout=GUARD * 2) as http:
            results[name] = http.post(path, json=body)

    # The server's defaults, but a queue timeout short enough to see a wait end.
    config = ServerConfig(warmup=False, queue_timeout=5)
    with serve(engine, config) as server:
        long_ones = [
            threading.Thread(target=ask, daemon=True, args=("tts", "/tts", {
                "text": LONG, "seed": LONG_SEEDS[0], "stream": False})),
            threading.Thread(target=ask, daemon=True, args=("openai", "/v1/audio/speech", {
                "model": "tts-1", "voice": "tiny", "input": LONG, "seed": LONG_SEEDS[1],
                "response_format": "wav", "stream": False})),
        ]  # fmt: skip
        for thread in long_ones:
            thread.start()
        try:
            end = time.monotonic() + GUARD
            while "yomiage_in_flight_requests 2" not in _metrics(server) or not held.waiting:
                assert time.monotonic() < end, "the long requests did not start"
                time.sleep(0.01)
            short = threading.Thread(target=ask, args=("short", "/tts", {"text": SHORT}))
            short.start()
            steps = 0
            while short.is_alive():
                if held.waiting and steps < STEPS:
                    held.step()  # the engine's slot is handed on: the short request's turn
                    steps += 1
                short.join(0.01)
                assert time.monotonic() < end, f"the short request did not end ({steps} steps)"
            assert results["short"].status_code == 200, results["short"].text
            # the long requests are still being made: the short one did not wait for them
            assert "yomiage_in_flight_requests 2" in _metrics(server)
            assert not any(r in results for r in ("tts", "openai"))
        finally:
            held.free()
            for thread in long_ones:
                thread.join(GUARD)
    assert results["tts"].status_code == results["openai"].status_code == 200
    assert steps < STEPS


@contextmanager
def _engine_held(engine: TTS, config: ServerConfig, held: _HeldWindows) -> Iterator[RunningServer]:
    """A server whose one slot a long request holds (its windows held) until the end."""
    held.hold()
    result: dict[str, httpx.Response] = {}
    with serve(engine, config) as server:

        def hold() -> None:
            with httpx.Client(base_url=server.url, timeout=GUARD) as http:
                result["held"] = http.post("/tts", json={"text": LONG, "seed": LONG_SEEDS[0],
                                                         "stream": False})  # fmt: skip

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        end = time.monotonic() + GUARD
        while not held.waiting:
            assert time.monotonic() < end, "the long request did not start"
            time.sleep(0.01)
        try:
            yield server
        finally:
            held.free()
            holder.join(GUARD)
    assert result["held"].status_code == 200


def test_a_full_queue_is_counted_as_a_rejection_not_an_error(
    engine: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """429 ``server_busy`` and 503 ``queue_timeout`` are the load the server met, counted
    in ``yomiage_rejected_requests_total``; ``yomiage_errors_total`` is for faults (it
    counted each as a ``rate_limit_error`` or ``server_error``)."""
    held = _HeldWindows()
    held.install(monkeypatch, engine)
    full = ServerConfig(warmup=False, max_concurrency=1, max_queue=0)
    with _engine_held(engine, full, held) as server:
        refused = httpx.post(f"{server.url}/tts", json={"text": SHORT}, timeout=GUARD)
        counted = _metrics(server)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "server_busy"
    assert 'yomiage_rejected_requests_total{reason="queue_full"} 1' in counted
    assert "yomiage_errors_total{" not in counted, counted

    timing_out = ServerConfig(warmup=False, max_concurrency=1, max_queue=1, queue_timeout=0.3)
    with _engine_held(engine, timing_out, held) as server:
        waited = httpx.post(f"{server.url}/tts", json={"text": SHORT}, timeout=GUARD)
        counted = _metrics(server)
    assert waited.status_code == 503 and waited.json()["error"]["code"] == "queue_timeout"
    assert 'yomiage_rejected_requests_total{reason="queue_timeout"} 1' in counted
    assert "yomiage_errors_total{" not in counted, counted
