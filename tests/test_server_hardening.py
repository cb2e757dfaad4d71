"""No request can kill or exhaust the server (issue 11): a supervised worker, Host and
content-type checks, clients that leave, shutdown, and errors in our own words."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from tests import crashing_service  # noqa: E402
from tests.serving import RunningServer, serve  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402
from yomiage.server.engine.worker import WorkerService  # noqa: E402

pytestmark = pytest.mark.server


def _error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return dict(body["error"])


# -- the supervised worker ------------------------------------------------------------


@pytest.fixture(scope="module")
def worker(test_voice: Path) -> Iterator[WorkerService]:
    service = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    yield service
    service.close()


@pytest.fixture(scope="module")
def supervised(worker: WorkerService) -> Iterator[RunningServer]:
    with serve(worker, ServerConfig(warmup=False, max_concurrency=2)) as running:  # type: ignore[arg-type]
        yield running


def _wait_ready(http: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while http.get("/ready").status_code != 200:
        assert time.monotonic() < end, "the server did not become ready again"
        time.sleep(0.05)


def test_server_survives_a_native_crash_in_its_worker(
    supervised: RunningServer, worker: WorkerService
) -> None:
    """An input that reaches a native crash used to take the whole server down."""
    crashes = worker.crashes
    with supervised.client() as http:
        ok = http.post("/tts", json={"text": "こんにちは。", "format": "wav"})
        assert ok.status_code == 200
        pid = worker.pid
        crashed = http.post("/tts", json={"text": crashing_service.CRASH})
        assert crashed.status_code == 500
        assert _error(crashed)["code"] == "worker_crashed"
        assert http.get("/health").status_code == 200  # the server itself never went away
        _wait_ready(http)
        again = http.post("/tts", json={"text": "こんにちは。", "format": "wav"})
        assert (again.status_code == 200 and again.content == ok.content) or len(again.content) > 44
        metrics = http.get("/metrics").text
    assert worker.crashes == crashes + 1 and worker.pid != pid
    assert f"yomiage_worker_crashes_total {crashes + 1}" in metrics
    assert "yomiage_worker_restarts_total" in metrics
    assert worker.last_restart_seconds is not None


def test_a_crash_fails_other_requests_in_flight_cleanly(
    supervised: RunningServer, worker: WorkerService
) -> None:
    long = "今日はいい天気ですね。" * 60
    with supervised.client() as http:
        _wait_ready(http)
        with http.stream("POST", "/tts", json={"text": long, "format": "pcm"}) as streaming:
            assert streaming.status_code == 200
            chunks = streaming.iter_bytes()
            next(chunks)  # it is under way in the worker
            crashed = http.post("/tts", json={"text": crashing_service.CRASH})
            assert _error(crashed)["code"] == "worker_crashed"
            with pytest.raises(httpx.HTTPError):  # cut short, never a silent truncation
                for _ in chunks:
                    pass
        _wait_ready(http)
        assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200


def test_worker_errors_keep_their_types(supervised: RunningServer) -> None:
    with supervised.client() as http:
        _wait_ready(http)
        bad = http.post("/tts", json={"text": "😀😀"})
        assert bad.status_code == 400 and _error(bad)["code"] == "invalid_input"
        too_noisy = http.post("/tts", json={"text": "こんにちは。", "noise_w": 10})
        assert _error(too_noisy)["param"] == "noise_w"


def test_dictionary_through_the_worker(test_voice: Path, tmp_path: Path) -> None:
    service = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    try:
        config = ServerConfig(warmup=False, dict_api="write")
        with serve(service, config) as running, running.client() as http:  # type: ignore[arg-type]
            added = http.post("/v1/dictionary", json={"surface": "鬼滅", "reading": "キメツ"})
            assert added.status_code == 201
            assert [w["surface"] for w in http.get("/v1/dictionary").json()["words"]] == ["鬼滅"]
            long = http.post("/v1/dictionary", json={"surface": "中読語", "reading": "ア" * 1000})
            assert long.status_code == 400 and _error(long)["code"] == "invalid_word"
    finally:
        service.close()


# -- requests a browser on another site could make ------------------------------------


@pytest.fixture(scope="module")
def tts(engine: TTS) -> TTS:
    return engine


@pytest.fixture(scope="module")
def server(tts: TTS) -> Iterator[RunningServer]:
    with serve(tts, ServerConfig(warmup=False, dict_api="write", max_concurrency=1)) as running:
        yield running


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.2", "[::2]:80"])
def test_other_host_names_are_refused_on_loopback(server: RunningServer, host: str) -> None:
    """DNS rebinding: a page on evil.example whose name points at 127.0.0.1."""
    with server.client() as http:
        response = http.post(
            "/v1/dictionary", json={"surface": "鬼滅", "reading": "キメツ"}, headers={"Host": host}
        )
    assert response.status_code == 400 and _error(response)["code"] == "invalid_host"


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000",
                                  "app.localhost", "LOCALHOST"])  # fmt: skip
def test_loopback_host_names_are_served(server: RunningServer, host: str) -> None:
    with server.client() as http:
        assert http.get("/health", headers={"Host": host}).status_code == 200


def test_allowed_hosts_can_be_widened(tts: TTS) -> None:
    config = ServerConfig(warmup=False, allowed_hosts=("tts.example.com",))
    with serve(tts, config) as running, running.client() as http:
        assert http.get("/health", headers={"Host": "tts.example.com"}).status_code == 200
        assert http.get("/health", headers={"Host": "localhost"}).status_code == 400
    config = ServerConfig(warmup=False, allowed_hosts=("*",))
    with serve(tts, config) as running, running.client() as http:
        assert http.get("/health", headers={"Host": "anything"}).status_code == 200


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                     "multipart/form-data; boundary=x", "application/jsonx"],
)  # fmt: skip
def test_a_body_must_be_json(server: RunningServer, content_type: str | None) -> None:
    """A CORS "simple" POST (text/plain) from another origin wrote the user dictionary."""
    body = json.dumps({"surface": "鬼滅", "reading": "キメツ"}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    with server.client() as http:
        response = http.post("/v1/dictionary", content=body, headers=headers)
        assert response.status_code == 415
        assert _error(response)["code"] == "unsupported_media_type"
        assert all(w["surface"] != "鬼滅" for w in http.get("/v1/dictionary").json()["words"])


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON", "application/merge-patch+json"])  # fmt: skip
def test_json_content_types_are_accepted(server: RunningServer, content_type: str) -> None:
    body = json.dumps({"text": "こんにちは。"}).encode()
    with server.client() as http:
        response = http.post("/tts", content=body, headers={"Content-Type": content_type})
    assert response.status_code == 200


# -- errors in our own words ---------------------------------------------------------


def test_no_body_names_what_is_missing(server: RunningServer) -> None:
    """It used to say "missing required parameter None"."""
    with server.client() as http:
        response = http.post("/tts", headers={"Content-Type": "application/json"})
    error = _error(response)
    assert response.status_code == 400 and "None" not in error["message"]
    assert "no body" in error["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [({"text": "x", "seed": "abc"}, "seed"), ({"text": 3}, "text"),
     ({"text": "x", "noise": "loud"}, "noise"), ({"text": "x", "stream": "maybe"}, "stream")],
)  # fmt: skip
def test_type_errors_name_the_field_in_our_words(
    server: RunningServer, body: dict[str, Any], param: str
) -> None:
    with server.client() as http:
        error = _error(http.post("/tts", json=body))
    assert error["param"] == param and error["message"].startswith(f"{param} must be")
    assert "Input should" not in error["message"] and "pydantic" not in error["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("noise_w", 10), ("noise_w", 50), ("noise", 1e9), ("style_weight", 1e9), ("speed", 0),
     ("sdp_ratio", 2), ("seed", -1), ("pitch_scale", 100), ("style", "Nope")],
)  # fmt: skip
def test_out_of_range_options_are_400_naming_the_field(
    server: RunningServer, field: str, value: Any
) -> None:
    """noise_w 10 held a server at 8.4 GB for 300 s; 50 answered numpy's message."""
    with server.client() as http:
        response = http.post("/tts", json={"text": "こんにちは。", field: value})
    error = _error(response)
    assert response.status_code == 400 and error["param"] == field
    assert field in error["message"] and "numpy" not in error["message"]


def test_every_error_code_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "server.md").read_text("utf-8")
    source = Path(__file__).resolve().parents[1] / "src" / "yomiage" / "server"
    import re

    codes = set()
    for path in source.glob("*.py"):
        codes |= set(re.findall(r'code="([a-z_]+)"', path.read_text("utf-8")))
    codes |= {"invalid_request", "unsupported_media_type", "body_too_large", "invalid_host",
              "shutting_down", "internal_error", "origin_not_allowed", "request_timeout",
              "too_many_connections"}  # fmt: skip
    missing = sorted(c for c in codes if f"`{c}`" not in docs)
    assert not missing, f"error codes missing from docs/server.md: {missing}"


# -- clients that leave --------------------------------------------------------------


def test_client_that_leaves_before_the_first_audio_frees_its_slot(
    server: RunningServer, tts: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It held the only slot for 18.8 s of CPU after leaving; the next client got 503."""
    backend = tts.speakers["tiny"]._pipeline.backend
    real = backend.bert_features
    calls: list[float] = []

    def slow_bert(*args: Any) -> Any:  # the first sentence's BERT is slow
        calls.append(time.monotonic())
        time.sleep(1.5)
        return real(*args)

    monkeypatch.setattr(backend, "bert_features", slow_bert)
    text = "今日はいい天気ですね。" * 30
    with server.client(timeout=0.5) as http, pytest.raises(httpx.ReadTimeout):
        http.post("/tts", json={"text": text, "format": "wav"})  # leaves during that BERT
    server.wait_idle(timeout=30)
    assert len(calls) == 1  # nothing ran after the step in progress
    monkeypatch.setattr(backend, "bert_features", real)
    with server.client() as http:
        assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
    assert server.metric("yomiage_client_disconnects_total") >= 1


def test_client_that_leaves_the_queue_is_in_the_access_log(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Requests refused with 499 (the client left while queued) never reached the log."""
    long = "今日はいい天気ですね。" * 100
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        with (
            server.client() as busy,
            busy.stream("POST", "/tts", json={"text": long, "format": "pcm"}) as streaming,
        ):
            assert streaming.status_code == 200
            with server.client(timeout=0.5) as http, pytest.raises(httpx.ReadTimeout):
                http.post("/tts", json={"text": "こんにちは。"})
            end = time.monotonic() + 10
            while server.state.gate.waiting:
                assert time.monotonic() < end
                time.sleep(0.02)
        server.wait_idle()
        end = time.monotonic() + 5
        while not any('" 499' in r.getMessage() for r in caplog.records):
            assert time.monotonic() < end, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)


# -- shutdown --------------------------------------------------------------------


def test_queued_requests_get_503_when_the_server_stops(tts: TTS) -> None:
    config = ServerConfig(warmup=False, max_concurrency=1)
    long = "今日はいい天気ですね。" * 100
    with serve(tts, config) as running:
        results: dict[str, Any] = {}

        def queued() -> None:
            with running.client() as http:
                results["queued"] = http.post("/tts", json={"text": "こんにちは。"})

        with (
            running.client() as busy,
            busy.stream("POST", "/tts", json={"text": long, "format": "pcm"}) as streaming,
        ):
            assert streaming.status_code == 200
            waiter = threading.Thread(target=queued)
            waiter.start()
            end = time.monotonic() + 10
            while not running.state.gate.waiting:
                assert time.monotonic() < end
                time.sleep(0.02)
            loop = running.state.loop
            loop.call_soon_threadsafe(running.state.begin_shutdown)  # what SIGTERM does
            waiter.join(timeout=10)
        refused = results["queued"]
        assert refused.status_code == 503 and refused.headers["retry-after"]
        assert _error(refused)["code"] == "shutting_down"
        with running.client() as http:
            assert http.get("/ready").status_code == 503


def test_shield_answers_json_when_the_app_is_cancelled() -> None:
    """A second Ctrl-C cancels requests in flight; uvicorn answered them text/plain 500."""
    from yomiage.server.middleware import ShieldMiddleware

    sent: list[dict[str, Any]] = []

    async def cancelled_app(scope: Any, receive: Any, send: Any) -> None:
        raise asyncio.CancelledError

    async def broken_app(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("a bug")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run(app: Any) -> None:
        shield = ShieldMiddleware(app, state=None)  # type: ignore[arg-type]
        scope = {"type": "http", "method": "POST", "path": "/tts", "headers": []}
        with pytest.raises((asyncio.CancelledError, RuntimeError)):
            await shield(scope, None, send)

    asyncio.run(run(cancelled_app))
    assert sent[0]["status"] == 503
    assert json.loads(sent[1]["body"])["error"]["code"] == "shutting_down"
    sent.clear()
    asyncio.run(run(broken_app))
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"])["error"]["code"] == "internal_error"
