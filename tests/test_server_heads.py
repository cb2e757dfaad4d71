"""What a request head may be (issue 49, items 13 and 14): its size and its fields are
bounded (431 past them, under both of uvicorn's parsers), a Host header's port is a
number, and a page's own origin counts as this server's only for names that are."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: E402

from tests.serving import serve  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig, create_app  # noqa: E402
from yomiage.server.runner import uvicorn_config  # noqa: E402

pytestmark = pytest.mark.server


def _parsers() -> list[Any]:
    """uvicorn's two HTTP parsers: h11 (always there) and httptools (where installed: the
    one the server then uses)."""
    parsers = [pytest.param(H11Protocol, id="h11")]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return parsers
    return [*parsers, pytest.param(HttpToolsProtocol, id="httptools")]


@contextmanager
def _guarded(engine: TTS, config: ServerConfig, http: Any) -> Iterator[int]:
    """The app behind the uvicorn set-up ``yomiage serve`` uses, with parser ``http``;
    yields the port."""
    app = create_app(engine, config)
    server = uvicorn.Server(
        uvicorn_config(app, config, host="127.0.0.1", port=0, log_level="error", http=http)
    )
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < end, "the server did not start"
        time.sleep(0.01)
    try:
        yield int(server.servers[0].sockets[0].getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def _exchange(port: int, request: bytes) -> tuple[bytes, int]:
    """What the server answers to ``request`` sent whole (until it closes), and how many
    bytes of the request it took before that."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sent = 0
        try:
            while sent < len(request):
                sent += sock.send(request[sent : sent + 65536])
        except OSError:  # it closed the connection while the rest was on its way
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:  # closed with our bytes unread: the kernel resets
            pass
    return answer, sent


def _statuses(answer: bytes) -> list[int]:
    return [int(line.split()[1]) for line in answer.split(b"\r\n") if b"HTTP/1.1 " in line]


HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"


@pytest.mark.parametrize("http", _parsers())
def test_a_one_megabyte_header_is_431_without_being_read_whole(engine: TTS, http: Any) -> None:
    """A 64 MB header was read whole and answered 200 after 16.5 s; ten of 48 MB took the
    server process to 482 MB."""
    config = ServerConfig(warmup=False)
    request = HEAD + b"X-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    with _guarded(engine, config, http) as port:
        answer, _ = _exchange(port, request)
        assert _statuses(answer) == [431], answer[:300]
        assert b'"header_too_large"' in answer
        # The head's limit takes the URL of a --max-chars text (VOICEVOX's routes).
        url = b"/health?text=" + b"%E3%81%82" * config.max_input_chars
        fits, _ = _exchange(port, HEAD.replace(b"/health", url) + b"\r\n")
        assert _statuses(fits) == [200]
        # The head ends at its blank line: a body in the same read is the route's to judge.
        body = b'{"text": "' + b"a" * 200_000 + b'"}'
        post = (
            b"POST /tts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        answer, _ = _exchange(port, post + body)
        assert _statuses(answer) == [413] and b'"body_too_large"' in answer


@pytest.mark.parametrize("http", _parsers())
def test_a_big_head_after_a_keep_alive_request_is_431(engine: TTS, http: Any) -> None:
    """Also behind a request still being answered: its answer first, then the 431 (sent
    at once, it came before the answer, which then failed to write)."""
    config = ServerConfig(warmup=False)
    first = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    body = '{"text": "こんにちは。", "format": "pcm"}'.encode()
    slow = (
        b"POST /tts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body
    big = HEAD + b"X-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    with _guarded(engine, config, http) as port:
        answer, _ = _exchange(port, first + big)
        assert _statuses(answer) == [200, 431]
        answer, _ = _exchange(port, slow + big)
        assert _statuses(answer) == [200, 431], answer[:200]
        assert answer.rstrip().endswith(b"}}") and b'"header_too_large"' in answer


def test_too_many_header_fields_are_431(engine: TTS) -> None:
    from yomiage.server.middleware import MAX_HEADER_FIELDS

    fields = b"".join(b"X-%d: a\r\n" % n for n in range(MAX_HEADER_FIELDS + 1))
    with serve(engine, ServerConfig(warmup=False)) as running:
        answer, _ = _exchange(running.port, HEAD + fields + b"\r\n")
        assert _statuses(answer) == [431] and b'"header_too_large"' in answer
        many = b"".join(b"X-%d: a\r\n" % n for n in range(MAX_HEADER_FIELDS - 10))
        answer, _ = _exchange(running.port, HEAD + many + b"\r\n")
        assert _statuses(answer) == [200]


def test_a_host_header_with_a_port_that_is_no_number_is_400(engine: TTS) -> None:
    """``Host: localhost:evil`` was answered as localhost."""
    with serve(engine, ServerConfig(warmup=False)) as running, running.client() as http:
        for host in ("localhost:evil", "127.0.0.1:80x", "[::1]:8000x", "[::1", "localhost:123456"):
            answer = http.get("/health", headers={"Host": host})
            assert answer.status_code == 400, host
            assert answer.json()["error"]["code"] == "invalid_host"
        for host in ("localhost:", "localhost:8000", "[::1]:1", "[::1]"):
            assert http.get("/health", headers={"Host": host}).status_code == 200, host


def test_any_host_does_not_let_a_dns_rebinding_page_write(engine: TTS) -> None:
    """With ``--allowed-host '*'`` a write whose Origin was ``http://<its Host>`` counted
    as this server's own page: a rebinding page on rebind.example could unload voices."""
    config = ServerConfig(warmup=False, allowed_hosts=("*",), dict_api="write")
    word = {"surface": "鬼滅", "reading": "キメツ"}
    with serve(engine, config) as running, running.client() as http:
        port = running.port
        rebound = {"Host": f"rebind.example:{port}", "Origin": f"http://rebind.example:{port}"}
        refused = http.post("/v1/dictionary", json=word, headers=rebound)
        assert refused.status_code == 403, refused.text
        assert "--allowed-host" in refused.json()["error"]["message"]
        # This server's own page, by an address or a loopback name, still writes.
        for name in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            own = {"Host": name, "Origin": f"http://{name}"}
            assert http.post("/v1/dictionary", json=word, headers=own).status_code == 201, name
            assert http.delete("/v1/dictionary/鬼滅", headers=own).status_code in (200, 204)
    listed = ServerConfig(warmup=False, allowed_hosts=("tts.example",), dict_api="write")
    with serve(engine, listed) as running, running.client() as http:
        own = {"Host": "tts.example", "Origin": "http://tts.example"}
        assert http.post("/v1/dictionary", json=word, headers=own).status_code == 201
        http.delete("/v1/dictionary/鬼滅", headers=own)
