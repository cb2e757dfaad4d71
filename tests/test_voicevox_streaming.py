"""VOICEVOX's ``/streaming_synthesis`` and ``/cancellable_synthesis`` (issue 25, item 3),
on loopback with the tiny test voice.

voicevox-client 0.4.1 (the client tests/test_voicevox.py drives) has no method for
either route, so these tests speak HTTP themselves.
"""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
import wave
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, audio_query, first_style, hold_until_cancelled, serve
from yomiage import TTS
from yomiage.errors import Cancelled
from yomiage.server import ServerConfig
from yomiage.server.engine.service import LocalChunkSource
from yomiage.server.voicevox.synthesis import VoxSynthesis

pytestmark = pytest.mark.server

TEXT = "こんにちは、今日はいい天気ですね。散歩に行きましょう。"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    # fp32: the streamed windows and /synthesis's larger ones agree to float precision.
    tts = TTS(threads=2, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"))
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    with serve(tts, ServerConfig(warmup=False)) as running:
        yield running
    tts.close()


@pytest.fixture(scope="module")
def speaker(server: RunningServer) -> int:
    return first_style(server)


@pytest.fixture(scope="module")
def query(server: RunningServer, speaker: int) -> dict[str, Any]:
    return audio_query(server, speaker, TEXT)


def _stream(
    server: RunningServer, speaker: int, query: dict[str, Any], **params: Any
) -> tuple[int, list[bytes]]:
    """Status and the body's pieces as they arrived."""
    with (
        server.client() as http,
        http.stream(
            "POST", "/streaming_synthesis", params={"speaker": speaker, **params}, json=query
        ) as response,
    ):
        return response.status_code, list(response.iter_raw())


def _wav(data: bytes) -> tuple[int, int, np.ndarray]:
    with wave.open(io.BytesIO(data)) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        return w.getframerate(), w.getnchannels(), frames


def _synthesis(server: RunningServer, speaker: int, query: dict[str, Any]) -> bytes:
    with server.client() as http:
        response = http.post("/synthesis", params={"speaker": speaker}, json=query)
        assert response.status_code == 200, response.text
        return response.content


def _assert_same_but_for_gain(whole: np.ndarray, streamed: np.ndarray) -> None:
    """``whole`` (normalized to its peak) is ``streamed`` times one factor, to within
    16-bit rounding on both sides and the decoder's float precision."""
    assert len(whole) == len(streamed)
    s, w = streamed.astype(np.float64), whole.astype(np.float64)
    gain = float(np.dot(w, s) / np.dot(s, s))
    assert gain >= 1.0 - 1e-3  # the stream is never louder: /synthesis uses full scale
    assert np.abs(w - gain * s).max() <= gain / 2 + 2


def test_the_stream_is_one_wav_with_the_audio_of_synthesis(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    status, pieces = _stream(server, speaker, query, segment_length=0.05)
    assert status == 200
    assert len(pieces) > 1  # sent in parts, not as one body
    data = b"".join(pieces)
    riff, size, kind = struct.unpack("<4sI4s", data[:12])
    assert (riff, kind, data[36:40]) == (b"RIFF", b"WAVE", b"data")
    assert size == struct.unpack("<I", data[40:44])[0] == 0xFFFFFFFF  # length unknown up front
    rate, channels, streamed = _wav(data)
    assert (rate, channels) == (44100, 1)
    _, _, whole = _wav(_synthesis(server, speaker, query))
    _assert_same_but_for_gain(whole, streamed)


def test_volume_silences_rate_and_stereo_match_synthesis(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    edited = {**query, "volumeScale": 0.7, "prePhonemeLength": 0.3, "postPhonemeLength": 0.2,
              "speedScale": 1.25, "outputSamplingRate": 24000, "outputStereo": True}  # fmt: skip
    status, pieces = _stream(server, speaker, edited)
    assert status == 200
    rate, channels, streamed = _wav(b"".join(pieces))
    assert (rate, channels) == (24000, 2)
    assert np.array_equal(streamed[0::2], streamed[1::2])
    whole_rate, whole_channels, whole = _wav(_synthesis(server, speaker, edited))
    assert (whole_rate, whole_channels) == (24000, 2)
    _assert_same_but_for_gain(whole, streamed)
    pre = int(44100 * 0.3 / 1.25) * 24000 // 44100  # the leading silence, resampled
    assert not streamed[0 : 2 * (pre - 30)].any()
    # volumeScale scales the stream itself (nothing normalizes it)
    _, _, plain = _wav(b"".join(_stream(server, speaker, {**edited, "volumeScale": 1.0})[1]))
    peak = np.abs(plain.astype(np.float64)).max()
    assert np.abs(streamed.astype(np.float64)).max() == pytest.approx(0.7 * peak, abs=2)


def test_start_offset_skips_the_start_and_past_the_end_is_400(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    _, full = _wav(b"".join(_stream(server, speaker, query)[1]))[1:]
    status, pieces = _stream(server, speaker, query, start_offset=0.5)
    assert status == 200
    _, _, tail = _wav(b"".join(pieces))
    assert len(tail) == len(full) - round(0.5 * 44100)
    assert np.abs(tail.astype(np.int32) - full[round(0.5 * 44100) :]).max() <= 2
    seconds = len(full) / 44100
    with server.client() as http:
        past = http.post("/streaming_synthesis", json=query,
                         params={"speaker": speaker, "start_offset": seconds + 0.01})  # fmt: skip
    assert past.status_code == 400
    assert past.headers["content-type"] == "application/json"
    assert "start_offset" in past.json()["detail"]
    server.wait_idle()


def test_bad_requests_are_voicevox_shaped(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    with server.client() as http:
        unknown = http.post("/streaming_synthesis", params={"speaker": 7}, json=query)
        assert unknown.status_code == 404 and "style 7" in unknown.json()["detail"]
        bad = http.post("/streaming_synthesis", params={"speaker": speaker},
                        json={"accent_phrases": [{"moras": [], "accent": 1}]})  # fmt: skip
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "accent_phrases", 0, "moras"]
        not_json = http.post("/streaming_synthesis", params={"speaker": speaker}, content=b"{",
                             headers={"Content-Type": "application/json"})  # fmt: skip
        assert not_json.status_code == 422
        for name, value in (("segment_length", 0), ("start_offset", -1), ("start_offset", "x"),
                            ("segment_length", "nan")):  # fmt: skip
            wrong = http.post("/streaming_synthesis", json=query,
                              params={"speaker": speaker, name: value})  # fmt: skip
            assert wrong.status_code == 422, (name, value)
            assert wrong.json()["detail"][0]["loc"] == ["query", name], (name, value)


def test_the_audio_limit_holds_before_and_while_streaming(
    query: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    limited = ServerConfig(warmup=False, max_audio_seconds=2.0)  # TEXT makes about 4 s
    with (
        TTS(threads=1).load("tiny", source=TEST_VOICES / "tiny").prepare() as tts,
        serve(tts, limited) as small,
        small.client() as http,
    ):
        speaker = http.get("/speakers").json()[0]["styles"][0]["id"]
        params = {"speaker": speaker, "segment_length": 1000}
        estimated = http.post("/streaming_synthesis", params=params, json=query)
        assert estimated.status_code == 413 and "about" in estimated.json()["detail"]
        # The voice may read longer than the query said: checked on the audio made.
        monkeypatch.setattr(VoxSynthesis, "check_cost", lambda self, queries: None)
        made = http.post("/streaming_synthesis", params=params, json=query)
        assert made.status_code == 413 and "2 s a request" in made.json()["detail"]
        with pytest.raises(httpx.RemoteProtocolError):  # cut once it has begun
            _stream(small, speaker, query)
        small.wait_idle()


def test_the_manifest_says_streaming_synthesis(server: RunningServer) -> None:
    with server.client() as http:
        features = http.get("/engine_manifest").json()["supported_features"]
    assert features["streaming_synthesis"] is True


def test_first_bytes_leave_before_the_rest_is_made(
    server: RunningServer, speaker: int, query: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second chunk is made only once the client holds the first bytes (no timing)."""
    real_next = LocalChunkSource.next
    calls: list[bool] = []
    client_has_bytes = threading.Event()

    def next_after_the_client_heard(self: LocalChunkSource) -> Any:
        if calls:
            calls.append(client_has_bytes.wait(30))
        else:
            calls.append(True)
        return real_next(self)

    monkeypatch.setattr(LocalChunkSource, "next", next_after_the_client_heard)
    with (
        server.client() as http,
        http.stream(
            "POST", "/streaming_synthesis", params={"speaker": speaker}, json=query
        ) as response,
    ):
        assert response.status_code == 200
        pieces = response.iter_raw()
        first = next(pieces)
        client_has_bytes.set()
        rest = b"".join(pieces)
    assert first.startswith(b"RIFF") and len(first) > 44  # the header and audio
    assert len(calls) >= 3 and all(calls)  # >= 2 chunks, then the end
    assert len(_wav(first + rest)[2]) > len(_wav(first)[2])


def test_cancellable_synthesis_answers_the_audio_of_synthesis(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    with server.client() as http:
        response = http.post("/cancellable_synthesis", params={"speaker": speaker}, json=query)
    assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
    assert response.content == _synthesis(server, speaker, query)


def _leave_during(server: RunningServer, path: str, speaker: int, query: dict[str, Any],
                  ready: Callable[[socket.socket], None]) -> None:  # fmt: skip
    """Send the request on a raw socket, wait until ``ready``, then close it."""
    body = json.dumps(query).encode()
    head = (f"POST {path}?speaker={speaker} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head.encode() + body)
        ready(sock)


@pytest.mark.parametrize("path", ["/cancellable_synthesis", "/streaming_synthesis"])
def test_a_client_that_leaves_stops_the_synthesis(
    server: RunningServer, speaker: int, query: dict[str, Any], path: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    started, cancelled = hold_until_cancelled(monkeypatch)
    before = server.metric("yomiage_client_disconnects_total")
    _leave_during(server, path, speaker, query, lambda sock: started.wait(30))
    server.wait_idle(timeout=30)  # the slot is freed once the work has stopped
    assert cancelled.is_set()
    assert server.metric("yomiage_client_disconnects_total") == before + 1


def test_a_client_that_leaves_mid_stream_stops_the_synthesis(
    server: RunningServer, speaker: int, query: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_next = LocalChunkSource.next
    second, cancelled = threading.Event(), threading.Event()

    def first_then_hold(self: LocalChunkSource) -> Any:
        if not second.is_set():
            second.set()
            return real_next(self)
        cancelled.wait(60)  # stands for a long synthesis
        raise Cancelled("the synthesis was cancelled")

    def read_the_first_bytes(sock: socket.socket) -> None:
        sock.settimeout(30)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")

    monkeypatch.setattr(LocalChunkSource, "next", first_then_hold)
    monkeypatch.setattr(LocalChunkSource, "cancel", lambda self: cancelled.set())
    before = server.metric("yomiage_client_disconnects_total")
    _leave_during(server, "/streaming_synthesis", speaker, query, read_the_first_bytes)
    server.wait_idle(timeout=30)
    assert cancelled.is_set()
    assert server.metric("yomiage_client_disconnects_total") == before + 1
