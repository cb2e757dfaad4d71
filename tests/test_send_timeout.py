"""Clients that do not read their response (issue 31, item 9, R4).

Two clients that sent ``POST /tts {"stream": true}`` with a 4 KB receive
buffer and never read held both synthesis slots for as long as they kept
their sockets (every other request: 503 after the queue timeout), and ten
that asked ``/synthesis`` for a 171 MB WAV kept 1.6 GB in the server. A
response its client does not take within ``--send-timeout`` is now dropped:
the connection is aborted, its unsent bytes freed, its synthesis stopped and
its slot freed, counted in ``yomiage_send_timeouts_total``. A client that
reads, however slowly, keeps its connection.

The clients here are raw sockets on 127.0.0.1; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

import uvicorn  # noqa: E402

from tests.serving import listening_url  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig, create_app  # noqa: E402
from yomiage.server.connections import _Guard  # noqa: E402
from yomiage.server.runner import uvicorn_config  # noqa: E402

pytestmark = pytest.mark.server
GUARD = 60.0  # how long a test waits for what must happen before it calls it a hang
TEXT = "今日はとても良い天気ですね、散歩に行きましょう。" * 40  # minutes of audio
QUERY_TEXT = TEXT[:300]  # its AudioQuery fits the body limit; 40 s of 48 kHz stereo
SHORT = "こんにちは。"


def _until(condition: Any, what: str) -> None:
    end = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < end, f"{what} did not happen"
        time.sleep(0.02)


# -- the deadline itself, on a transport that stands for the socket --------------------


class _Transport:
    def __init__(self) -> None:
        self.unsent = 0
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str) -> None:
        return None  # no socket: the buffer above is all the client has not taken


class _Uvicorn:
    """What the guard calls of uvicorn's protocol."""

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        pass


def _protocol(send_timeout: float) -> tuple[Any, list[int]]:
    dropped: list[int] = []
    cls = type("P", (_Guard, _Uvicorn), {"send_timeout": send_timeout,
                                         "_dropped": staticmethod(lambda: dropped.append(1))})  # fmt: skip
    protocol = cls()
    protocol.loop = asyncio.get_running_loop()
    protocol.transport = _Transport()
    protocol.client = ("127.0.0.1", 1)
    return protocol, dropped


async def _wait(condition: Any) -> None:
    end = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < end
        await asyncio.sleep(0.01)


def test_a_client_that_takes_nothing_is_dropped_and_counted() -> None:
    async def main() -> None:
        protocol, dropped = _protocol(0.05)
        protocol.transport.unsent = 1 << 20
        protocol.pause_writing()
        await _wait(lambda: protocol.transport.aborted)
        assert dropped == [1]

    asyncio.run(main())


def test_a_client_that_keeps_taking_some_is_not_dropped() -> None:
    async def main() -> None:
        protocol, dropped = _protocol(0.05)
        protocol.transport.unsent = 1 << 20
        protocol.pause_writing()
        while protocol.transport.unsent > 0:  # it reads slowly: some each 10 ms
            await asyncio.sleep(0.01)
            protocol.transport.unsent = max(0, protocol.transport.unsent - (1 << 14))
        protocol.resume_writing()
        await asyncio.sleep(0.2)
        assert not protocol.transport.aborted and dropped == []
        protocol.transport.unsent = 1 << 20  # paused again, and this time nothing is taken
        protocol.pause_writing()
        await _wait(lambda: protocol.transport.aborted)

    asyncio.run(main())


def test_a_connection_that_drains_or_closes_is_left_alone() -> None:
    async def main() -> None:
        protocol, dropped = _protocol(0.05)
        protocol.transport.unsent = 1 << 20
        protocol.pause_writing()
        protocol.resume_writing()
        protocol.pause_writing()
        protocol.connection_lost(None)
        await asyncio.sleep(0.2)
        assert not protocol.transport.aborted and dropped == []

    asyncio.run(main())


# -- the server, with clients that never read ------------------------------------------


@pytest.fixture(scope="module")
def tts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    with (
        TTS(threads=1, cache_dir=tmp_path_factory.mktemp("cache"))
        .load("tiny", source=Path(__file__).parent / "data" / "voices" / "tiny")
        .prepare() as engine
    ):
        yield engine


class _Server:
    def __init__(self, address: str, app: Any) -> None:
        self.address = address
        self.url = f"http://{address}"
        self.app = app

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        return float(next(line.split()[1] for line in text.splitlines()
                          if line.startswith(name + " ")))  # fmt: skip


@contextmanager
def _serving(engine: TTS, **settings: Any) -> Iterator[_Server]:
    """The app behind the uvicorn set-up ``yomiage serve`` uses (one synthesis slot)."""
    config = ServerConfig(warmup=False, max_concurrency=1, queue_timeout=GUARD * 2, **settings)
    app = create_app(engine, config)
    server = uvicorn.Server(
        uvicorn_config(app, config, host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    _until(lambda: server.started or not thread.is_alive(), "the server starting")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield _Server(f"127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def _never_reads(
    address: str, path: str, body: Any, *, small_window: bool = True
) -> Iterator[socket.socket]:
    """A client that sends one request and reads nothing of the answer (unless the test
    reads from the socket it yields)."""
    host, port = address.split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if small_window:  # set before connect: the window the server sees
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.connect((host, int(port)))
        data = json.dumps(body, ensure_ascii=False).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n")  # fmt: skip
        sock.sendall(head.encode() + data)
        yield sock
    finally:
        sock.close()


def _speaker(server: _Server) -> int:
    speakers = httpx.get(f"{server.url}/speakers", timeout=GUARD).json()
    return int(speakers[0]["styles"][0]["id"])


def _query(server: _Server, speaker: int, text: str) -> dict[str, Any]:
    made = httpx.post(f"{server.url}/audio_query", params={"speaker": speaker, "text": text},
                      timeout=GUARD)  # fmt: skip
    assert made.status_code == 200, made.text
    query: dict[str, Any] = made.json()
    return {**query, "outputSamplingRate": 48000, "outputStereo": True}


def _frees_its_slot(server: _Server, path: str, body: Any, *, speaker: int | None = None) -> None:
    """A client that never reads ``path``'s streamed answer holds the one slot only until
    the send deadline: a second request then gets its audio."""
    target = path if speaker is None else f"{path}?speaker={speaker}"
    with _never_reads(server.address, target, body):
        _until(lambda: server.metric("yomiage_in_flight_requests") == 1, "the synthesis starting")
        with httpx.Client(base_url=server.url, timeout=GUARD * 3) as http:
            after = http.post("/tts", json={"text": SHORT})
        assert after.status_code == 200, after.text
        assert server.metric("yomiage_send_timeouts_total") == 1
        assert server.metric("yomiage_client_disconnects_total") == 1


def test_a_tts_stream_nobody_reads_frees_its_slot(tts: TTS) -> None:
    """R4: two such clients held both slots; every other /tts got 503 queue_timeout."""
    with _serving(tts, send_timeout=0.5) as server:
        _frees_its_slot(server, "/tts", {"text": TEXT, "stream": True})


def test_an_openai_stream_nobody_reads_frees_its_slot(tts: TTS) -> None:
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm",
            "stream": True}  # fmt: skip
    with _serving(tts, send_timeout=0.5) as server:
        _frees_its_slot(server, "/v1/audio/speech", body)


def test_a_streaming_synthesis_nobody_reads_frees_its_slot(tts: TTS) -> None:
    """R4: two non-reading /streaming_synthesis clients held both slots for 120 s and more."""
    with _serving(tts, send_timeout=0.5) as server:
        speaker = _speaker(server)
        _frees_its_slot(server, "/streaming_synthesis", _query(server, speaker, QUERY_TEXT),
                        speaker=speaker)  # fmt: skip


@pytest.mark.parametrize("route", ["/synthesis", "/tts"])
def test_a_whole_wav_nobody_reads_is_dropped_from_memory(tts: TTS, route: str) -> None:
    """R4: each whole WAV sent to a client that never read stayed in the server (ten
    clients of a 171 MB query: 1.6 GB) for as long as the client kept its socket."""
    with _serving(tts, send_timeout=0.5) as server:
        if route == "/tts":  # about 7 MB: twice what the kernel holds for the socket
            path, body = "/tts", {"text": TEXT[:600], "stream": False, "sample_rate": 48000}
        else:
            speaker = _speaker(server)
            path, body = f"/synthesis?speaker={speaker}", _query(server, speaker, QUERY_TEXT)
        with _never_reads(server.address, path, body) as sock:
            _until(lambda: server.metric("yomiage_send_timeouts_total") == 1, "the drop")
            sock.settimeout(GUARD)
            with contextlib.suppress(ConnectionResetError):
                while sock.recv(1 << 16):  # what the kernel holds, then the end
                    pass
        assert server.metric("yomiage_in_flight_requests") == 0


def test_a_client_that_reads_slowly_gets_all_of_a_whole_wav(tts: TTS) -> None:
    """The deadline is for taking nothing: a client that keeps reading gets the whole
    answer, however long that takes."""
    with _serving(tts, send_timeout=2.0) as server:
        speaker = _speaker(server)
        path, query = f"/synthesis?speaker={speaker}", _query(server, speaker, QUERY_TEXT)
        with _never_reads(server.address, path, query, small_window=False) as sock:
            sock.settimeout(GUARD)
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(4096)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))  # fmt: skip
            while len(body) < length:  # 64 KB each 30 ms: longer than the deadline in all
                time.sleep(0.03)
                chunk = sock.recv(1 << 16)
                assert chunk, f"closed after {len(body)} of {length} bytes"
                body += chunk
            assert length > 6 << 20  # twice what the kernel holds: it waited on the reader
            assert len(body) == length
        assert server.metric("yomiage_send_timeouts_total") == 0


def test_a_client_reading_20_kb_a_second_keeps_its_stream(tts: TTS) -> None:
    """Issue 49 (reliability D14): two /tts streams read at 13 kB/s were dropped by the
    send deadline: the kernel's send buffer took what they read, so the transport's
    buffer, all that was counted, did not shrink. What the kernel still holds counts."""
    body = {"text": TEXT, "stream": True}
    with (
        _serving(tts, send_timeout=1.0) as server,
        _never_reads(server.address, "/tts", body) as sock,
    ):
        sock.settimeout(GUARD)
        taken, end = 0, time.monotonic() + 6  # six deadlines
        while time.monotonic() < end:
            time.sleep(0.05)
            chunk = sock.recv(1024)  # 20 kB/s at most
            assert chunk, f"closed after {taken} bytes"
            taken += len(chunk)
        assert server.metric("yomiage_send_timeouts_total") == 0
        assert server.metric("yomiage_in_flight_requests") == 1  # still streaming


def test_serve_drops_a_client_that_never_reads(test_voice: Path) -> None:
    """`yomiage serve --send-timeout` wires the deadline and its metric."""
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "1", "--no-warmup", "--max-concurrency", "1",
               "--send-timeout", "1", "--queue-timeout", str(GUARD * 2)]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = listening_url(process)
        server = _Server(url.removeprefix("http://"), None)
        _frees_its_slot(server, "/tts", {"text": TEXT, "stream": True})
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
