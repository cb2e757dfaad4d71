"""The HTTP server on loopback with the tiny fixture voice: OpenAI routes through the
official ``openai`` client, the rest with plain HTTP, bad inputs included."""

from __future__ import annotations

import base64
import io
import json
import re
import threading
import time
import wave
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from tests.serving import RunningServer, serve  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402

pytestmark = pytest.mark.server

TEXT = "こんにちは。今日はいい天気ですね。"
LONG = "今日はいい天気ですね。" * 100  # about six seconds of work for the tiny voice
KEY = "test-key-123"


@pytest.fixture(scope="module")
def tts(engine: TTS) -> TTS:
    """The session's engine (words in memory; the dictionary tests remove what they add)."""
    return engine


@pytest.fixture(scope="module")
def server(tts: TTS) -> Iterator[RunningServer]:
    config = ServerConfig(
        api_key=KEY, warmup=False, max_concurrency=2, voice_aliases={"narrator": "tiny2"}
    )
    with serve(tts, config) as running:
        yield running


@pytest.fixture
def client(server: RunningServer) -> Any:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)


def _wav(data: bytes) -> tuple[int, np.ndarray]:
    with wave.open(io.BytesIO(data)) as w:
        return w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), "<i2")


def _streamed_wav(data: bytes) -> tuple[int, np.ndarray]:
    """A streamed WAV has 0xFFFFFFFF sizes; read its header by hand."""
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    rate = int.from_bytes(data[24:28], "little")
    assert data[36:40] == b"data" and data[40:44] == b"\xff\xff\xff\xff"
    return rate, np.frombuffer(data[44:], "<i2")


def _expected_pcm(tts: TTS, voice: str, text: str, **fields: Any) -> np.ndarray:
    """What the library streams for the same request (chunks, not normalized)."""
    chunks = tts.speakers[voice].stream(text, **fields)
    return np.concatenate([c.to_int16() for c in chunks])


def _error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"]
    return dict(body["error"])


# -- OpenAI routes through the official client ------------------------------------


def test_openai_client_wav_is_the_librarys_audio(client: Any, tts: TTS) -> None:
    response = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="wav",
        extra_body={"seed": 3, "style": "Happy", "speaker_id": "spk_b"},
    )  # fmt: skip
    rate, pcm = _streamed_wav(response.content)
    assert rate == 44100
    expected = _expected_pcm(tts, "tiny", TEXT, seed=3, style="Happy", speaker_id=1)
    np.testing.assert_array_equal(pcm, expected)


def test_openai_speed_means_faster(client: Any, tts: TTS) -> None:
    """OpenAI's speed 2 is the engine's length scale 0.5."""
    response = client.audio.speech.create(
        model="tts-1", voice="tiny", input=TEXT, response_format="pcm", speed=2.0,
        extra_body={"seed": 1, "sample_rate": 44100},
    )  # fmt: skip
    pcm = np.frombuffer(response.content, "<i2")
    np.testing.assert_array_equal(pcm, _expected_pcm(tts, "tiny", TEXT, seed=1, speed=0.5))


def test_streaming_response_arrives_in_pieces(client: Any) -> None:
    pieces = []
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT * 3, response_format="wav"
    ) as response:
        assert response.headers["content-type"] == "audio/wav"
        assert response.headers["x-accel-buffering"] == "no"
        assert "content-length" not in response.headers
        for piece in response.iter_bytes():
            pieces.append(piece)
    assert len(pieces) > 1
    _, pcm = _streamed_wav(b"".join(pieces))
    assert len(pcm) > 44100


def test_openai_pcm_is_24khz_by_default(client: Any, tts: TTS) -> None:
    response = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="pcm", extra_body={"seed": 2}
    )
    assert response.response.headers["x-sample-rate"] == "24000"
    native = _expected_pcm(tts, "tiny", TEXT, seed=2)
    pcm = np.frombuffer(response.content, "<i2")
    assert len(pcm) == -(-len(native) * 24000 // 44100)


@pytest.mark.parametrize(("fmt", "rate"), [("mp3", 44100), ("flac", 44100), ("opus", 48000)])
def test_openai_encoded_formats(client: Any, fmt: str, rate: int) -> None:
    soundfile = pytest.importorskip("soundfile")
    response = client.audio.speech.create(
        model="tts-1-hd", voice="alloy", input=TEXT, response_format=fmt
    )
    headers = response.response.headers
    assert headers["content-type"] == {"mp3": "audio/mpeg", "flac": "audio/flac",
                                       "opus": "audio/opus"}[fmt]  # fmt: skip
    assert int(headers["content-length"]) == len(response.content)
    samples, got_rate = soundfile.read(io.BytesIO(response.content), dtype="float32")
    assert got_rate == rate
    assert len(samples) > rate  # over a second of speech
    assert np.abs(samples).max() > 0.5  # whole files are normalized to their peak


def test_sse_events(server: RunningServer, tts: TTS) -> None:
    body = {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": TEXT,
            "response_format": "pcm", "stream_format": "sse", "seed": 4, "sample_rate": 44100}  # fmt: skip
    with server.client(headers={"Authorization": f"Bearer {KEY}"}) as http:
        response = http.post("/v1/audio/speech", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert events[-1]["type"] == "speech.audio.done"
    assert events[-1]["usage"]["input_tokens"] == len(TEXT)
    pcm = np.frombuffer(b"".join(base64.b64decode(e["audio"]) for e in events[:-1]), "<i2")
    np.testing.assert_array_equal(pcm, _expected_pcm(tts, "tiny", TEXT, seed=4))


def test_voices_and_models(client: Any, server: RunningServer) -> None:
    assert [m.id for m in client.models.list()] == [
        "yomiage",
        "tts-1",
        "tts-1-hd",
        "gpt-4o-mini-tts",
    ]
    assert client.models.retrieve("tts-1").owned_by == "yomiage"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("whisper-1")
    with server.client(headers={"Authorization": f"Bearer {KEY}"}) as http:
        voices = http.get("/v1/audio/voices").json()["voices"]
        legacy = http.get("/v1/audio/voices", params={"legacy": "true"}).json()["voices"]
    assert [v["id"] for v in voices] == ["tiny", "tiny2"] == legacy
    assert voices[0]["styles"] == ["Neutral", "Happy", "Sad"]
    assert voices[0]["runtime"].startswith("decoder ")  # which engine and precision
    assert voices[0]["speakers"] == {"spk_a": 0, "spk_b": 1}
    assert voices[0]["default"] and voices[1]["aliases"] == ["narrator"]


def test_voice_alias_and_object_voice(client: Any, tts: TTS) -> None:
    """An alias names its voice; OpenAI's {"id": ...} form is accepted too."""
    expected = _expected_pcm(tts, "tiny2", TEXT, seed=5)
    for voice in ("narrator", {"id": "tiny2"}):
        response = client.audio.speech.create(
            model="tts-1", voice=voice, input=TEXT, response_format="wav", extra_body={"seed": 5}
        )
        np.testing.assert_array_equal(_streamed_wav(response.content)[1], expected)


# -- bad inputs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "status", "code", "param"),
    [
        ({"input": ""}, 400, "empty_input", "input"),
        ({"input": "   \n"}, 400, "empty_input", "input"),
        ({"input": "あ" * 4097}, 413, "input_too_long", "input"),
        ({"voice": "nobody"}, 400, "voice_not_found", "voice"),
        ({"model": "whisper-1"}, 400, "model_not_found", "model"),
        ({"response_format": "aac"}, 400, "unsupported_format", "response_format"),
        ({"speed": 9.0}, 400, "invalid_value", "speed"),
        ({"extra_body": {"style": "Nope"}}, 400, "invalid_value", "style"),
        ({"extra_body": {"speaker_id": 7}}, 400, "invalid_value", "speaker_id"),
        ({"extra_body": {"speaker_id": "nobody"}}, 400, "invalid_value", "speaker_id"),
        ({"extra_body": {"sdp_ratio": 3}}, 400, "invalid_value", "sdp_ratio"),
        ({"extra_body": {"noise": "loud"}}, 400, "invalid_value", "noise"),
        ({"extra_body": {"sample_rate": 44100}, "response_format": "opus"}, 400,
         "unsupported_sample_rate", "sample_rate"),
    ],
)  # fmt: skip
def test_bad_requests_through_the_client(
    client: Any, kwargs: dict[str, Any], status: int, code: str, param: str
) -> None:
    request = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": "wav"}
    request.update(kwargs)
    with pytest.raises(openai.APIStatusError) as caught:
        client.audio.speech.create(**request)
    assert caught.value.status_code == status
    error = _error(caught.value.response)
    assert (error["code"], error["param"]) == (code, param)
    assert error["type"] == "invalid_request_error"


def test_unreadable_text_is_400(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(
            model="tts-1", voice="alloy", input="。。。", response_format="wav"
        )
    assert _error(caught.value.response)["code"] in ("invalid_input", "empty_input")


def test_wrong_api_key(server: RunningServer) -> None:
    wrong = openai.OpenAI(base_url=f"{server.url}/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.audio.speech.create(model="tts-1", voice="alloy", input=TEXT)
    error = _error(caught.value.response)
    assert (error["type"], error["code"]) == ("authentication_error", "invalid_api_key")
    with server.client() as http:
        for path in ("/v1/models", "/metrics", "/v1/dictionary"):
            assert http.get(path).status_code == 401
        # The page and the probes stay open.
        for path in ("/", "/health", "/ready", "/playground/app.js"):
            assert http.get(path).status_code == 200, path


@pytest.mark.parametrize(
    ("content", "headers", "code"),
    [
        (b"{not json", {"Content-Type": "application/json"}, "invalid_json"),
        (b"[1, 2]", {"Content-Type": "application/json"}, "invalid_json"),
        (b'{"voice": "alloy", "input": "x"}', {"Content-Type": "application/json"},
         "missing_required_parameter"),
        (b'{"model": "tts-1", "voice": "alloy", "input": 5}', {"Content-Type": "application/json"},
         "invalid_value"),
    ],
)  # fmt: skip
def test_unparseable_bodies(
    server: RunningServer, content: bytes, headers: dict[str, str], code: str
) -> None:
    with server.client(headers={"Authorization": f"Bearer {KEY}", **headers}) as http:
        response = http.post("/v1/audio/speech", content=content)
    assert response.status_code == 400
    assert _error(response)["code"] == code


def test_unknown_route_method_and_oversized_body_are_openai_shaped(server: RunningServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    with server.client(headers=auth) as http:
        missing = http.get("/v1/nothing")
        assert missing.status_code == 404 and _error(missing)["code"] == "not_found"
        wrong = http.get("/v1/audio/speech")
        assert wrong.status_code == 405 and _error(wrong)["code"] == "method_not_allowed"
        big = http.post("/tts", content=b"x" * (server.state.config.max_body_bytes + 1))
        assert big.status_code == 413 and _error(big)["code"] == "body_too_large"

        def chunked() -> Iterator[bytes]:
            for _ in range(20):
                yield b"x" * 20000

        streamed = http.post("/tts", content=chunked())
        assert streamed.status_code == 413 and _error(streamed)["code"] == "body_too_large"


def test_no_route_serves_files(server: RunningServer) -> None:
    with server.client() as http:
        for path in ("/playground/../../pyproject.toml", "/playground/index.html",
                     "/static/app.js", "/playground/%2e%2e/app.py", "/docs", "/redoc"):  # fmt: skip
            response = http.get(path)
            assert response.status_code in (401, 404), path
            assert "error" in response.json()


# -- the native route ---------------------------------------------------------------


def test_tts_takes_every_option(server: RunningServer, tts: TTS) -> None:
    options = {"style": "Sad", "style_weight": 2.0, "speaker_id": 1, "speed": 1.2,
               "sdp_ratio": 0.5, "noise": 0.3, "noise_w": 0.5, "seed": 9}  # fmt: skip
    with server.client(headers={"Authorization": f"Bearer {KEY}"}) as http:
        streamed = http.post("/tts", json={"text": TEXT, "voice": "tiny2", **options})
        whole = http.post("/tts", json={"text": TEXT, "voice": "tiny2", "stream": False, **options})
    np.testing.assert_array_equal(
        _streamed_wav(streamed.content)[1], _expected_pcm(tts, "tiny2", TEXT, **options)
    )
    # stream=false: a complete WAV with its length, normalized like Audio.to_bytes().
    assert int(whole.headers["content-length"]) == len(whole.content)
    assert whole.content == tts.speakers["tiny2"].generate(TEXT, **options).to_bytes("wav")


def test_tts_rejects_unknown_fields_and_resamples(server: RunningServer) -> None:
    with server.client(headers={"Authorization": f"Bearer {KEY}"}) as http:
        typo = http.post("/tts", json={"text": TEXT, "styel": "Happy"})
        assert typo.status_code == 400
        assert (_error(typo)["code"], _error(typo)["param"]) == ("unknown_parameter", "styel")
        low = http.post("/tts", json={"text": TEXT, "sample_rate": 16000, "stream": False})
        rate, pcm = _wav(low.content)
        assert rate == 16000 and len(pcm) > 16000


# -- safety and operations ----------------------------------------------------------


def test_inference_never_blocks_the_event_loop(server: RunningServer) -> None:
    """While a long text is read, /health still answers at once."""
    auth = {"Authorization": f"Bearer {KEY}"}
    with server.client(headers=auth) as http, http.stream("POST", "/tts", json={"text": LONG}) as r:
        pieces = r.iter_bytes()  # kept: dropping it would close the stream
        next(pieces)
        slowest = 0.0
        for _ in range(10):
            started = time.perf_counter()
            assert http.get("/health").status_code == 200
            slowest = max(slowest, time.perf_counter() - started)
    assert slowest < 0.5
    server.wait_idle()


def test_client_disconnect_stops_synthesis(tts: TTS) -> None:
    with serve(tts, ServerConfig(warmup=False, max_concurrency=1, max_queue=0)) as server:
        with server.client() as http, http.stream("POST", "/tts", json={"text": LONG}) as r:
            assert r.status_code == 200
            pieces = r.iter_bytes()  # kept: dropping it would close the stream
            next(pieces)
            assert server.metric("yomiage_in_flight_requests") == 1
        # Leaving closed the connection mid-stream; the server stops the synthesis
        # long before the ~6 s the whole text takes, and frees its only slot.
        started = time.perf_counter()
        server.wait_idle(timeout=5)
        assert time.perf_counter() - started < 4
        assert server.metric("yomiage_client_disconnects_total") == 1
        assert server.state.gate.active == 0 and server.state.gate.waiting == 0
        with server.client() as http:
            assert http.post("/tts", json={"text": TEXT}).status_code == 200


def test_full_server_answers_429_with_retry_after(tts: TTS) -> None:
    config = ServerConfig(warmup=False, max_concurrency=1, max_queue=0)
    with serve(tts, config) as server:
        with server.client() as http, http.stream("POST", "/tts", json={"text": LONG}) as held:
            pieces = held.iter_bytes()  # kept: dropping it would close the stream
            next(pieces)
            busy = http.post("/tts", json={"text": TEXT})
            assert busy.status_code == 429
            assert busy.headers["retry-after"] == "1"
            error = _error(busy)
            assert (error["type"], error["code"]) == ("rate_limit_error", "server_busy")
            # The OpenAI client sees a RateLimitError.
            client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.RateLimitError):
                client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT)
        server.wait_idle()
        text = httpx_get(server, "/metrics")
        assert 'yomiage_rejected_requests_total{reason="queue_full"} 2' in text


def test_queue_waits_then_times_out(tts: TTS) -> None:
    config = ServerConfig(warmup=False, max_concurrency=1, max_queue=1, queue_timeout=0.3)
    with serve(tts, config) as server:
        with server.client() as http, http.stream("POST", "/tts", json={"text": LONG}) as held:
            pieces = held.iter_bytes()  # kept: dropping it would close the stream
            next(pieces)
            started = time.perf_counter()
            waited = http.post("/tts", json={"text": TEXT})
            assert waited.status_code == 503
            assert time.perf_counter() - started >= 0.3
            assert _error(waited)["code"] == "queue_timeout" and waited.headers["retry-after"]
        server.wait_idle()


def test_queued_requests_all_finish(tts: TTS) -> None:
    """Below limit + queue nothing is refused, and each result equals the library's."""
    config = ServerConfig(warmup=False, max_concurrency=2, max_queue=4)
    results: dict[int, bytes] = {}
    with serve(tts, config) as server:

        def ask(seed: int) -> None:
            with server.client() as http:
                response = http.post("/tts", json={"text": TEXT, "seed": seed})
                assert response.status_code == 200
                results[seed] = response.content

        threads = [threading.Thread(target=ask, args=(seed,)) for seed in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(results) == list(range(6))
    for seed, data in results.items():
        np.testing.assert_array_equal(
            _streamed_wav(data)[1], _expected_pcm(tts, "tiny", TEXT, seed=seed)
        )


def httpx_get(server: RunningServer, path: str) -> str:
    with server.client() as http:
        return http.get(path).text


def test_health_ready_and_metrics(server: RunningServer, client: Any) -> None:
    client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav")
    with server.client(headers={"Authorization": f"Bearer {KEY}"}) as http:
        assert http.get("/health").json() == {"status": "healthy"}
        ready = http.get("/ready").json()
        plans = ready.pop("plans")  # how each runs (issue 49, 14): its own test pins it
        assert ready == {"status": "ready", "voices": ["tiny", "tiny2"], "max_input_chars": 4096}
        assert sorted(plans) == ["tiny", "tiny2"]
        response = http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    sample = r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-+0-9.eInfa]+$'

    for line in text.splitlines():
        assert line.startswith("# ") or re.match(sample, line), line
    assert (
        'yomiage_http_requests_total{route="/v1/audio/speech",method="POST",status="200"}' in text
    )
    assert 'yomiage_audio_seconds_total{voice="tiny"}' in text
    assert 'yomiage_real_time_factor_count{voice="tiny"}' in text
    assert 'yomiage_time_to_first_audio_seconds_bucket{route="/v1/audio/speech",le="+Inf"}' in text
    for name in ("yomiage_in_flight_requests", "yomiage_queue_depth", "yomiage_errors_total",
                 "yomiage_http_request_duration_seconds_bucket", "yomiage_ready 1"):  # fmt: skip
        assert name in text


def test_ready_waits_for_warmup(tts: TTS, monkeypatch: pytest.MonkeyPatch) -> None:
    from yomiage.server.engine.service import LocalService

    release = threading.Event()
    real = LocalService.warm
    monkeypatch.setattr(
        LocalService, "warm", lambda self, voice: (release.wait(10), real(self, voice))
    )
    with serve(tts, ServerConfig(warmup=True)) as server, server.client() as http:
        assert http.get("/health").status_code == 200
        early = http.get("/ready")
        assert early.status_code == 503 and _error(early)["code"] == "not_ready"
        refused = http.post("/tts", json={"text": TEXT})
        assert refused.status_code == 503 and refused.headers["retry-after"]
        release.set()
        end = time.monotonic() + 10
        while http.get("/ready").status_code != 200:
            assert time.monotonic() < end
            time.sleep(0.05)
        assert http.post("/tts", json={"text": TEXT}).status_code == 200


def test_cors_allows_local_apps_and_configured_origins(server: RunningServer, tts: TTS) -> None:
    preflight = {"Origin": "http://example.test", "Access-Control-Request-Method": "POST"}

    def allowed(http: httpx.Client, origin: str) -> str | None:
        response = http.options("/v1/audio/speech", headers={**preflight, "Origin": origin})
        return response.headers.get("access-control-allow-origin")

    with server.client() as http:  # VOICEVOX's default: apps on this machine, no other site
        assert allowed(http, "http://example.test") is None
        assert allowed(http, "http://localhost:5173") == "http://localhost:5173"
        assert allowed(http, "http://127.0.0.1") == "http://127.0.0.1"
        assert allowed(http, "app://.") == "app://."
        assert allowed(http, "http://localhost.example.test") is None
    closed = ServerConfig(warmup=False, cors_local_apps=False)
    with serve(tts, closed) as open_server, open_server.client() as http:
        assert allowed(http, "http://localhost:5173") is None
    config = ServerConfig(warmup=False, cors_origins=("http://example.test",))
    with serve(tts, config) as open_server, open_server.client() as http:
        response = http.options("/v1/audio/speech", headers=preflight)
        assert response.headers["access-control-allow-origin"] == "http://example.test"
        other = http.options(
            "/v1/audio/speech",
            headers={**preflight, "Origin": "http://elsewhere.test"},
        )
        assert "access-control-allow-origin" not in other.headers


def test_user_dictionary_routes(tts: TTS, server: RunningServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    word = {"surface": "担々麺", "reading": "タンタンメン", "accent": 3}
    # The default is read-only.
    with server.client(headers=auth) as http:
        assert http.get("/v1/dictionary").json() == {"words": []}
        denied = http.post("/v1/dictionary", json=word)
        assert denied.status_code == 403 and _error(denied)["type"] == "permission_error"
    config = ServerConfig(warmup=False, dict_api="write")
    with serve(tts, config) as writable, writable.client() as http:
        added = http.post("/v1/dictionary", json=word)
        assert added.status_code == 201 and added.json()["reading"] == "タンタンメン"
        assert [w["surface"] for w in http.get("/v1/dictionary").json()["words"]] == ["担々麺"]
        assert "タンタンメン" in tts.frontend.g2p("担々麺を食べる").readings
        bad = http.post("/v1/dictionary", json={"surface": "x", "reading": "abc"})
        assert bad.status_code == 400 and _error(bad)["code"] == "invalid_word"
        assert http.delete("/v1/dictionary/担々麺").status_code == 200
        gone = http.delete("/v1/dictionary/担々麺")
        assert gone.status_code == 404 and _error(gone)["code"] == "word_not_found"
    with serve(tts, ServerConfig(warmup=False, dict_api="off")) as closed, closed.client() as http:
        assert http.get("/v1/dictionary").status_code == 403


def test_failure_mid_stream_breaks_the_connection(
    tts: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short file must never look complete: the client sees a broken body."""
    import httpx

    from yomiage.server.speech import ChunkPump

    real = ChunkPump._step
    calls = {"n": 0}

    def failing(self: ChunkPump) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("decoder exploded")
        return real(self)

    monkeypatch.setattr(ChunkPump, "_step", failing)
    with serve(tts, ServerConfig(warmup=False)) as server:
        with server.client() as http, pytest.raises(httpx.RemoteProtocolError):
            http.post("/tts", json={"text": LONG})
        server.wait_idle()
        assert 'yomiage_errors_total{type="stream"} 1' in httpx_get(server, "/metrics")


def test_back_to_back_requests_never_find_their_own_slot_taken(tts: TTS) -> None:
    """Regression: the slot was freed after the last byte was sent, so a client's next
    request could arrive while its finished one still counted, and got a 429."""
    config = ServerConfig(warmup=False, max_concurrency=1, max_queue=0)
    with serve(tts, config) as server, server.client() as http:
        for fmt in ("wav", "pcm", "flac", "wav", "pcm", "flac") * 3:
            body = {"text": "はい。", "format": fmt}
            assert http.post("/tts", json=body).status_code == 200


def test_client_leaving_the_queue_frees_its_place(tts: TTS) -> None:
    import httpx

    config = ServerConfig(warmup=False, max_concurrency=1, max_queue=1, queue_timeout=30)
    with serve(tts, config) as server:
        with server.client() as http, http.stream("POST", "/tts", json={"text": LONG}) as held:
            pieces = held.iter_bytes()  # kept: dropping it would close the stream
            next(pieces)
            with pytest.raises(httpx.ReadTimeout):  # queued behind the long request
                httpx.post(f"{server.url}/tts", json={"text": TEXT}, timeout=0.5)
            end = time.monotonic() + 5
            while server.state.gate.waiting:  # it left the queue with its client
                assert time.monotonic() < end
                time.sleep(0.02)
            assert server.metric("yomiage_client_disconnects_total") == 1
        server.wait_idle()
        assert 'status="499"' in httpx_get(server, "/metrics")


def test_work_after_the_threads_are_shut_is_a_503_on_every_api(tts: TTS) -> None:
    """In a forced stop the thread pool can close before a request's next step: every
    route says the server is stopping (503) instead of an internal error (500)."""
    with serve(tts) as running, running.client() as http:
        style = http.get("/speakers").json()[0]["styles"][0]["id"]
        running.state.executor.shutdown(wait=True)
        speech = http.post("/tts", json={"text": TEXT})
        openai = http.post(
            "/v1/audio/speech", json={"model": "tts-1", "voice": "tiny", "input": TEXT}
        )
        words = http.get("/v1/dictionary")
        vox = http.post("/audio_query", params={"text": TEXT, "speaker": style})
        vox_words = http.get("/user_dict")
    for response in (speech, openai, words):
        assert response.status_code == 503, response.text
        assert _error(response)["code"] == "shutting_down"
        assert response.headers["Retry-After"] == "5"
    for response in (vox, vox_words):
        assert response.status_code == 503, response.text
        assert "shutting down" in response.json()["detail"]
