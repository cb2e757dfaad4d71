"""The bounds of /aivm_models installs over HTTP (issue 31): a slow source or client holds
no lock and no partial file past its time, what cannot be listed is neither installed nor
stuck, and errors name what the client sent, never the server's partial file."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import onnx
import pytest

pytest.importorskip("fastapi")

from tests.aivm_files import AIVMX, UUID, variant
from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, serve
from tests.slow_source import trickling_source, url_of
from yomiage import TTS
from yomiage.converted import aivmx_key
from yomiage.server import ServerConfig
from yomiage.server.engine.service import LocalService
from yomiage.sources.cache import Cache

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"),
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    yield tts
    tts.close()


def _config(tmp_path: Path, **overrides: object) -> ServerConfig:
    fields: dict[str, object] = {"warmup": False, "models_dir": tmp_path / "models",
                                 "model_api": "write", "max_upload_bytes": 8 << 20}  # fmt: skip
    return ServerConfig(**{**fields, **overrides})  # type: ignore[arg-type]


@pytest.fixture
def server(engine: TTS, tmp_path: Path) -> Iterator[RunningServer]:
    with serve(engine, _config(tmp_path)) as running:
        yield running
    for name in [n for n in engine.speakers if n != "tiny"]:
        engine.unload(name)


def _upload(http: httpx.Client, data: bytes, name: str = "voice.aivmx") -> httpx.Response:
    return http.post(
        "/aivm_models/install", files={"file": (name, data, "application/octet-stream")}
    )


def _files(server: RunningServer) -> list[str]:
    folder: Path = server.state.config.models_dir
    return sorted(p.name for p in folder.iterdir() if p.suffix != ".json")


def test_an_unreadable_file_named_by_a_uuid_is_uninstalled(server: RunningServer) -> None:
    """R12: a file the listing cannot read was a 404 to uninstall, so it stayed for ever."""
    folder: Path = server.state.config.models_dir
    (folder / f"{UUID}.aivmx").write_bytes(b"\xff" * 1000)
    with server.client() as http:
        assert http.get("/aivm_models").json() == {}
        assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 204
        assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 404
    assert _files(server) == []
    assert AIVMX.exists()


def _leftovers(server: RunningServer) -> list[str]:
    folder: Path = server.state.config.models_dir
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _until(condition: Callable[[], bool], seconds: float = 30) -> bool:
    """Whether ``condition`` holds within ``seconds`` (a generous bound, never a measure)."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _post_raw(port: int, head: str, body: bytes = b"") -> socket.socket:
    """A POST sent on a socket of its own, left open (the caller closes it: leaving)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head.encode("latin-1") + body)
    return sock


def _url_install(port: int, url: str) -> socket.socket:
    form = urlencode({"url": url}).encode()
    return _post_raw(
        port,
        "POST /aivm_models/install HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(form)}\r\n\r\n",
        form,
    )


def test_a_slow_url_install_holds_no_lock_and_stops_when_its_client_leaves(
    server: RunningServer,
) -> None:
    """R7: the fetch ran inside the change lock with no bound: while a source trickled,
    no other change (not even an unload) was answered, also after the client left."""
    with trickling_source(1.0) as source:
        installing = _url_install(server.port, url_of(source))
        assert source.started.wait(30)
        with server.client(timeout=30) as http:  # the lock is free: another change runs
            other = http.post(f"/aivm_models/{UUID}/unload")
            assert other.status_code == 404 and "not installed" in other.json()["detail"]
            assert _leftovers(server)  # the slow one's partial file, still growing
        installing.close()  # the client leaves: the fetch stops, its partial goes
        assert source.hung_up.wait(30)
        assert _until(lambda: _leftovers(server) == [])
    with server.client() as http:
        assert http.get("/aivm_models").json() == {}


def test_a_url_install_past_the_install_timeout_is_a_504(engine: TTS, tmp_path: Path) -> None:
    """R7: a source sending a byte now and then passed the per-read timeout for ever."""
    with (
        serve(engine, _config(tmp_path, install_timeout=1.0)) as running,
        trickling_source(0.2) as source,
        running.client(timeout=60) as http,
    ):
        answer = http.post("/aivm_models/install", data={"url": url_of(source)})
        assert answer.status_code == 504, answer.text
        assert "1 s" in answer.json()["detail"] and "--install-timeout" in answer.json()["detail"]
        assert source.hung_up.wait(30)
        assert _leftovers(running) == [] and http.get("/aivm_models").json() == {}


def _multipart_head(boundary: str = "XyZ") -> str:
    return (
        "POST /aivm_models/install HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n"
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="v.aivmx"\r\n\r\n'
    )


def test_an_upload_past_the_install_timeout_is_a_408(engine: TTS, tmp_path: Path) -> None:
    """R16: only each chunk had a time limit (--body-timeout), so a client sending a byte
    every second or two held its connection and its partial file for as long as it liked."""
    config = _config(tmp_path, install_timeout=1.0, body_timeout=30.0)
    with serve(engine, config) as running:
        sock = _post_raw(running.port, _multipart_head(), b"\0" * 100)
        stop = threading.Event()

        def trickle() -> None:
            with contextlib.suppress(OSError):
                while not stop.wait(0.3):
                    sock.sendall(b"\0")

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            sock.settimeout(30)  # the client still sends: only the total limit can answer
            answer = sock.recv(65536).decode("latin-1")
        finally:
            stop.set()
            sender.join(5)
            sock.close()
        assert answer.startswith("HTTP/1.1 408"), answer[:200]
        assert "--install-timeout" in answer and '"detail"' in answer
        assert _until(lambda: _leftovers(running) == [])


def test_a_third_install_receiving_at_once_is_a_429(server: RunningServer) -> None:
    """R13: concurrent uploads were not limited: eight clients held 481 MB of partial
    files at once (the limit is 1 GB each, and 1,000 connections)."""
    slow = [_post_raw(server.port, _multipart_head(), b"\0" * 1000) for _ in range(2)]
    try:
        assert _until(lambda: len(_leftovers(server)) == 2)
        with server.client() as http:
            refused = _upload(http, b"\0" * 1000)  # refused before its body is read
            assert refused.status_code == 429, refused.text
            assert "try again" in refused.json()["detail"]
            assert int(refused.headers["Retry-After"]) > 0
    finally:
        for sock in slow:
            sock.close()
    assert _until(lambda: _leftovers(server) == [])
    with server.client() as http:
        assert _upload(http, AIVMX.read_bytes()).status_code == 204  # the slots are free again


def _bundle(cache: Cache, data: bytes) -> Path:
    return cache.converted_dir(aivmx_key(hashlib.sha256(data).hexdigest()))


def test_uninstalling_or_replacing_a_voice_removes_its_converted_bundle(
    server: RunningServer, engine: TTS
) -> None:
    """R13: eight re-installs then an uninstall left eight bundles (30 MB here, a few
    hundred MB each for a real voice) in the cache for good."""
    assert engine.cache_dir is not None
    cache = Cache.at(engine.cache_dir)
    first, newer = AIVMX.read_bytes(), variant(version="2.0.0")
    with server.client() as http:
        assert _upload(http, first).status_code == 204
        assert (_bundle(cache, first) / "voice.json").is_file()
        assert _upload(http, newer).status_code == 204  # a new version replaces it
        assert not _bundle(cache, first).exists()
        assert (_bundle(cache, newer) / "voice.json").is_file()
        assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 204
        assert not _bundle(cache, newer).exists()
    assert [p.name for p in (cache.root / "converted").glob(".aivmx-*")] == []


def test_a_bundle_a_voice_started_with_uses_is_kept(tmp_path: Path) -> None:
    """R13: only a bundle no loaded voice uses goes: here the command line's voice is the
    same file as the installed copy being uninstalled."""
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(AIVMX, models / f"{UUID}.aivmx")
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path / "cache",
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    with tts.load("started-with", source=AIVMX).prepare():
        bundle = _bundle(Cache.at(tmp_path / "cache"), AIVMX.read_bytes())
        assert (bundle / "voice.json").is_file()
        config = ServerConfig(warmup=False, models_dir=models, model_api="write")
        with serve(tts, config) as running, running.client() as http:
            assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 204
            assert not (models / f"{UUID}.aivmx").exists()
            assert (bundle / "voice.json").is_file()


def test_the_start_sweeps_what_killed_conversions_left_in_the_cache(
    engine: TTS, tmp_path: Path
) -> None:
    """R13: a worker killed during a conversion left its staging folder for good."""
    assert engine.cache_dir is not None
    left = Cache.at(engine.cache_dir).root / "converted" / ".aivmx-0123abcd-v1.k1ll3d"
    (left / "bundle").mkdir(parents=True)
    (left / "bundle" / "decoder.onnx").write_bytes(b"\0" * 4096)
    with serve(engine, _config(tmp_path)):
        assert not left.exists()


def test_a_full_disk_during_the_conversion_is_a_507_not_the_voice_files_fault(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R17: a full cache during the conversion was a 422 'the graph is not a usable SBV2
    JP-Extra export' (ONNX Runtime's words for a failed write), blaming a good file."""

    def onnxruntime_full(source: Path, target: Path) -> None:
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : ToGraphProtoWithExternalInitializers")

    monkeypatch.setattr("yomiage.export.optimize.optimize_graph", onnxruntime_full)
    monkeypatch.setattr(
        "shutil.disk_usage", lambda path: shutil._ntuple_diskusage(1 << 30, 1 << 30, 4096)
    )
    with server.client() as http:
        answer = _upload(http, variant(version="5.0.0"))  # not converted before: converts
        assert answer.status_code == 507, answer.text
        detail = answer.json()["detail"]
        assert "no space left" in detail and "not a usable" not in detail
        assert http.get("/aivm_models").json() == {}
    assert _leftovers(server) == []


def test_a_refused_upload_names_the_clients_file_not_the_partial(server: RunningServer) -> None:
    """R17: 422s named the server's partial file ('.../.upload-sye4f9l1.partial: data.
    sampling_rate 1 is not a sample rate')."""
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_hyper_parameters":
            config = json.loads(prop.value)
            config["data"]["sampling_rate"] = 1
            prop.value = json.dumps(config)
    with server.client() as http:
        answer = _upload(http, model.SerializeToString(), name="my voice.aivmx")
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert "'my voice.aivmx'" in detail and "sampling_rate" in detail
    assert ".partial" not in detail and str(server.state.config.models_dir) not in detail


def _blocking_aivm_info(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[int]]:
    """Make building an AivmInfo wait for the returned event (wherever a module of the
    model manager imported it); the list counts the builds."""
    from yomiage.voicevox import aivm_info as module

    release, calls, real = threading.Event(), [], module.aivm_info

    def slow(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        assert release.wait(60)
        return real(*args, **kwargs)

    for loaded in list(sys.modules.values()):
        name = getattr(loaded, "__name__", "")
        if name.startswith("yomiage.server.voicevox") and getattr(loaded, "aivm_info", 0) is real:
            monkeypatch.setattr(loaded, "aivm_info", slow)
    return release, calls


def test_a_listing_is_built_off_the_event_loop(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R14: each GET /aivm_models built and encoded every manifest on the event loop:
    four at once took 5.5 s each, and /health waited 3.4 s meanwhile."""
    with server.client() as http:
        assert _upload(http, AIVMX.read_bytes()).status_code == 204
    release, calls = _blocking_aivm_info(monkeypatch)
    answers: list[httpx.Response] = []

    def listing() -> None:
        with server.client(timeout=60) as http:
            answers.append(http.get("/aivm_models"))

    thread = threading.Thread(target=listing)
    try:
        thread.start()
        assert _until(lambda: len(calls) == 1)  # the build is under way, and waits
        with server.client(timeout=10) as http:  # the event loop is free meanwhile
            assert http.get("/health").status_code == 200
    finally:
        release.set()
        thread.join(60)
    assert [a.status_code for a in answers] == [200] and UUID in answers[0].json()


def test_speaker_info_cuts_a_huge_licence(server: RunningServer) -> None:
    """R14: /speaker_info sent a 5 MB licence whole."""
    from yomiage.voicevox.aivm_info import MAX_POLICY_CHARS

    licence = "第1条 " + "この音声は自由に使えます。" * (MAX_POLICY_CHARS // 10)
    with server.client() as http:
        assert _upload(http, variant(license=licence)).status_code == 204
        model = http.get(f"/aivm_models/{UUID}").json()
        assert model["manifest"]["license"] == licence  # whole where the manifest is
        speaker = model["speakers"][0]["speaker"]["speaker_uuid"]
        info = http.get("/speaker_info", params={"speaker_uuid": speaker}).json()
    assert info["policy"].startswith(licence[:1000])
    assert len(info["policy"]) < MAX_POLICY_CHARS + 200 and UUID in info["policy"]


def test_a_listing_reads_an_unchanged_manifest_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R14: every GET /aivm_models parsed the manifest of each AIVMX voice the server was
    started with again (the installed ones the store keeps per file, mtime and size)."""
    from yomiage.aivmx import metadata

    voice = tmp_path / "voice.aivmx"
    shutil.copy(AIVMX, voice)
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path / "cache",
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    with tts.load("started-with", source=voice).prepare():
        reads: list[Path] = []

        def counted(path: Path) -> dict[str, str]:
            reads.append(path)
            return metadata.read_metadata(path)

        monkeypatch.setattr("yomiage.server.voicevox.aivm_voices.read_metadata", counted)
        config = ServerConfig(warmup=False, models_dir=tmp_path / "models")
        service = LocalService(tts, {"started-with": str(voice)})  # as serve's worker has it
        with serve(service, config) as running, running.client() as http:  # type: ignore[arg-type]
            listings = [http.get("/aivm_models").json() for _ in range(3)]
            assert list(listings[0]) == [UUID] and listings[0] == listings[2]
            assert [p for p in reads if p == voice] == [voice]
            os.utime(voice, ns=(time.time_ns(), time.time_ns() + 10**9))  # changed: read again
            assert list(http.get("/aivm_models").json()) == [UUID]
            assert [p for p in reads if p == voice] == [voice, voice]
