"""What a VOICEVOX request may cost: every text it reads meets ``--max-chars``, its audio
is estimated and refused before it is made, odd strings are 422s, its post-processing
runs off the event loop and stops when its client leaves (issue 22, items 1, 3 and 8)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, audio_query, first_style, hold_until_cancelled, serve
from yomiage import TTS
from yomiage.errors import Cancelled
from yomiage.server import ServerConfig, create_app
from yomiage.voicevox import synthesis as vv_synthesis
from yomiage.voicevox.cost import estimated_seconds, spoken_chars
from yomiage.voicevox.model import parse_audio_query
from yomiage.voicevox.presets import PresetsFileError, PresetStore

pytestmark = pytest.mark.server
MAX_CHARS = 40
MAX_SECONDS = 30.0


@pytest.fixture(scope="module")
def tts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    with (
        TTS(threads=1, cache_dir=tmp_path_factory.mktemp("cache"))
        .load("tiny", source=TEST_VOICES / "tiny")
        .prepare() as engine
    ):
        yield engine


@pytest.fixture(scope="module")
def server(tts: TTS) -> Iterator[RunningServer]:
    config = ServerConfig(warmup=False, max_input_chars=MAX_CHARS, max_audio_seconds=MAX_SECONDS)
    with serve(tts, config) as running:
        yield running


@pytest.fixture(scope="module")
def speaker(server: RunningServer) -> int:
    return first_style(server)


@pytest.fixture(scope="module")
def query(server: RunningServer, speaker: int) -> dict[str, Any]:
    return audio_query(server, speaker, "はい、そうです。")


def _with_mora_text(query: dict[str, Any], text: str) -> dict[str, Any]:
    first = query["accent_phrases"][0]
    moras = [{**first["moras"][0], "text": text}, *first["moras"][1:]]
    return {**query, "kana": None, "accent_phrases": [{**first, "moras": moras}]}


def _post(http: Any, path: str, speaker: int, body: Any) -> Any:
    data = json.dumps(body, ensure_ascii=True)  # lone surrogates travel as \ud800
    return http.post(path, params={"speaker": speaker}, content=data,
                     headers={"Content-Type": "application/json"})  # fmt: skip


def test_kana_field_obeys_the_character_limit(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    long = {**query, "kana": "9" * (MAX_CHARS + 60)}
    with server.client() as http:
        for path, body in (("/synthesis", long), ("/multi_synthesis", [query, long])):
            refused = _post(http, path, speaker, body)
            assert refused.status_code == 413, path
            assert refused.headers["content-type"] == "application/json"
            assert "kana has 100 characters" in refused.json()["detail"]


def test_every_voicevox_text_path_obeys_the_character_limit(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    many = query["accent_phrases"] * 10  # 70 moras: under the mora cap, over the characters
    with server.client() as http:
        for path in ("/mora_data", "/mora_length", "/mora_pitch"):
            refused = _post(http, path, speaker, many)
            assert refused.status_code == 413 and "accent_phrases has" in refused.json()["detail"]
        kana = http.post("/accent_phrases",
                         params={"speaker": speaker, "text": "ア'/" * 20, "is_kana": "true"})  # fmt: skip
        assert kana.status_code == 413 and "text has 60" in kana.json()["detail"]
        phrases = {**query, "kana": None, "accent_phrases": many}
        assert _post(http, "/synthesis", speaker, phrases).status_code == 413
        # Each query is within the limit; a request reads at most the limit in all.
        together = _post(http, "/multi_synthesis", speaker, [query] * 6)
        assert together.status_code == 413
        assert "the 6 queries together" in together.json()["detail"]
        assert _post(http, "/multi_synthesis", speaker, [query] * 2).status_code == 200


def test_odd_strings_in_an_audio_query_are_422_naming_the_field(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    field = "accent_phrases[0].moras[0].text"
    with server.client() as http:
        for text in (" ", "\x01", "\ud800", "\u3300", "\u200b", "アイウエオカ"):
            bad = _post(http, "/synthesis", speaker, _with_mora_text(query, text))
            assert bad.status_code == 422, repr(text)
            assert bad.json()["detail"][0]["msg"].startswith(field), repr(text)
            bad = _post(http, "/mora_data", speaker, _with_mora_text(query, text)["accent_phrases"])
            assert bad.status_code == 422, repr(text)
        pause = json.loads(json.dumps(query))
        pause["accent_phrases"][0]["pause_mora"]["text"] = "\x07"
        bad = _post(http, "/synthesis", speaker, pause)
        assert bad.status_code == 422
        assert "accent_phrases[0].pause_mora.text" in bad.json()["detail"][0]["msg"]
        bad = _post(http, "/synthesis", speaker, {**query, "kana": "はい\ud800"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "kana"]
        deep = http.post("/synthesis", params={"speaker": speaker},
                         content=b"[" * 20000 + b"]" * 20000,
                         headers={"Content-Type": "application/json"})  # fmt: skip
        assert 400 <= deep.status_code < 500 and deep.json()  # the guard's or the route's


def test_the_audio_estimate_counts_moras_pauses_speed_and_padding(query: dict[str, Any]) -> None:
    parsed = parse_audio_query({**query, "prePhonemeLength": 0.0, "postPhonemeLength": 0.0})
    speech = estimated_seconds(parsed)
    assert 0.2 < speech < 2.0
    slow = parse_audio_query({**query, "prePhonemeLength": 1.0, "postPhonemeLength": 2.0,
                              "speedScale": 0.5})  # fmt: skip
    assert estimated_seconds(slow) == pytest.approx(2 * speech + 6.0)
    assert spoken_chars(parsed.accent_phrases) == 7  # ハイ、ソーデス: 6 moras and a pause
    sentences = json.loads(json.dumps(query))
    sentences["accent_phrases"][0]["pause_mora"]["text"] = "。"
    sentences.update(pauseLength=10.0, pauseLengthScale=2.0, prePhonemeLength=0.0,
                     postPhonemeLength=0.0)  # fmt: skip
    assert estimated_seconds(parse_audio_query(sentences)) > 20.0


def test_an_over_long_audio_query_is_refused_before_any_synthesis(
    server: RunningServer, speaker: int, query: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    service = server.state.service
    real = service.open
    monkeypatch.setattr(service, "open", lambda *a: calls.append("generate") or real(*a))
    padded = {**query, "prePhonemeLength": 10.0, "postPhonemeLength": 10.0, "speedScale": 0.5}
    paused = json.loads(json.dumps(query))
    paused["accent_phrases"][0]["pause_mora"]["text"] = "。"
    paused.update(pauseLength=10.0, pauseLengthScale=10.0)
    with server.client() as http:
        for body in (padded, paused):
            refused = _post(http, "/synthesis", speaker, body)
            assert refused.status_code == 413
            assert "at most 30 s a request" in refused.json()["detail"]
        many = _post(http, "/multi_synthesis", speaker, [{**query, "postPhonemeLength": 8.0}] * 4)
        assert many.status_code == 413
        assert calls == []  # refused before the voice made anything
        assert _post(http, "/synthesis", speaker, query).status_code == 200
        assert calls == ["generate"]


class _HeldPostProcessing:
    """``write_wav`` that holds in its thread until the test lets it go (or the client
    leaves), so what the server does meanwhile can be seen without timing anything."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.released = False
        self.cancelled = False
        self.real = vv_synthesis.write_wav

    def __call__(self, out: Any, pieces: Any, rate: int, query: Any, *, peak: float,
                 check: Any = None) -> None:  # fmt: skip
        self.entered.set()
        end = time.monotonic() + 20  # only breaks a deadlock (the old code: on the loop)
        while not self.release.is_set() and time.monotonic() < end:
            if check is not None:
                try:
                    check()
                except Cancelled:
                    self.cancelled = True
                    raise
            self.release.wait(0.01)
        self.released = self.release.is_set()
        self.real(out, pieces, rate, query, peak=peak)


def test_health_answers_while_voicevox_post_processing_runs(
    server: RunningServer, speaker: int, query: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _HeldPostProcessing()
    monkeypatch.setattr("yomiage.server.voicevox.synthesis.write_wav", held)
    result: dict[str, int] = {}

    def synthesize() -> None:
        with server.client() as http:
            result["status"] = _post(http, "/synthesis", speaker, query).status_code

    worker = threading.Thread(target=synthesize)
    worker.start()
    assert held.entered.wait(30)
    with server.client(timeout=60) as http:
        assert http.get("/health").status_code == 200
    held.release.set()  # only now may the post-processing finish
    worker.join(60)
    assert result == {"status": 200}
    assert held.released  # /health answered while the post-processing was held


def test_a_client_that_leaves_stops_its_voicevox_work(
    server: RunningServer, speaker: int, query: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _HeldPostProcessing()
    monkeypatch.setattr("yomiage.server.voicevox.synthesis.write_wav", held)
    before = server.metric("yomiage_client_disconnects_total")
    body = json.dumps(query).encode()
    head = (f"POST /synthesis?speaker={speaker} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head.encode() + body)
        assert held.entered.wait(30)
    server.wait_idle(timeout=30)  # the slot is freed once the work has stopped
    assert held.cancelled and not held.released
    assert server.metric("yomiage_client_disconnects_total") == before + 1


def test_a_client_that_leaves_stops_its_voicevox_synthesis(
    server: RunningServer, speaker: int, query: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The synthesis step itself ran to its end after the client left (only the steps
    after it stopped); now it is a stream that the client's leaving cancels."""
    started, stopped = hold_until_cancelled(monkeypatch)
    before = server.metric("yomiage_client_disconnects_total")
    body = json.dumps(query).encode()
    head = (f"POST /synthesis?speaker={speaker} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head.encode() + body)
        assert started.wait(30)
    server.wait_idle(timeout=30)
    assert stopped.is_set()  # by the cancel, not by the wait running out
    assert server.metric("yomiage_client_disconnects_total") == before + 1


def test_a_corrupt_or_non_list_presets_file_refuses_to_start(tmp_path: Path, tts: TTS) -> None:
    for text, why in (("{not json", "is not JSON"), ('{"id": 1}', "holds a JSON dict"),
                      ('[{"id": "x"}]', "preset 1: id")):  # fmt: skip
        path = tmp_path / "presets.json"
        path.write_text(text, "utf-8")
        with pytest.raises(PresetsFileError, match=why) as caught:
            PresetStore(path)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
        with pytest.raises(PresetsFileError):
            create_app(tts, ServerConfig(warmup=False, presets_path=path))
        assert path.read_text("utf-8") == text  # kept as it was
    missing = PresetStore(tmp_path / "new" / "presets.json")  # no file yet: starts empty
    assert missing.all() == []
