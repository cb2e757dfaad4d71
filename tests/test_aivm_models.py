"""AivisSpeech's /aivm_models routes over HTTP, as AivisSpeech documents them: install a
voice (an upload or a URL), list it, synthesize with its styles, unload, load, update and
uninstall it while the server runs; refusals leave nothing behind."""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, audio_query, listening_url, serve
from yomiage import TTS
from yomiage.server import ServerConfig
from yomiage.voicevox.ids import style_id

pytestmark = pytest.mark.server

AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"


def _model_uuid() -> str:
    import json

    from yomiage.aivmx.metadata import read_metadata

    return str(json.loads(read_metadata(AIVMX)["aivm_manifest"])["uuid"])


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"),
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    yield tts
    tts.close()


@pytest.fixture
def server(engine: TTS, tmp_path: Path) -> Iterator[RunningServer]:
    config = ServerConfig(warmup=False, models_dir=tmp_path / "models", model_api="write",
                          max_upload_bytes=8 << 20)  # fmt: skip
    with serve(engine, config) as running:
        yield running
    for name in [n for n in engine.speakers if n != "tiny"]:
        engine.unload(name)


def _upload(http: httpx.Client, data: bytes, name: str = "voice.aivmx") -> httpx.Response:
    return http.post(
        "/aivm_models/install", files={"file": (name, data, "application/octet-stream")}
    )


def _leftovers(server: RunningServer) -> list[str]:
    folder = server.state.config.models_dir
    return (
        sorted(p.name for p in folder.iterdir() if p.suffix != ".json") if folder.exists() else []
    )


def _wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as w:
        return w.getnframes() / w.getframerate()


def test_install_list_synthesize_uninstall(server: RunningServer) -> None:
    uuid = _model_uuid()
    with server.client() as http:
        assert http.get("/aivm_models").json() == {}
        response = _upload(http, AIVMX.read_bytes())
        assert response.status_code == 204, response.text
        models = http.get("/aivm_models").json()
        assert list(models) == [uuid]
        info = models[uuid]
        assert info["is_loaded"] is True and info["manifest"]["uuid"] == uuid
        assert info["file_size"] == AIVMX.stat().st_size
        assert Path(info["file_path"]).parent == server.state.config.models_dir
        speaker = info["speakers"][0]["speaker"]
        style = speaker["styles"][0]
        assert style["id"] == style_id(speaker["speaker_uuid"], 0)
        assert http.get(f"/aivm_models/{uuid}").json() == info
        # The new voice is in /speakers and speaks through VOICEVOX's and OpenAI's routes.
        listed = {s["id"] for sp in http.get("/speakers").json() for s in sp["styles"]}
        assert style["id"] in listed
        query = audio_query(server, style["id"], "こんにちは。")
        wav = http.post("/synthesis", params={"speaker": style["id"]}, json=query)
        assert wav.status_code == 200 and _wav_seconds(wav.content) > 0.2
        name = info["manifest"]["name"]
        assert name in [v["name"] for v in http.get("/v1/audio/voices").json()["voices"]]
        speech = http.post("/v1/audio/speech", json={"model": "tts-1", "voice": name,
                                                      "input": "こんにちは。", "response_format": "wav"})  # fmt: skip
        assert speech.status_code == 200, speech.text
        # Unload: gone from /speakers (its style 404s), still installed; load brings it back.
        assert http.post(f"/aivm_models/{uuid}/unload").status_code == 204
        assert http.get(f"/aivm_models/{uuid}").json()["is_loaded"] is False
        assert (
            http.post("/synthesis", params={"speaker": style["id"]}, json=query).status_code == 404
        )
        assert http.post(f"/aivm_models/{uuid}/load").status_code == 204
        assert http.get(f"/aivm_models/{uuid}").json()["is_loaded"] is True
        assert (
            http.post("/synthesis", params={"speaker": style["id"]}, json=query).status_code == 200
        )
        # Uninstall: the file and the voice are gone.
        assert http.delete(f"/aivm_models/{uuid}/uninstall").status_code == 204
        assert http.get("/aivm_models").json() == {}
        assert http.get(f"/aivm_models/{uuid}").status_code == 404
        assert style["id"] not in {
            s["id"] for sp in http.get("/speakers").json() for s in sp["styles"]
        }
    assert _leftovers(server) == []


def test_install_from_a_url_and_update_from_it(server: RunningServer, tmp_path: Path) -> None:
    uuid = _model_uuid()
    source = tmp_path / "published" / "voice.aivmx"
    source.parent.mkdir()
    shutil.copy(AIVMX, source)
    with server.client() as http:
        response = http.post("/aivm_models/install", data={"url": str(source)})
        assert response.status_code == 204, response.text
        assert http.get(f"/aivm_models/{uuid}").json()["is_loaded"] is True
        # The same file at the source: nothing to update (AivisSpeech's 422).
        same = http.post(f"/aivm_models/{uuid}/update")
        assert same.status_code == 422 and "detail" in same.json()
        # Multipart with a url field works the same way.
        again = http.post("/aivm_models/install", files={"url": (None, source.as_uri())})
        assert again.status_code == 204, again.text
        assert list(http.get("/aivm_models").json()) == [uuid]


def test_bad_installs_leave_nothing_behind(server: RunningServer) -> None:
    with server.client() as http:
        broken = _upload(http, AIVMX.read_bytes()[: 1 << 20])
        assert broken.status_code == 422 and "detail" in broken.json()
        assert _upload(http, os.urandom(4096)).status_code == 422
        too_big = _upload(http, b"\0" * (9 << 20))
        assert too_big.status_code == 413 and "--max-upload-mb" in too_big.json()["detail"]
        neither = http.post("/aivm_models/install", files={"other": (None, "x")})
        assert neither.status_code == 422
        assert http.post("/aivm_models/install", json={"url": "x"}).status_code == 422
        # A form of many parts or big fields is refused as it arrives, never kept.
        parts = {f"f{i}": (None, "x") for i in range(40)}
        assert http.post("/aivm_models/install", files=parts).status_code == 422
        big = {f"f{i}": (None, "x" * 4000) for i in range(4)}
        assert http.post("/aivm_models/install", files=big).status_code == 422
        missing = http.post("/aivm_models/install", data={"url": "/no/such/voice.aivmx"})
        assert missing.status_code == 422, missing.text
        assert http.get("/aivm_models").json() == {}
        unknown = "00000000-0000-4000-8000-000000000000"
        for method, path in (("GET", ""), ("POST", "/load"), ("POST", "/unload"),
                             ("POST", "/update"), ("DELETE", "/uninstall")):  # fmt: skip
            answer = http.request(method, f"/aivm_models/{unknown}{path}")
            assert answer.status_code == 404 and unknown in answer.json()["detail"]
    assert _leftovers(server) == []
    assert [n for n in server.state.voices] == ["tiny"]


def test_a_failed_reinstall_keeps_the_installed_voice(server: RunningServer) -> None:
    uuid = _model_uuid()
    with server.client() as http:
        assert _upload(http, AIVMX.read_bytes()).status_code == 204
        assert _upload(http, AIVMX.read_bytes()[:-4096]).status_code == 422
        info = http.get(f"/aivm_models/{uuid}").json()
        assert info["is_loaded"] is True and info["file_size"] == AIVMX.stat().st_size
        # Installing the same voice again swaps it in under the same name.
        assert _upload(http, AIVMX.read_bytes()).status_code == 204
        assert list(http.get("/aivm_models").json()) == [uuid]
        assert len(server.state.voices) == 2
    assert _leftovers(server) == [f"{uuid}.aivmx"]


def test_model_api_read_and_off(engine: TTS, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(AIVMX, models / "copied-by-hand.aivmx")
    uuid = _model_uuid()
    read = ServerConfig(warmup=False, models_dir=models)  # model_api defaults to read
    with serve(engine, read) as running, running.client() as http:
        assert list(http.get("/aivm_models").json()) == [uuid]  # a file copied in is listed
        refused = _upload(http, AIVMX.read_bytes())
        assert refused.status_code == 403 and "--model-api write" in refused.json()["detail"]
        assert http.delete(f"/aivm_models/{uuid}/uninstall").status_code == 403
        assert http.post(f"/aivm_models/{uuid}/update").status_code == 403
        assert http.post(f"/aivm_models/{uuid}/load").status_code == 204  # read may load
        assert http.post(f"/aivm_models/{uuid}/unload").status_code == 204
    assert sorted(p.name for p in models.iterdir()) == ["copied-by-hand.aivmx"]
    off = ServerConfig(warmup=False, models_dir=models, model_api="off")
    with serve(engine, off) as running, running.client() as http:
        assert http.get("/aivm_models").status_code == 404


def test_a_voice_the_server_started_with_stays_loaded(tmp_path: Path) -> None:
    """A voice the program that made the app loaded (as ``--model`` does) is not the model
    manager's: it is never unloaded, even when its file is in the models folder."""
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(AIVMX, models / "voice.aivmx")
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path / "cache",
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    with tts.load("voice", source=models / "voice.aivmx").prepare():
        config = ServerConfig(warmup=False, models_dir=models, model_api="write")
        with serve(tts, config) as running, running.client() as http:
            uuid = _model_uuid()
            refused = http.post(f"/aivm_models/{uuid}/unload")
            assert refused.status_code == 400 and "started with" in refused.json()["detail"]
            assert http.get(f"/aivm_models/{uuid}").json()["is_loaded"] is True
            assert [v["name"] for v in http.get("/v1/audio/voices").json()["voices"]] == ["voice"]


def _wait_ready(url: str, process: subprocess.Popen[str]) -> None:
    end = time.monotonic() + 60
    while httpx.get(f"{url}/ready").status_code != 200:
        assert time.monotonic() < end and process.poll() is None
        time.sleep(0.1)


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def test_serve_installs_through_its_worker_and_loads_them_at_the_next_start(
    test_voice: Path, tmp_path: Path
) -> None:
    """`yomiage serve` (engine in its supervised worker): an installed voice speaks at once
    and is loaded again at the next start, with no --model for it."""
    models = tmp_path / "models"
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "1", "--models-dir", str(models),
               "--model-api", "write", "--decoder", "fp32"]  # fmt: skip
    uuid = _model_uuid()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = listening_url(process)
        _wait_ready(url, process)
        with httpx.Client(base_url=url, timeout=120) as http:
            assert _upload(http, AIVMX.read_bytes()).status_code == 204
            style = http.get(f"/aivm_models/{uuid}").json()["speakers"][0]["speaker"]["styles"][0]
            query = http.post(
                "/audio_query", params={"text": "こんにちは。", "speaker": style["id"]}
            )
            wav = http.post("/synthesis", params={"speaker": style["id"]}, json=query.json())
            assert wav.status_code == 200 and _wav_seconds(wav.content) > 0.2
    finally:
        _stop(process)
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = listening_url(process)
        _wait_ready(url, process)
        with httpx.Client(base_url=url, timeout=120) as http:
            info: dict[str, Any] = http.get(f"/aivm_models/{uuid}").json()
            assert info["is_loaded"] is True
            names = [v["name"] for v in http.get("/v1/audio/voices").json()["voices"]]
            assert names == ["tiny", info["manifest"]["name"]]
    finally:
        _stop(process)


def test_install_is_guarded_like_every_write(engine: TTS, tmp_path: Path) -> None:
    config = ServerConfig(warmup=False, models_dir=tmp_path / "models", model_api="write",
                          api_key="k-1", body_timeout=0.5)  # fmt: skip
    key = {"Authorization": "Bearer k-1"}
    with serve(engine, config) as running, running.client() as http:
        assert _upload(http, AIVMX.read_bytes()).status_code == 401
        page = {**key, "Origin": "https://elsewhere.example"}  # a page on another site
        files = {"file": ("v.aivmx", AIVMX.read_bytes())}
        refused = http.post("/aivm_models/install", files=files, headers=page)
        assert refused.status_code == 403
        # A client that stalls mid-upload gets 408 and leaves no partial file.
        with socket.create_connection(("127.0.0.1", running.port)) as sock:
            head = ("POST /aivm_models/install HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Authorization: Bearer k-1\r\nContent-Length: 100000\r\n"
                    "Content-Type: multipart/form-data; boundary=XyZ\r\n\r\n"
                    '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="v"\r\n\r\n')  # fmt: skip
            sock.sendall(head.encode() + b"\0" * 1000)
            sock.settimeout(10)
            answer = sock.recv(4096).decode("latin-1")
        assert answer.startswith("HTTP/1.1 408"), answer[:200]
        assert _leftovers(running) == []
        assert http.get("/aivm_models", headers=key).json() == {}


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data; boundary=" + "b" * 5000, b"--b\r\n"),
        ("multipart/form-data", b"--x\r\n\r\n--x--\r\n"),
        ("multipart/form-data; boundary=x", b"\x00\xff" * 500),
        ("multipart/form-data; boundary=x", b'--x\r\nContent-Disposition: form-data; name="file"'),
        ("multipart/form-data; boundary=x", b"--x\r\nno colon here\r\n\r\nv\r\n--x--\r\n"),
        (
            "multipart/form-data; boundary=x",
            b'--x\r\nContent-Disposition: form-data; name="url"\r\n\r\n\xff\xfe\r\n--x--\r\n',
        ),
        ("application/x-www-form-urlencoded", b"url=%ff%fe&url=" + b"a" * 100),
        ("application/x-www-form-urlencoded", b"%%%%"),
        ("text/plain", b"hello"),
        ("", b"x"),
    ],
)
def test_malformed_install_forms_are_4xx(
    server: RunningServer, content_type: str, body: bytes
) -> None:
    with server.client() as http:
        answer = http.post("/aivm_models/install", content=body,
                           headers={"Content-Type": content_type} if content_type else {})  # fmt: skip
        assert 400 <= answer.status_code < 500, answer.text
        assert "detail" in answer.json()
    assert _leftovers(server) == []
