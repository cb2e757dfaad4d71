"""Installing AIVMX voices from web addresses and the hub (``yomiage.aivmx.fetch`` through
the model store), against a plain HTTP server and a fake hub on 127.0.0.1: every failed
download leaves the installed file as it was and no partial file behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.aivm_files import (
    UUID,
    leftovers,
    records,
    upload_to,
    voice_files,
)
from yomiage.aivmx import fetch as fetch_module
from yomiage.aivmx.fetch import download_url, hub_file_source, is_web_address
from yomiage.aivmx.reader import AivmxError
from yomiage.aivmx.store import (
    ModelStore,
    NoUpdateError,
    UploadTooLargeError,
)
from yomiage.errors import (
    InvalidSourceError,
    OfflineError,
    SourceAuthError,
    SourceNetworkError,
    SourceNotFoundError,
)


@pytest.fixture(scope="module")
def voices() -> dict[str, bytes]:
    return voice_files()


# -- web addresses -------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.files``; a few paths misbehave on purpose."""

    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.server.requests.append(path)
        if path == "/redirect":
            self._head(302, {"Location": "/voice.aivmx"})
        elif path == "/ftp":
            self._head(302, {"Location": "ftp://127.0.0.1/voice.aivmx"})
        elif path == "/private":
            self._head(403)
        elif path == "/broken":
            self._head(500)
        elif path == "/page":
            self._head(200, {"Content-Type": "text/html", "Content-Length": "6"})
            self.wfile.write(b"<html>")
        elif path == "/huge":  # says its size: refused before the body is read
            self._head(200, {"Content-Length": str(10 << 30)})
        elif path == "/endless":  # no size: cut at the limit
            self._head(200, {"Connection": "close"})
            try:
                while True:
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                pass
        elif path == "/short":  # promises more than it sends
            body = self.server.files["/voice.aivmx"]
            self._head(200, {"Content-Length": str(len(body) + 1000)})
            self.wfile.write(body)
        elif path in self.server.files:
            body = self.server.files[path]
            self._head(200, {"Content-Length": str(len(body))})
            self.wfile.write(body)
        else:
            self._head(404)

    def _head(self, code: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in (headers or {"Content-Length": "0"}).items():
            self.send_header(key, value)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    files: dict[str, bytes]
    requests: list[str]


@pytest.fixture
def web(voices: dict[str, bytes]) -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.files = {"/voice.aivmx": voices["v1"]}
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _url(server: _Server, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def test_install_from_a_web_address_and_update(
    tmp_path: Path, voices: dict[str, bytes], web: _Server
) -> None:
    store = ModelStore(tmp_path)
    heard: list[str] = []
    model = store.install_from(_url(web, "/voice.aivmx"), progress=heard.append)
    assert model.source == _url(web, "/voice.aivmx") and model.version == "1.0.0"
    assert heard and "100 %" in heard[-1]
    with pytest.raises(NoUpdateError, match="up to date"):
        store.update(UUID)
    web.files["/voice.aivmx"] = voices["v2"]
    assert store.update(UUID).version == "2.0.0"
    assert store.get(UUID).path.read_bytes() == voices["v2"]
    assert store.install_from(_url(web, "/redirect")).uuid == UUID
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("path", "error", "words"),
    [
        ("/missing.aivmx", SourceNotFoundError, "HTTP 404"),
        ("/private", SourceAuthError, "HTTP 403"),
        ("/broken", SourceNetworkError, "HTTP 500"),
        ("/page", SourceNotFoundError, "web page"),
        ("/ftp", SourceNotFoundError, "not a web address"),
        ("/short", SourceNetworkError, "ended after"),
        ("/huge", UploadTooLargeError, "10,737,418,240 bytes"),
        ("/endless", UploadTooLargeError, "is over"),
    ],
)
def test_failed_downloads_keep_the_installed_file(
    tmp_path: Path,
    voices: dict[str, bytes],
    web: _Server,
    path: str,
    error: type[Exception],
    words: str,
) -> None:
    store = ModelStore(tmp_path, max_bytes=len(voices["v1"]) + 10_000)
    old = upload_to(store, voices["v1"])
    with pytest.raises(error, match=words) as caught:
        store.install_from(_url(web, path))
    if error is not UploadTooLargeError:
        assert "127.0.0.1" in str(caught.value)
    assert old.path.read_bytes() == voices["v1"]
    assert leftovers(tmp_path) == [] and records(tmp_path) == {}


def test_a_download_that_is_not_a_voice_is_refused(tmp_path: Path, web: _Server) -> None:
    web.files["/voice.aivmx"] = b"<?xml?> not a voice"
    with pytest.raises(AivmxError, match="the file from"):
        ModelStore(tmp_path).install_from(_url(web, "/voice.aivmx"))
    assert leftovers(tmp_path) == []


def test_offline_refuses_web_addresses_before_any_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, web: _Server
) -> None:
    def no_download(*args: object, **kwargs: object) -> int:
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(fetch_module, "download", no_download)
    with pytest.raises(OfflineError, match="offline"):
        ModelStore(tmp_path, offline=True).install_from(_url(web, "/voice.aivmx"))
    monkeypatch.setenv("YOMIAGE_OFFLINE", "1")
    with pytest.raises(OfflineError):
        ModelStore(tmp_path).install_from("https://hub.aivis-project.com/aivm-models/" + UUID)
    assert web.requests == [] and leftovers(tmp_path) == []


def test_aivishub_model_pages_map_to_their_download_address() -> None:
    page = f"https://hub.aivis-project.com/aivm-models/{UUID}"
    api = f"https://api.aivis-project.com/v1/aivm-models/{UUID}/download?model_type=AIVMX"
    assert download_url(page) == api
    assert download_url(page.replace(UUID, UUID.upper())) == api
    assert download_url(page + "/") == api
    assert download_url(page + "?tab=versions") == api
    for other in (page + "/edit", "https://example.com/x.aivmx", api):
        assert download_url(other) == other


def test_hub_file_addresses_become_hf_sources() -> None:
    assert (
        hub_file_source("https://huggingface.co/o/r/resolve/main/dir/v.aivmx")
        == "hf://o/r@main/dir/v.aivmx"
    )
    assert (
        hub_file_source("https://huggingface.co/o/r/blob/refs%2Fpr%2F1/v.aivmx")
        == "hf://o/r@refs%2Fpr%2F1/v.aivmx"
    )
    assert hub_file_source("https://huggingface.co/o/r") is None
    assert hub_file_source("https://example.com/o/r/resolve/main/v.aivmx") is None
    assert is_web_address("https://example.com/v.aivmx")
    assert not is_web_address("https://huggingface.co/o/r")
    assert not is_web_address("hf://o/r/v.aivmx")


def test_install_and_update_from_the_hub(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """hf:// and a hub file address (on the HF_ENDPOINT mirror) go through the cache; an
    update asks the hub for the newest revision."""
    from tests.sources_servers import fake_hub

    with fake_hub() as (endpoint, state):
        state.add_repo("someone/voices", {"v/tiny.aivmx": voices["v1"], "v/b.aivmx": b"x"})
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        for var in ("HF_HUB_OFFLINE", "YOMIAGE_OFFLINE", "HF_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        store = ModelStore(tmp_path / "models", cache_dir=tmp_path / "cache")
        model = store.install_from(f"{endpoint}/someone/voices/resolve/main/v/tiny.aivmx")
        assert model.source == "hf://someone/voices@main/v/tiny.aivmx"
        with pytest.raises(NoUpdateError, match="up to date"):
            store.update(UUID)
        state.add_repo("someone/voices", {"v/tiny.aivmx": voices["v2"]})
        assert store.update(UUID).version == "2.0.0"
        assert store.install_from("hf://someone/voices/v/tiny.aivmx").version == "2.0.0"
        with pytest.raises(InvalidSourceError, match="file itself"):
            store.install_from("hf://someone/voices/v")  # a whole folder is not fetched
        assert not list((tmp_path / "cache").rglob("b.aivmx"))  # nothing of the folder fetched
    assert leftovers(store.root) == []
