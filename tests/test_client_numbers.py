"""Every number a client sends is checked at the edge (issue 31, item 10).

``segment_length=1e308`` on ``/streaming_synthesis`` and an AudioQuery whose
``outputSamplingRate`` was NaN, Infinity or 1e400 (Python's ``json`` reads
those tokens as floats) were 500s with tracebacks. These tests send the
numbers no client should (NaN, both infinities, the largest floats, floats
past them, integers past 64 bits) in every numeric field the VOICEVOX, OpenAI
and native routes read, in both ``--compat`` modes, and accept any answer but
a 5xx; a refusal must name the field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, audio_query, first_style, serve
from yomiage import TTS
from yomiage.server import ServerConfig

pytestmark = pytest.mark.server

# JSON tokens, as a client may write them (NaN and the infinities are not JSON, but
# Python's parser and many clients' serializers take them).
NUMBERS = {
    "nan": "NaN",
    "inf": "Infinity",
    "-inf": "-Infinity",
    "1e308": "1e308",
    "-1e308": "-1.7976931348623157e308",
    "1e400": "1e400",
    "-1e400": "-1e400",
    "2^64": str(2**64),
    "-10^30": str(-(10**30)),
    "10^400": "1" + "0" * 400,  # an integer no float holds
}
# The same, as a query parameter would carry them.
PARAMS = {**NUMBERS, "inf-word": "inf", "nan-word": "nan"}
MARK = "@@number@@"


@pytest.fixture(scope="module")
def tts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    with (
        TTS(threads=1, cache_dir=tmp_path_factory.mktemp("cache"))
        .load("tiny", source=TEST_VOICES / "tiny")
        .prepare() as engine
    ):
        yield engine


@pytest.fixture(scope="module", params=["voicevox", "aivisspeech"])
def server(request: pytest.FixtureRequest, tts: TTS) -> Iterator[RunningServer]:
    config = ServerConfig(
        warmup=False, compat=request.param, max_audio_seconds=60.0, dict_api="write"
    )
    with serve(tts, config) as running:
        yield running


@pytest.fixture(scope="module")
def speaker(server: RunningServer) -> int:
    return first_style(server)


@pytest.fixture(scope="module")
def query(server: RunningServer, speaker: int) -> dict[str, Any]:
    return audio_query(server, speaker, "はい。")


def _with(body: Any, path: tuple[str | int, ...], token: str) -> bytes:
    """``body`` as JSON with the value at ``path`` written as the raw ``token``."""
    changed = copy.deepcopy(body)
    inner = changed
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = MARK
    return json.dumps(changed, ensure_ascii=False).replace(json.dumps(MARK), token).encode()


def _answered(response: Any, field: str) -> None:
    """Not a server error; a refusal names ``field``."""
    assert response.status_code < 500, f"{field}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        assert field in response.text, f"{field} not named: {response.text[:300]}"


QUERY_FIELDS: list[tuple[str | int, ...]] = [
    ("outputSamplingRate",), ("speedScale",), ("pitchScale",), ("intonationScale",),
    ("volumeScale",), ("prePhonemeLength",), ("postPhonemeLength",), ("pauseLength",),
    ("pauseLengthScale",), ("tempoDynamicsScale",),
    ("accent_phrases", 0, "accent"),
    ("accent_phrases", 0, "moras", 0, "vowel_length"),
    ("accent_phrases", 0, "moras", 0, "consonant_length"),
    ("accent_phrases", 0, "moras", 0, "pitch"),
]  # fmt: skip
SYNTHESIS_ROUTES = ("/synthesis", "/cancellable_synthesis", "/streaming_synthesis",
                    "/multi_synthesis")  # fmt: skip


@pytest.mark.parametrize("route", SYNTHESIS_ROUTES)
@pytest.mark.parametrize("path", QUERY_FIELDS, ids=lambda p: ".".join(map(str, p)))
def test_audio_query_numbers_out_of_range_are_refused_naming_the_field_not_500(
    server: RunningServer, speaker: int, query: dict[str, Any], route: str,
    path: tuple[str | int, ...],
) -> None:  # fmt: skip
    """R9: "outputSamplingRate": NaN, Infinity or 1e400 was a 500 on every synthesis route."""
    body = [query] if route == "/multi_synthesis" else query
    where = (0, *path) if route == "/multi_synthesis" else path
    headers = {"Content-Type": "application/json"}
    with server.client() as http:
        for token in NUMBERS.values():
            response = http.post(
                route, params={"speaker": speaker}, content=_with(body, where, token),
                headers=headers,
            )  # fmt: skip
            _answered(response, str(path[-1]))


# Past the largest float (1e400, 10**400) is no finite number either.
NOT_NUMBERS = ("NaN", "nan", "Infinity", "inf", "-Infinity", "-1e400", "-1e308", "x", "1e400",
               "1" + "0" * 400)  # fmt: skip
HUGE = ("1e308", "1.7976931348623157e308", "1e305", "3.8e303", "1e20", str(2**64))


def test_streaming_seconds_that_are_no_number_are_422_naming_the_parameter(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    with server.client() as http:
        for name in ("segment_length", "start_offset"):
            for value in NOT_NUMBERS:
                response = http.post(
                    "/streaming_synthesis", params={"speaker": speaker, name: value}, json=query
                )
                assert response.status_code == 422, (name, value, response.text)
                assert name in response.text


def test_a_huge_start_offset_is_422_naming_it_not_500(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    """R9: start_offset=1e308 (round(seconds * rate) overflowed) was a 500."""
    with server.client() as http:
        for value in HUGE:
            response = http.post(
                "/streaming_synthesis", params={"speaker": speaker, "start_offset": value},
                json=query,
            )  # fmt: skip
            assert response.status_code == 422, (value, response.status_code, response.text)
            assert "start_offset" in response.text


def test_a_huge_segment_length_sends_the_audio_whole_not_500(
    server: RunningServer, speaker: int, query: dict[str, Any]
) -> None:
    """R9: segment_length=1e308 was a 500; any length past the audio means "all at once"."""
    with server.client() as http:
        whole = http.post("/streaming_synthesis", params={"speaker": speaker}, json=query)
        assert whole.status_code == 200
        for value in HUGE:
            response = http.post(
                "/streaming_synthesis", params={"speaker": speaker, "segment_length": value},
                json=query,
            )  # fmt: skip
            assert response.status_code == 200, (value, response.status_code, response.text)
            assert response.content == whole.content


PHRASE_FIELDS: list[tuple[str | int, ...]] = [
    (0, "accent"), (0, "moras", 0, "vowel_length"), (0, "moras", 0, "consonant_length"),
    (0, "moras", 0, "pitch"),
]  # fmt: skip


@pytest.mark.parametrize("route", ["/mora_data", "/mora_length", "/mora_pitch"])
@pytest.mark.parametrize("path", PHRASE_FIELDS, ids=lambda p: ".".join(map(str, p)))
def test_accent_phrase_numbers_out_of_range_are_refused_naming_the_field(
    server: RunningServer, speaker: int, query: dict[str, Any], route: str,
    path: tuple[str | int, ...],
) -> None:  # fmt: skip
    phrases = query["accent_phrases"]
    with server.client() as http:
        for token in NUMBERS.values():
            response = http.post(
                route, params={"speaker": speaker}, content=_with(phrases, path, token),
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            _answered(response, str(path[-1]))


@pytest.mark.parametrize("name", ["speaker", "preset_id", "id", "accent_type", "priority"])
def test_integer_query_parameters_out_of_range_are_refused_not_500(
    server: RunningServer, name: str
) -> None:
    routes = {
        "speaker": ("/audio_query", {"text": "はい"}),
        "preset_id": ("/audio_query_from_preset", {"text": "はい"}),
        "id": ("/delete_preset", {}),
        "accent_type": ("/user_dict_word", {"surface": "鬼滅", "pronunciation": "キメツ",
                                            "accent_type": 1}),
        "priority": ("/user_dict_word", {"surface": "鬼滅", "pronunciation": "キメツ",
                                         "accent_type": 1}),
    }  # fmt: skip
    route, params = routes[name]
    with server.client() as http:
        for value in PARAMS.values():
            response = http.post(route, params={**params, name: value})
            assert response.status_code < 500, (value, response.text[:300])


@pytest.mark.parametrize("field", ["accent_type", "priority"])
def test_imported_word_numbers_out_of_range_are_422(server: RunningServer, field: str) -> None:
    word = {"surface": "鬼滅", "pronunciation": "キメツ", "accent_type": 1, "priority": 5}
    with server.client() as http:
        for token in NUMBERS.values():
            body = _with({"00000000-0000-0000-0000-000000000001": word},
                         ("00000000-0000-0000-0000-000000000001", field), token)  # fmt: skip
            response = http.post(
                "/import_user_dict", params={"override": "true"}, content=body,
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            assert response.status_code == 422, (token, response.status_code, response.text)
        assert http.get("/user_dict").json() == {}


@pytest.mark.parametrize("field", ["accent", "priority"])
def test_native_dictionary_word_numbers_out_of_range_are_refused(
    server: RunningServer, field: str
) -> None:
    word = {"surface": "鬼滅", "reading": "キメツ", "accent": 1, "priority": 5}
    with server.client() as http:
        for token in NUMBERS.values():
            response = http.post(
                "/v1/dictionary", content=_with(word, (field,), token),
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            assert 400 <= response.status_code < 500, (token, response.text)
            assert field in response.text
        assert http.get("/v1/dictionary").json()["words"] == []


PRESET_FIELDS = ["id", "style_id", "speedScale", "pitchScale", "intonationScale", "volumeScale",
                 "prePhonemeLength", "postPhonemeLength", "pauseLength", "pauseLengthScale",
                 "tempoDynamicsScale"]  # fmt: skip


@pytest.mark.parametrize("route", ["/add_preset", "/update_preset"])
@pytest.mark.parametrize("field", PRESET_FIELDS)
def test_preset_numbers_out_of_range_are_refused_naming_the_field(
    server: RunningServer, speaker: int, route: str, field: str
) -> None:
    preset = {"id": 1, "name": "p", "speaker_uuid": "00000000-0000-0000-0000-000000000000",
              "style_id": speaker}  # fmt: skip
    with server.client() as http:
        for token in NUMBERS.values():
            response = http.post(
                route, content=_with(preset, (field,), token),
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            assert response.status_code == 422, (token, response.status_code, response.text)
            assert field in response.text


SPEECH_FIELDS = ["speed", "sample_rate", "style_weight", "sdp_ratio", "noise", "noise_w",
                 "pitch_scale", "intonation_scale", "seed", "speaker_id"]  # fmt: skip


@pytest.mark.parametrize("route", ["/tts", "/v1/audio/speech"])
@pytest.mark.parametrize("field", SPEECH_FIELDS)
def test_speech_numbers_out_of_range_are_refused_naming_the_field(
    server: RunningServer, route: str, field: str
) -> None:
    if route == "/tts":
        body: dict[str, Any] = {"text": "はい。", "stream": False}
    else:
        body = {"model": "tts-1", "input": "はい。", "voice": "alloy", "response_format": "wav",
                "stream": False}  # fmt: skip
    with server.client() as http:
        for token in NUMBERS.values():
            response = http.post(
                route, content=_with(body, (field,), token),
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            _answered(response, field)
