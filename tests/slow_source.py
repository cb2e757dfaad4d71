"""A web source on 127.0.0.1 that promises a file and then trickles it, a byte at a time:
what a slow or hostile voice host looks like to an install."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Trickle(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.started.set()
        self.send_response(200)
        self.send_header("Content-Length", str(self.server.size))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        try:
            while not self.server.closing.is_set():
                self.wfile.write(b"\0")
                self.wfile.flush()
                time.sleep(self.server.interval)
        except OSError:  # the client hung up: what a stopped fetch does
            self.server.hung_up.set()

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    interval: float
    size: int
    started: threading.Event
    hung_up: threading.Event
    closing: threading.Event


@contextmanager
def trickling_source(interval: float = 0.5, size: int = 1_000_000) -> Iterator[_Server]:
    """A server whose every GET says ``size`` bytes and sends one every ``interval`` s.
    ``started`` is set when a download begins, ``hung_up`` when its client went away."""
    server = _Server(("127.0.0.1", 0), _Trickle)
    server.interval, server.size = interval, size
    server.started, server.hung_up, server.closing = (threading.Event() for _ in range(3))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def url_of(server: _Server, path: str = "/voice.aivmx") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"
