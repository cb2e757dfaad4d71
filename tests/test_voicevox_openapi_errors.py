"""The errors of every VOICEVOX route yomiage serves, checked against VOICEVOX's own API
document (issue 31, item 12): a malformed request is FastAPI's 422, as VOICEVOX's engine
answers it, in both ``--compat`` modes; where the engine answers otherwise than its
document, as the engine does (tests/voicevox_openapi.py lists each case).
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("jsonschema")

from tests.serving import RunningServer
from tests.voicevox_openapi import (
    DOC,
    JSON,
    UNSUPPORTED,
    Call,
    Ctx,
    check,
    ctx,
    engine,
    invalid,
    served,
    server,
)

__all__ = ["ctx", "engine", "server"]  # the fixtures this module's tests use
pytestmark = pytest.mark.server


def _query_errors(path: str) -> Call:
    """The checks every route reading an AudioQuery body makes."""

    def call(ctx: Ctx) -> None:
        post = ctx.http.post
        invalid(post(path, json=ctx.query()), "POST", path, "query", "speaker")
        nan = post(path, params={"speaker": "x"}, json=ctx.query())
        invalid(nan, "POST", path, "query", "speaker")
        upspeak = {"speaker": ctx.style, "enable_interrogative_upspeak": "maybe"}
        invalid(post(path, params=upspeak, json=ctx.query()),
                "POST", path, "query", "enable_interrogative_upspeak")  # fmt: skip
        speaker = {"speaker": ctx.style}
        invalid(post(path, params=speaker, content=b"{", headers=JSON), "POST", path, "body", 1)
        invalid(post(path, params=speaker, json={"speedScale": 1}),
                "POST", path, "body", "accent_phrases")  # fmt: skip
        query = ctx.query()
        query["accent_phrases"][0]["moras"] = []
        invalid(post(path, params=speaker, json=query),
                "POST", path, "body", "accent_phrases", 0, "moras")  # fmt: skip
        fast = post(path, params=speaker, json={**ctx.query(), "speedScale": "fast"})
        invalid(fast, "POST", path, "body", "speedScale")
        check(post(path, params={"speaker": 7}, json=ctx.query()), "POST", path, "no style")

    return call


def _multi_synthesis_errors(ctx: Ctx) -> None:
    path, speaker = "/multi_synthesis", {"speaker": ctx.style}
    post = ctx.http.post
    invalid(post(path, params=speaker, json=ctx.query()), "POST", path, "body")
    bad = ctx.query()
    bad["accent_phrases"][0]["accent"] = 0
    invalid(post(path, params=speaker, json=[ctx.query(), bad]),
            "POST", path, "body", 1, "accent_phrases", 0, "accent")  # fmt: skip
    invalid(post(path, json=[ctx.query()]), "POST", path, "query", "speaker")
    rates = [ctx.query(), {**ctx.query(), "outputSamplingRate": 24000}]
    check(post(path, params=speaker, json=rates), "POST", path, "message")


def _text_route_errors(path: str) -> Call:
    def call(ctx: Ctx) -> None:
        post = ctx.http.post
        invalid(post(path, params={"text": "はい"}), "POST", path, "query", "speaker")
        invalid(post(path, params={"speaker": ctx.style}), "POST", path, "query", "text")
        invalid(
            post(path, params={"speaker": ctx.style, "text": " "}), "POST", path, "query", "text"
        )
        missing = post(path, params={"speaker": 7, "text": "はい"})
        check(missing, "POST", path, "no style")

    return call


def _accent_phrase_errors(ctx: Ctx) -> None:
    _text_route_errors("/accent_phrases")(ctx)
    path, post = "/accent_phrases", ctx.http.post
    flag = {"speaker": ctx.style, "text": "ア'", "is_kana": "maybe"}
    invalid(post(path, params=flag), "POST", path, "query", "is_kana")
    kana = {"speaker": ctx.style, "text": "アイウ", "is_kana": "true"}
    check(post(path, params=kana), "POST", path, "kana")


def _from_preset_errors(ctx: Ctx) -> None:
    path, post = "/audio_query_from_preset", ctx.http.post
    invalid(post(path, params={"text": "はい"}), "POST", path, "query", "preset_id")
    invalid(post(path, params={"text": "はい", "preset_id": "one"}),
            "POST", path, "query", "preset_id")  # fmt: skip
    check(post(path, params={"text": "はい", "preset_id": 999}), "POST", path, "message")


def _mora_errors(path: str) -> Call:
    def call(ctx: Ctx) -> None:
        post, speaker = ctx.http.post, {"speaker": ctx.style}
        phrases = ctx.query()["accent_phrases"]
        invalid(post(path, json=phrases), "POST", path, "query", "speaker")
        invalid(post(path, params=speaker, json={"moras": []}), "POST", path, "body")
        phrases[0]["moras"][0]["vowel_length"] = "long"
        invalid(post(path, params=speaker, json=phrases),
                "POST", path, "body", 0, "moras", 0, "vowel_length")  # fmt: skip
        fresh = ctx.query()["accent_phrases"]
        check(post(path, params={"speaker": 7}, json=fresh), "POST", path, "no style")

    return call


def _validate_kana_errors(ctx: Ctx) -> None:
    path, post = "/validate_kana", ctx.http.post
    invalid(post(path), "POST", path, "query", "text")
    check(post(path, params={"text": "アイウ"}), "POST", path, "kana")


def _speaker_route_errors(method: str, path: str) -> Call:
    def call(ctx: Ctx) -> None:
        invalid(ctx.http.request(method, path), method, path, "query", "speaker")
        bad = ctx.http.request(method, path, params={"speaker": "1.5"})
        invalid(bad, method, path, "query", "speaker")
        check(ctx.http.request(method, path, params={"speaker": 7}), method, path, "no style")

    return call


def _speaker_info_errors(ctx: Ctx) -> None:
    path, get = "/speaker_info", ctx.http.get
    invalid(get(path), "GET", path, "query", "speaker_uuid")
    check(get(path, params={"speaker_uuid": "nobody"}), "GET", path, "no speaker")


def _preset_body_errors(path: str) -> Call:
    def call(ctx: Ctx) -> None:
        post = ctx.http.post
        invalid(post(path, content=b"[1,", headers=JSON), "POST", path, "body", 3)
        invalid(post(path, json=[]), "POST", path, "body")
        invalid(post(path, json=ctx.preset(name=3)), "POST", path, "body", "name")
        invalid(post(path, json=ctx.preset(speedScale=9)), "POST", path, "body", "speedScale")
        if path == "/update_preset":
            check(post(path, json=ctx.preset(id=999)), "POST", path, "message")

    return call


def _delete_preset_errors(ctx: Ctx) -> None:
    path, post = "/delete_preset", ctx.http.post
    invalid(post(path), "POST", path, "query", "id")
    invalid(post(path, params={"id": "x"}), "POST", path, "query", "id")
    check(post(path, params={"id": 999}), "POST", path, "message")


def _word_errors(method: str, path: str) -> Call:
    def call(ctx: Ctx) -> None:
        url = path.replace("{word_uuid}", ctx.add_word("燦燦寺"))
        word = {"surface": "燦燦寺", "pronunciation": "サンサンジ", "accent_type": 1}
        send = ctx.http.request
        for name in word:
            missing = {k: v for k, v in word.items() if k != name}
            invalid(send(method, url, params=missing), method, path, "query", name)
        for name, value in (
            ("accent_type", "x"),
            ("priority", "high"),
            ("priority", 11),
            ("word_type", "NOUN"),
        ):
            invalid(send(method, url, params={**word, name: value}), method, path, "query", name)
        refused = send(method, url, params={**word, "pronunciation": "abc"})
        check(refused, method, path, "message")
        if "{" in path:
            gone = path.replace("{word_uuid}", "00000000-0000-0000-0000-000000000000")
            check(send(method, gone, params=word), method, path, "message")

    return call


def _delete_word_errors(ctx: Ctx) -> None:
    path = "/user_dict_word/{word_uuid}"
    gone = ctx.http.delete(path.replace("{word_uuid}", "00000000-0000-0000-0000-000000000000"))
    check(gone, "DELETE", path, "message")


def _import_errors(ctx: Ctx) -> None:
    path, post = "/import_user_dict", ctx.http.post
    invalid(post(path, json={}), "POST", path, "query", "override")
    invalid(post(path, params={"override": "perhaps"}, json={}), "POST", path, "query", "override")
    invalid(post(path, params={"override": "true"}, json=[1]), "POST", path, "body")
    for words in ({"x": 3}, {"x": {"surface": "燦", "pronunciation": "abc", "accent_type": 1}}):
        invalid(post(path, params={"override": "true"}, json=words), "POST", path, "body")


ERRORS: dict[tuple[str, str], Call] = {
    ("POST", "/audio_query"): _text_route_errors("/audio_query"),
    ("POST", "/audio_query_from_preset"): _from_preset_errors,
    ("POST", "/accent_phrases"): _accent_phrase_errors,
    ("POST", "/mora_data"): _mora_errors("/mora_data"),
    ("POST", "/mora_length"): _mora_errors("/mora_length"),
    ("POST", "/mora_pitch"): _mora_errors("/mora_pitch"),
    ("POST", "/synthesis"): _query_errors("/synthesis"),
    ("POST", "/cancellable_synthesis"): _query_errors("/cancellable_synthesis"),
    ("POST", "/multi_synthesis"): _multi_synthesis_errors,
    ("POST", "/validate_kana"): _validate_kana_errors,
    ("POST", "/initialize_speaker"): _speaker_route_errors("POST", "/initialize_speaker"),
    ("GET", "/is_initialized_speaker"): _speaker_route_errors("GET", "/is_initialized_speaker"),
    ("GET", "/speaker_info"): _speaker_info_errors,
    ("POST", "/add_preset"): _preset_body_errors("/add_preset"),
    ("POST", "/update_preset"): _preset_body_errors("/update_preset"),
    ("POST", "/delete_preset"): _delete_preset_errors,
    ("POST", "/user_dict_word"): _word_errors("POST", "/user_dict_word"),
    ("PUT", "/user_dict_word/{word_uuid}"): _word_errors("PUT", "/user_dict_word/{word_uuid}"),
    ("DELETE", "/user_dict_word/{word_uuid}"): _delete_word_errors,
    ("POST", "/import_user_dict"): _import_errors,
}
# Served routes whose document lists a 422 that no request can get here, and why.
NO_422 = {
    ("GET", "/speakers"): "its one parameter, core_version, is accepted and ignored",
    ("GET", "/supported_devices"): "as /speakers",
    **{route: "501 whatever is sent (UNSUPPORTED)" for route in UNSUPPORTED},
}


def test_every_documented_422_has_an_error_case(server: RunningServer) -> None:
    with_422 = {(m.upper(), p) for p, ops in DOC["paths"].items() for m, op in ops.items()
                if "422" in op["responses"]} & served(server)  # fmt: skip
    assert set(ERRORS) | set(NO_422) == with_422
    assert not set(ERRORS) & set(NO_422)


@pytest.mark.parametrize("route", sorted(ERRORS), ids=" ".join)
def test_errors_match_the_document(route: tuple[str, str], ctx: Ctx) -> None:
    ERRORS[route](ctx)
