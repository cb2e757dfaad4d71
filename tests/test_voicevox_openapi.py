"""Every VOICEVOX route yomiage serves, checked against VOICEVOX's own API document
(issue 31, item 12): the routes served, and one success of each, in both ``--compat``
modes; errors are in test_voicevox_openapi_errors.py, the document and its checks in
tests/voicevox_openapi.py.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("jsonschema")

from tests.serving import RunningServer
from tests.voicevox_openapi import (
    ABSENT,
    DOCUMENT,
    DOCUMENT_BLOB,
    NOT_IN_DOCUMENT,
    UNSUPPORTED,
    Call,
    Ctx,
    check,
    ctx,
    documented,
    engine,
    git_blob,
    served,
    server,
)

__all__ = ["ctx", "engine", "server"]  # the fixtures this module's tests use


def test_the_document_is_voicevoxs_unmodified() -> None:
    assert git_blob(DOCUMENT.read_bytes()) == DOCUMENT_BLOB


@pytest.mark.server
def test_every_documented_route_is_served_or_deliberately_absent(server: RunningServer) -> None:
    here, there = served(server), documented()
    assert there - here == set(ABSENT)
    assert here - there == set(NOT_IN_DOCUMENT)
    assert here >= UNSUPPORTED


# -- successes, one call per route --------------------------------------------------------------


def _get(path: str, **params: Any) -> Call:
    def call(ctx: Ctx) -> None:
        check(ctx.http.get(path, params=params), "GET", path)

    return call


def _speaker_info(ctx: Ctx) -> None:
    for speaker in ctx.speakers:  # the plain voice and the AIVMX one (its licence as policy)
        info = ctx.http.get("/speaker_info", params={"speaker_uuid": speaker["speaker_uuid"]})
        check(info, "GET", "/speaker_info")


def _with_style(method: str, path: str, **params: Any) -> Call:
    def call(ctx: Ctx) -> None:
        check(ctx.http.request(method, path, params={"speaker": ctx.style, **params}), method, path)

    return call


def _audio_query(ctx: Ctx) -> None:
    params = {"speaker": ctx.style, "text": "今日は、いい天気ですね。", "core_version": "0.0.0"}
    check(ctx.http.post("/audio_query", params=params), "POST", "/audio_query")


def _audio_query_from_preset(ctx: Ctx) -> None:
    params = {"preset_id": ctx.add_preset(), "text": "はい。"}
    check(ctx.http.post("/audio_query_from_preset", params=params),
          "POST", "/audio_query_from_preset")  # fmt: skip


def _accent_phrases(ctx: Ctx) -> None:
    for params in (
        {"text": "今日は、いい天気ですね。"},
        {"text": "キョ'ーワ、イ'イ/テ'ンキ", "is_kana": "true"},
    ):
        made = ctx.http.post("/accent_phrases", params={"speaker": ctx.style, **params})
        check(made, "POST", "/accent_phrases")


def _mora(path: str) -> Call:
    def call(ctx: Ctx) -> None:
        phrases = ctx.query()["accent_phrases"]
        check(ctx.http.post(path, params={"speaker": ctx.style}, json=phrases), "POST", path)

    return call


def _synthesis(path: str) -> Call:
    def call(ctx: Ctx) -> None:
        params = {"speaker": ctx.style, "enable_interrogative_upspeak": "false"}
        check(ctx.http.post(path, params=params, json=ctx.query("はい。")), "POST", path)

    return call


def _multi_synthesis(ctx: Ctx) -> None:
    queries = [ctx.query("はい。"), ctx.query("いいえ。")]
    made = ctx.http.post("/multi_synthesis", params={"speaker": ctx.style}, json=queries)
    check(made, "POST", "/multi_synthesis")
    assert len(zipfile.ZipFile(io.BytesIO(made.content)).namelist()) == 2


def _validate_kana(ctx: Ctx) -> None:
    check(ctx.http.post("/validate_kana", params={"text": "コンニチワ'"}), "POST", "/validate_kana")


def _presets(ctx: Ctx) -> None:
    preset_id = check(ctx.http.post("/add_preset", json=ctx.preset(pauseLength=0.5)),
                      "POST", "/add_preset")  # fmt: skip
    ctx.add_preset()  # one with no pauseLength: null, as the engine sends it
    check(ctx.http.get("/presets"), "GET", "/presets")
    update = ctx.http.post("/update_preset", json=ctx.preset(id=preset_id, name="renamed"))
    check(update, "POST", "/update_preset")
    check(ctx.http.post("/delete_preset", params={"id": preset_id}), "POST", "/delete_preset")


def _user_dict_word(ctx: Ctx) -> None:
    params = {"surface": "燦燦堂", "pronunciation": "サンサンドウ", "accent_type": 0,
              "word_type": "PROPER_NOUN", "priority": 5}  # fmt: skip
    check(ctx.http.post("/user_dict_word", params=params), "POST", "/user_dict_word")
    check(ctx.http.get("/user_dict"), "GET", "/user_dict")


def _rewrite_word(ctx: Ctx) -> None:
    uid = ctx.add_word("燦然社")
    params = {"surface": "燦然社", "pronunciation": "サンゼンシャ", "accent_type": 3}
    rewritten = ctx.http.put(f"/user_dict_word/{uid}", params=params)
    check(rewritten, "PUT", "/user_dict_word/{word_uuid}")


def _delete_word(ctx: Ctx) -> None:
    uid = ctx.add_word("燦々荘")
    check(ctx.http.delete(f"/user_dict_word/{uid}"), "DELETE", "/user_dict_word/{word_uuid}")


def _import_user_dict(ctx: Ctx) -> None:
    words = ctx.http.get("/user_dict").json()
    check(ctx.http.post("/import_user_dict", params={"override": "true"}, json=words),
          "POST", "/import_user_dict")  # fmt: skip


def _unsupported(method: str, path: str) -> Call:
    def call(ctx: Ctx) -> None:
        answer = ctx.http.request(method, path, params={"speaker": ctx.style})
        check(answer, method, path, "sing")

    return call


SUCCESS: dict[tuple[str, str], Call] = {
    ("GET", "/version"): _get("/version"),
    ("GET", "/core_versions"): _get("/core_versions"),
    ("GET", "/engine_manifest"): _get("/engine_manifest"),
    ("GET", "/speakers"): _get("/speakers", core_version="0.0.0"),
    ("GET", "/speaker_info"): _speaker_info,
    ("GET", "/supported_devices"): _get("/supported_devices"),
    ("GET", "/is_initialized_speaker"): _with_style("GET", "/is_initialized_speaker"),
    ("POST", "/initialize_speaker"): _with_style("POST", "/initialize_speaker", skip_reinit="true"),
    ("POST", "/audio_query"): _audio_query,
    ("POST", "/audio_query_from_preset"): _audio_query_from_preset,
    ("POST", "/accent_phrases"): _accent_phrases,
    ("POST", "/mora_data"): _mora("/mora_data"),
    ("POST", "/mora_length"): _mora("/mora_length"),
    ("POST", "/mora_pitch"): _mora("/mora_pitch"),
    ("POST", "/synthesis"): _synthesis("/synthesis"),
    ("POST", "/cancellable_synthesis"): _synthesis("/cancellable_synthesis"),
    ("POST", "/multi_synthesis"): _multi_synthesis,
    ("POST", "/validate_kana"): _validate_kana,
    ("GET", "/presets"): _presets,
    ("POST", "/add_preset"): _presets,
    ("POST", "/update_preset"): _presets,
    ("POST", "/delete_preset"): _presets,
    ("GET", "/user_dict"): _user_dict_word,
    ("POST", "/user_dict_word"): _user_dict_word,
    ("PUT", "/user_dict_word/{word_uuid}"): _rewrite_word,
    ("DELETE", "/user_dict_word/{word_uuid}"): _delete_word,
    ("POST", "/import_user_dict"): _import_user_dict,
    **{route: _unsupported(*route) for route in UNSUPPORTED},
}


@pytest.mark.server
def test_every_served_documented_route_has_a_success_case(server: RunningServer) -> None:
    assert set(SUCCESS) == served(server) & documented()


@pytest.mark.server
@pytest.mark.parametrize("route", sorted(SUCCESS), ids=" ".join)
def test_a_success_matches_the_document(route: tuple[str, str], ctx: Ctx) -> None:
    SUCCESS[route](ctx)
