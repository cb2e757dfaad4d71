"""The folder of AIVMX voices a server installs at run time (``yomiage.aivmx.store``).

Every failure must leave the installed file as it was and no partial file behind;
web downloads are tested against a plain HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import onnx
import pytest

from tests.conftest import TEST_VOICES
from yomiage.aivmx import fetch as fetch_module
from yomiage.aivmx.fetch import download_url, hub_file_source, is_web_address
from yomiage.aivmx.reader import AivmxError
from yomiage.aivmx.store import (
    SOURCES_FILE,
    InstalledModel,
    ModelNotInstalledError,
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

AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
UUID = "13eb270c-b01d-1efb-f7a0-a7cad39034d3"
OTHER_UUID = "0b8ac1c2-0000-4000-8000-000000000001"


def _variant(**manifest: str) -> bytes:
    """The tiny voice with manifest fields changed (a new version, another uuid...)."""
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_manifest":
            prop.value = json.dumps({**json.loads(prop.value), **manifest}, ensure_ascii=False)
    return bytes(model.SerializeToString())


@pytest.fixture(scope="module")
def voices() -> dict[str, bytes]:
    return {
        "v1": AIVMX.read_bytes(),
        "v2": _variant(version="2.0.0"),
        "other": _variant(uuid=OTHER_UUID, name="another voice"),
    }


def _upload(store: ModelStore, data: bytes, chunk: int = 1 << 20) -> InstalledModel:
    with store.receive() as upload:
        for start in range(0, len(data), chunk):
            upload.write(data[start : start + chunk])
        return store.install_upload(upload)


def _leftovers(root: Path) -> list[str]:
    """Partial or temporary files in the store's folder (there must be none)."""
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _records(root: Path) -> dict[str, object]:
    path = root / SOURCES_FILE
    return json.loads(path.read_text())["models"] if path.exists() else {}


# -- uploads -------------------------------------------------------------------


def test_upload_installs_lists_and_gets(tmp_path: Path, voices: dict[str, bytes]) -> None:
    store = ModelStore(tmp_path / "models")
    assert store.installed() == {}
    model = _upload(store, voices["v1"])
    assert (model.uuid, model.name, model.version) == (UUID, "sbv2_tiny", "1.0.0")
    assert model.path == tmp_path / "models" / f"{UUID}.aivmx"
    assert model.size == len(voices["v1"]) and model.source is None
    assert model.manifest["model_architecture"] == "Style-Bert-VITS2 (JP-Extra)"
    assert list(store.installed()) == [UUID]
    assert store.get(UUID) == model
    assert store.get(UUID.upper()).path == model.path
    assert _leftovers(store.root) == []


def test_listing_is_sorted_by_name_and_skips_unreadable_files(
    tmp_path: Path, voices: dict[str, bytes], caplog: pytest.LogCaptureFixture
) -> None:
    store = ModelStore(tmp_path)
    _upload(store, voices["v1"])
    _upload(store, voices["other"])
    (tmp_path / "garbage.aivmx").write_bytes(b"\xff" * 100)
    (tmp_path / "notes.txt").write_text("not a voice")
    with caplog.at_level(logging.WARNING, logger="yomiage.aivmx.store"):
        listed = store.installed()
    assert [m.name for m in listed.values()] == ["another voice", "sbv2_tiny"]
    assert "garbage.aivmx" in caplog.text


def test_listing_reads_metadata_only_of_changed_files(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ModelStore(tmp_path)
    _upload(store, voices["v1"])
    store.installed()
    from yomiage.aivmx.metadata import read_metadata

    calls: list[Path] = []

    def counted(path: Path) -> dict[str, str]:
        calls.append(path)
        return read_metadata(path)

    monkeypatch.setattr("yomiage.aivmx.store.read_metadata", counted)
    store.installed()
    assert calls == []
    _upload(store, voices["v2"])  # a new file under the same name: read again
    assert store.installed()[UUID].version == "2.0.0"
    assert calls


def test_same_uuid_replaces(tmp_path: Path, voices: dict[str, bytes]) -> None:
    store = ModelStore(tmp_path)
    first = _upload(store, voices["v1"])
    second = _upload(store, voices["v2"])
    assert second.path == first.path and second.version == "2.0.0"
    assert list(store.installed()) == [UUID]
    assert first.path.read_bytes() == voices["v2"]


def test_too_large_upload_is_refused_and_the_old_file_kept(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    store = ModelStore(tmp_path, max_bytes=len(voices["v1"]) + 10)
    old = _upload(store, voices["v1"])
    with pytest.raises(UploadTooLargeError, match="--max-upload-mb"):
        _upload(store, voices["v1"] + b"x" * 100)
    assert old.path.read_bytes() == voices["v1"]
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "damage",
    [lambda data: data[: len(data) // 2], lambda data: bytes(range(256)) * 64, lambda data: b""],
    ids=["truncated", "random", "empty"],
)
def test_invalid_upload_is_refused_and_the_old_file_kept(
    tmp_path: Path, voices: dict[str, bytes], damage: Callable[[bytes], bytes]
) -> None:
    store = ModelStore(tmp_path)
    old = _upload(store, voices["v1"])
    with pytest.raises(AivmxError, match="the uploaded file") as caught:
        _upload(store, damage(voices["v2"]))
    assert ".partial" not in str(caught.value)  # the server's path stays inside
    assert old.path.read_bytes() == voices["v1"]
    assert _leftovers(tmp_path) == []


def test_an_upload_left_without_install_is_removed(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    with store.receive() as upload:
        upload.write(b"half a voice")
        assert upload.path.exists() and upload.path.parent == tmp_path
    assert _leftovers(tmp_path) == []

    def client_leaves() -> None:
        with store.receive() as upload:
            upload.write(b"half a voice")
            raise RuntimeError("client left")

    with pytest.raises(RuntimeError):
        client_leaves()
    assert _leftovers(tmp_path) == []


def test_hand_copied_file_is_listed_and_replaced_in_place(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    copied = tmp_path / "My Voice.AIVMX"
    copied.write_bytes(voices["v1"])
    store = ModelStore(tmp_path)
    assert store.get(UUID).path == copied and store.get(UUID).source is None
    model = _upload(store, voices["v2"])
    assert model.path == copied and copied.read_bytes() == voices["v2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["My Voice.AIVMX"]


def test_concurrent_uploads_of_one_voice_leave_one_intact_file(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    store = ModelStore(tmp_path)
    errors: list[BaseException] = []

    def install(data: bytes) -> None:
        try:
            _upload(store, data)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=install, args=(voices[k],)) for k in ["v1", "v2"] * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert list(store.installed()) == [UUID]
    assert store.get(UUID).path.read_bytes() in (voices["v1"], voices["v2"])
    assert _leftovers(tmp_path) == []


def test_stale_partials_are_removed_when_the_store_opens(tmp_path: Path) -> None:
    import os

    stale, fresh = tmp_path / ".upload-old.partial", tmp_path / ".upload-new.partial"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (0, 0))
    ModelStore(tmp_path)
    assert not stale.exists() and fresh.exists()


# -- local sources, update, uninstall ------------------------------------------


def test_install_from_a_path_and_file_uri(tmp_path: Path, voices: dict[str, bytes]) -> None:
    src = tmp_path / "src" / "voice.aivmx"
    src.parent.mkdir()
    src.write_bytes(voices["v1"])
    store = ModelStore(tmp_path / "models")
    model = store.install_from(str(src))
    assert model.source == str(src) and model.path.read_bytes() == voices["v1"]
    assert _records(store.root) == {UUID: {"source": str(src)}}
    model = store.install_from(src.as_uri())
    assert model.source == src.as_uri() and store.get(UUID).source == src.as_uri()
    assert store.install_from(str(src.parent)).uuid == UUID  # a folder of one voice
    assert _leftovers(store.root) == []


def test_install_from_a_relative_path_records_it_absolute(
    tmp_path: Path, voices: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "voice.aivmx").write_bytes(voices["v1"])
    monkeypatch.chdir(tmp_path)
    model = ModelStore(tmp_path / "models").install_from("voice.aivmx")
    assert model.source == str(tmp_path / "voice.aivmx")


def test_install_from_a_missing_path(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "models")
    for malformed in ("", "http://[::1", "ftp://example.com/v.aivmx"):
        with pytest.raises(InvalidSourceError):
            store.install_from(malformed)
    with pytest.raises(SourceNotFoundError):
        store.install_from(str(tmp_path / "nothing.aivmx"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceNotFoundError, match="no AIVMX file"):
        store.install_from(str(tmp_path / "empty"))
    assert _leftovers(store.root) == []


def test_update_without_a_source_is_refused(tmp_path: Path, voices: dict[str, bytes]) -> None:
    store = ModelStore(tmp_path)
    _upload(store, voices["v1"])
    with pytest.raises(NoUpdateError, match="no source"):
        store.update(UUID)


def test_update_from_a_path(tmp_path: Path, voices: dict[str, bytes]) -> None:
    src = tmp_path / "voice.aivmx"
    src.write_bytes(voices["v1"])
    store = ModelStore(tmp_path / "models")
    installed = store.install_from(str(src))
    with pytest.raises(NoUpdateError, match="up to date"):
        store.update(UUID)
    assert _leftovers(store.root) == []
    src.write_bytes(voices["v2"])
    updated = store.update(UUID)
    assert updated.version == "2.0.0" and updated.path == installed.path
    assert updated.source == str(src) and _sha(updated.path) == _sha(src)
    src.write_bytes(voices["other"])  # the source now holds another voice
    with pytest.raises(NoUpdateError, match=OTHER_UUID):
        store.update(UUID)
    assert installed.path.read_bytes() == voices["v2"] and list(store.installed()) == [UUID]
    src.write_bytes(voices["v2"][:1000])
    with pytest.raises(AivmxError):
        store.update(UUID)
    assert installed.path.read_bytes() == voices["v2"]
    assert _leftovers(store.root) == []


def test_uninstall_removes_the_file_and_its_record(
    tmp_path: Path, voices: dict[str, bytes]
) -> None:
    src = tmp_path / "voice.aivmx"
    src.write_bytes(voices["other"])
    store = ModelStore(tmp_path / "models")
    _upload(store, voices["v1"])
    store.install_from(str(src))
    removed = store.uninstall(OTHER_UUID)
    assert removed.uuid == OTHER_UUID and not removed.path.exists()
    assert list(store.installed()) == [UUID] and _records(store.root) == {}
    with pytest.raises(ModelNotInstalledError, match="is not installed"):
        store.uninstall(OTHER_UUID)


@pytest.mark.parametrize("uuid", [OTHER_UUID, "not-a-uuid", "../" * 50])
def test_unknown_uuid(tmp_path: Path, uuid: str) -> None:
    store = ModelStore(tmp_path)
    for call in (store.get, store.update, store.uninstall):
        with pytest.raises(ModelNotInstalledError) as caught:
            call(uuid)
        assert len(str(caught.value)) < 150


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
    assert _leftovers(tmp_path) == []


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
    old = _upload(store, voices["v1"])
    with pytest.raises(error, match=words) as caught:
        store.install_from(_url(web, path))
    if error is not UploadTooLargeError:
        assert "127.0.0.1" in str(caught.value)
    assert old.path.read_bytes() == voices["v1"]
    assert _leftovers(tmp_path) == [] and _records(tmp_path) == {}


def test_a_download_that_is_not_a_voice_is_refused(tmp_path: Path, web: _Server) -> None:
    web.files["/voice.aivmx"] = b"<?xml?> not a voice"
    with pytest.raises(AivmxError, match="the file from"):
        ModelStore(tmp_path).install_from(_url(web, "/voice.aivmx"))
    assert _leftovers(tmp_path) == []


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
    assert web.requests == [] and _leftovers(tmp_path) == []


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
    assert _leftovers(store.root) == []
