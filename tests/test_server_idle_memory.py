"""What a finished request held is given back when the server falls idle (issue 49,
item 13): the HTTP process stayed at 363 MB after fuzzing (69 MB before)."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("fastapi")

from tests.serving import serve
from yomiage import TTS
from yomiage.server import ServerConfig

pytestmark = pytest.mark.server


def test_free_memory_is_given_back_once_no_request_is_in_flight(
    engine: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yomiage.server import idle_memory

    trims: list[int] = []
    monkeypatch.setattr(idle_memory, "release_free_memory", lambda: trims.append(1))
    with serve(engine, ServerConfig(warmup=False)) as running, running.client() as http:
        assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
        end = time.monotonic() + 30
        while not trims:
            assert time.monotonic() < end, "no trim after the last request ended"
            time.sleep(0.02)


def test_an_idle_server_trims_at_most_once_a_second() -> None:
    from yomiage.server import idle_memory

    now = [100.0]
    trims: list[int] = []

    async def until(count: int) -> None:
        end = time.perf_counter() + 30
        while len(trims) < count or idle._running:
            assert time.perf_counter() < end, "the trim did not run"
            await asyncio.sleep(0.01)

    async def main() -> None:
        idle()
        await until(1)
        idle()  # the same instant: a /health probe right after the last request
        await asyncio.sleep(0.1)
        assert trims == [1]
        now[0] += idle_memory.EVERY_S
        idle()
        await until(2)

    idle = idle_memory.IdleTrim(lambda: trims.append(1), clock=lambda: now[0])
    asyncio.run(main())
