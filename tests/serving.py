"""The real server on loopback for tests: uvicorn in a thread, on a free port."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from yomiage import TTS
from yomiage.server import ServerConfig, create_app


class RunningServer:
    def __init__(self, server: uvicorn.Server, thread: threading.Thread, app: Any) -> None:
        self.server = server
        self.thread = thread
        self.app = app
        sockets = server.servers[0].sockets
        self.port = int(sockets[0].getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> Any:
        return self.app.state.yomiage

    def client(self, timeout: float = 60, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout, **kwargs)

    def metric(self, name: str) -> float:
        """One unlabelled sample from /metrics."""
        headers = {}
        if self.state.config.api_key:
            headers["Authorization"] = f"Bearer {self.state.config.api_key}"
        text = httpx.get(f"{self.url}/metrics", headers=headers, timeout=10).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def wait_idle(self, timeout: float = 20.0) -> None:
        """Until no request holds a slot (the in-flight gauge is 0)."""
        end = time.monotonic() + timeout
        while self.metric("yomiage_in_flight_requests") != 0:
            if time.monotonic() > end:
                raise TimeoutError("requests still in flight")
            time.sleep(0.02)


@contextmanager
def serve(tts: TTS, config: ServerConfig | None = None) -> Iterator[RunningServer]:
    app = create_app(tts, config or ServerConfig(warmup=False))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > end:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield RunningServer(server, thread, app)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def first_style(server: RunningServer) -> int:
    """The id of the first style ``GET /speakers`` lists (VOICEVOX routes)."""
    with server.client() as http:
        style: int = http.get("/speakers").json()[0]["styles"][0]["id"]
        return style


def audio_query(server: RunningServer, speaker: int, text: str) -> dict[str, Any]:
    """A fresh ``POST /audio_query`` body for ``text`` (VOICEVOX routes)."""
    with server.client() as http:
        made = http.post("/audio_query", params={"speaker": speaker, "text": text})
        assert made.status_code == 200, made.text
        body: dict[str, Any] = made.json()
        return body


def with_voicevox_client(server: RunningServer, work: Any) -> Any:
    """``await work(client)`` with voicevox-client's own Client on the server."""
    import asyncio

    import voicevox

    async def main() -> Any:
        async with voicevox.Client(base_url=server.url) as client:
            return await work(client)

    return asyncio.run(main())


def hold_until_cancelled(monkeypatch: Any) -> tuple[threading.Event, threading.Event]:
    """Make every engine source stand for a long synthesis: its first ``next`` sets the
    first event returned, then waits until the source is cancelled (as a client that
    leaves makes the server do: the second event) and raises
    :class:`~yomiage.errors.Cancelled`."""
    from yomiage.errors import Cancelled
    from yomiage.server.engine.service import LocalChunkSource

    started, cancelled = threading.Event(), threading.Event()

    def next_until_cancelled(self: LocalChunkSource) -> None:
        started.set()
        cancelled.wait(60)
        raise Cancelled("the synthesis was cancelled")

    monkeypatch.setattr(LocalChunkSource, "next", next_until_cancelled)
    monkeypatch.setattr(LocalChunkSource, "cancel", lambda self: cancelled.set())
    return started, cancelled


def listening_url(process: subprocess.Popen[str]) -> str:
    """The URL ``yomiage serve`` prints once it listens (after a line saying it loads)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
        if found:
            return found.group(1)
    raise AssertionError("yomiage serve stopped before listening: " + "".join(seen))
