"""Whole responses are made in files and sent in blocks, never held whole by the server
(issue 49, item 9: a 5,000-character WAV took the HTTP process from 70 to 607 MB and
the worker 380 MB past its budget, as it was joined, pickled and encoded in memory)."""

from __future__ import annotations

import functools
import io
import json
import socket
import tempfile
import threading
import time
import wave
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yomiage.audio import Audio
from yomiage.audio.formats import encode
from yomiage.audio.resample import resample
from yomiage.audio.spool import BLOCK_SAMPLES, SpooledAudio
from yomiage.server.encoding import OutputFormat, SpoolError, encode_spooled

TEXT = "今日はいい天気ですね。午後から公園へ散歩に出かけましょう。"
LONG = "今日はいい天気ですね。" * 40  # ~64 s of audio from the tiny voice: a 5.6 MB WAV
QUERY_TEXT = "今日はいい天気ですね。" * 25  # its AudioQuery fits the default body limit


def _old_whole(samples: np.ndarray, fmt: OutputFormat) -> bytes:
    """What the server sent before: the whole audio resampled, normalized and encoded at once."""
    if fmt.resampled:
        samples = resample(samples, fmt.source_rate, fmt.sample_rate)
    return encode(Audio(samples, fmt.sample_rate).to_int16(), fmt.sample_rate, fmt.name)


def _spooled(path: Path, samples: np.ndarray, rate: int) -> SpooledAudio:
    samples.astype(np.float32).tofile(path)
    return SpooledAudio(str(path), rate, len(samples), float(np.abs(samples).max()))


@pytest.mark.parametrize(
    ("name", "rate"),
    [("wav", 44100), ("pcm", 44100), ("wav", 16000), ("pcm", 24000), ("flac", 44100),
     ("mp3", 24000)],
)  # fmt: skip
def test_a_spooled_response_is_encoded_as_the_whole_one_was(
    tmp_path: Path, name: str, rate: int
) -> None:
    """Block by block from a file, byte for byte what encoding the whole array made."""
    if name in ("flac", "mp3"):
        pytest.importorskip("soundfile")
    noise = np.random.default_rng(3).standard_normal(3 * BLOCK_SAMPLES + 1234)
    samples = (0.3 * noise).astype(np.float32)
    samples[2 * BLOCK_SAMPLES + 7] = 0.9  # the peak in a later block than the first
    fmt = OutputFormat(name, rate, 44100, stream=False)
    out = tmp_path / f"out.{name}"
    out.touch()
    size = encode_spooled(_spooled(tmp_path / "a.f32", samples, 44100), fmt, str(out))
    data = out.read_bytes()
    assert size == len(data)
    if name == "mp3":  # an encoder's bytes may hold its own state; the audio is what counts
        assert data[:2] in (b"ID", b"\xff\xfb", b"\xff\xf3", b"\xff\xe3")
        return
    assert data == _old_whole(samples, fmt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.f32", f"out.{name}"]


def test_a_silent_spool_is_encoded_without_dividing_by_its_peak(tmp_path: Path) -> None:
    path = tmp_path / "s.f32"
    np.zeros(1000, np.float32).tofile(path)
    out = tmp_path / "out.wav"
    encode_spooled(SpooledAudio(str(path), 44100, 1000, 0.0), OutputFormat("wav", 44100, 44100,
                   stream=False), str(out))  # fmt: skip
    with wave.open(str(out)) as w:
        assert w.getnframes() == 1000
        assert not any(w.readframes(1000))


def test_a_spool_that_cannot_be_written_says_so_without_its_path(tmp_path: Path) -> None:
    path = tmp_path / "s.f32"
    np.zeros(10, np.float32).tofile(path)
    fmt = OutputFormat("wav", 44100, 44100, stream=False)
    missing = tmp_path / "gone" / "out.wav"
    with pytest.raises(SpoolError, match="temporary file") as caught:
        encode_spooled(SpooledAudio(str(path), 44100, 10, 0.0), fmt, str(missing))
    assert str(tmp_path) not in str(caught.value)


# -- the server ------------------------------------------------------------------------

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig, create_app  # noqa: E402
from yomiage.server.spool import SEND_BLOCK  # noqa: E402


class _Recorder:
    """The app behind a recorder of every response's start and body messages."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.responses: dict[str, dict[str, Any]] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record: dict[str, Any] = {"bodies": [], "headers": {}}
        key = dict(scope["headers"]).get(b"x-test", b"").decode()
        if key:
            self.responses[key] = record

        async def recorded(message: Any) -> None:
            if message["type"] == "http.response.start":
                record["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
            elif message["type"] == "http.response.body":
                record["bodies"].append(len(message.get("body", b"")))
            await send(message)

        await self.app(scope, receive, recorded)


@contextmanager
def _serving(engine: Any, config: ServerConfig) -> Iterator[tuple[str, _Recorder]]:
    recorder = _Recorder(create_app(engine, config))
    server = uvicorn.Server(
        uvicorn.Config(recorder, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < end, "the server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", recorder
    finally:
        server.should_exit = True
        thread.join(15)


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's temporary folder, to see what it leaves there."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _pcm(wav: bytes) -> np.ndarray:
    with wave.open(io.BytesIO(wav)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert int(np.abs(got.astype(np.int32) - want).max()) <= 1


def _sent_in_blocks(record: dict[str, Any], data: bytes) -> None:
    """The body left in several messages, none larger than a block, as long as it said."""
    sizes = [n for n in record["bodies"] if n]
    assert sum(sizes) == len(data) == int(record["headers"]["content-length"])
    assert len(sizes) > 1 and max(sizes) <= SEND_BLOCK, sizes


@pytest.mark.server
def test_a_long_whole_wav_is_sent_from_a_file_in_blocks(engine: TTS, temp_dir: Path) -> None:
    """The route never held the whole body: it came out a block at a time, with its
    length known from the file, the same audio as the library's, and no file stays."""
    with (
        _serving(engine, ServerConfig(warmup=False)) as (url, recorder),
        httpx.Client(base_url=url, timeout=120) as http,
    ):
        native = http.post("/tts", json={"text": LONG, "seed": 5, "stream": False},
                           headers={"x-test": "tts"})  # fmt: skip
        openai = http.post(
            "/v1/audio/speech",
            json={"model": "tts-1", "voice": "tiny", "input": LONG, "response_format": "wav",
                  "seed": 5, "stream": False},
            headers={"x-test": "openai"},
        )  # fmt: skip
    assert native.status_code == openai.status_code == 200
    assert native.headers["content-type"] == "audio/wav"
    _sent_in_blocks(recorder.responses["tts"], native.content)
    _sent_in_blocks(recorder.responses["openai"], openai.content)
    audio = engine.speakers["tiny"].generate(LONG, seed=5)
    np.testing.assert_array_equal(_pcm(native.content), _pcm(audio.to_bytes("wav")))
    assert list(temp_dir.iterdir()) == []


@pytest.mark.server
def test_a_long_voicevox_synthesis_is_sent_from_a_file_in_blocks(
    engine: TTS, temp_dir: Path
) -> None:
    with (
        _serving(engine, ServerConfig(warmup=False)) as (url, recorder),
        httpx.Client(base_url=url, timeout=120) as http,
    ):
        style = http.get("/speakers").json()[0]["styles"][0]["id"]
        query = http.post("/audio_query", params={"speaker": style, "text": QUERY_TEXT}).json()
        body = json.dumps(query)
        headers = {"content-type": "application/json"}
        wav = http.post("/synthesis", params={"speaker": style}, content=body,
                        headers={**headers, "x-test": "synthesis"})  # fmt: skip
        many = http.post("/multi_synthesis", params={"speaker": style},
                         content=json.dumps([query, query]),
                         headers={**headers, "x-test": "multi"})  # fmt: skip
    assert wav.status_code == many.status_code == 200
    _sent_in_blocks(recorder.responses["synthesis"], wav.content)
    _sent_in_blocks(recorder.responses["multi"], many.content)
    with zipfile.ZipFile(io.BytesIO(many.content)) as archive:
        assert archive.namelist() == ["001.wav", "002.wav"]
        assert archive.read("001.wav") == archive.read("002.wav") == wav.content
    assert list(temp_dir.iterdir()) == []


@pytest.mark.server
def test_a_client_that_leaves_a_whole_response_leaves_no_file(engine: TTS, temp_dir: Path) -> None:
    """Gone while the audio was made, or after the first block of the body: the files
    are removed either way."""
    with (
        _serving(engine, ServerConfig(warmup=False)) as (url, _),
        httpx.Client(base_url=url, timeout=120) as http,
    ):
        with http.stream("POST", "/tts", json={"text": LONG, "stream": False}) as response:
            assert response.status_code == 200
            next(response.iter_raw(SEND_BLOCK))  # one block, then the client hangs up
        # gone while the audio is made: admitted (in flight), then hangs up
        body = json.dumps({"text": LONG * 3, "stream": False}).encode()
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /tts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            )
            end = time.monotonic() + 60
            while "yomiage_in_flight_requests 1" not in http.get("/metrics").text:
                assert time.monotonic() < end, "the request was never admitted"
                time.sleep(0.01)
        end = time.monotonic() + 60
        while http.get("/metrics").text.count("yomiage_in_flight_requests 0") == 0:
            assert time.monotonic() < end, "the requests did not stop"
            time.sleep(0.05)
    assert list(temp_dir.iterdir()) == []


@pytest.mark.server
def test_the_worker_encodes_a_whole_response_from_the_file(
    test_voice: Path, engine: TTS, temp_dir: Path
) -> None:
    """Through the supervised worker, which reads the spooled audio from its file (the
    whole samples no longer cross the pipe) and writes the encoded body into another."""
    from tests import crashing_service
    from yomiage.server.engine.worker import WorkerService

    worker = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    try:
        with (
            _serving(worker, ServerConfig(warmup=False)) as (url, recorder),
            httpx.Client(base_url=url, timeout=120) as http,
        ):
            wav = http.post("/tts", json={"text": TEXT * 8, "seed": 2, "stream": False},
                            headers={"x-test": "wav"})  # fmt: skip
            pcm = http.post("/tts", json={"text": TEXT, "seed": 2, "format": "pcm",
                                          "sample_rate": 16000, "stream": False})  # fmt: skip
    finally:
        worker.close()
    assert wav.status_code == pcm.status_code == 200
    _sent_in_blocks(recorder.responses["wav"], wav.content)
    # The worker's engine runs one thread, the session's two: the sums round apart by a
    # least significant bit now and then.
    audio = engine.speakers["tiny"].generate(TEXT * 8, seed=2)
    _close(_pcm(wav.content), _pcm(audio.to_bytes("wav")))
    short = engine.speakers["tiny"].generate(TEXT, seed=2)
    fmt = OutputFormat("pcm", 16000, short.sample_rate, stream=False)
    _close(np.frombuffer(pcm.content, "<i2"), np.frombuffer(_old_whole(short.samples, fmt), "<i2"))
    assert list(temp_dir.iterdir()) == []
