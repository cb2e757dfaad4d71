"""VOICEVOX's user-dictionary routes and AquesTalk-like kana, over loopback HTTP.

voicevox-client 0.4.1 has no calls for either, so these speak HTTP directly,
with the shapes VOICEVOX's own engine answers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, serve
from yomiage import TTS
from yomiage.server import ServerConfig
from yomiage.voicevox.kana import KanaError, kana_text, parse_kana
from yomiage.voicevox.user_dict import word_uuid

pytestmark = pytest.mark.server

WORD_KEYS = {
    "surface", "priority", "context_id", "part_of_speech", "part_of_speech_detail_1",
    "part_of_speech_detail_2", "part_of_speech_detail_3", "inflectional_type",
    "inflectional_form", "stem", "yomi", "pronunciation", "accent_type", "mora_count",
    "accent_associative_rule",
}  # fmt: skip


@pytest.fixture(scope="module")
def tts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    words = tmp_path_factory.mktemp("dict") / "user_dict.json"
    with TTS(threads=1, user_dictionary=words).load("tiny", source=TEST_VOICES / "tiny") as tts:
        yield tts.prepare()


@pytest.fixture(scope="module")
def server(tts: TTS) -> Iterator[RunningServer]:
    with serve(tts, ServerConfig(warmup=False, dict_api="write")) as running:
        yield running


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def _speaker(http: httpx.Client) -> int:
    speaker: int = http.get("/speakers").json()[0]["styles"][0]["id"]
    return speaker


def _moras(phrases: list[dict[str, Any]]) -> list[str]:
    return ["".join(m["text"] for m in p["moras"]) for p in phrases]


def test_a_word_added_the_voicevox_way_is_read_and_shared(tts: TTS, http: httpx.Client) -> None:
    speaker = _speaker(http)
    params = {"surface": "担々麺", "pronunciation": "タンタンメン", "accent_type": 3}
    added = http.post("/user_dict_word", params=params)
    assert added.status_code == 200 and added.headers["content-type"] == "application/json"
    uid = added.json()
    assert uid == word_uuid("担々麺")
    words = http.get("/user_dict").json()
    assert set(words[uid]) == WORD_KEYS
    assert (words[uid]["pronunciation"], words[uid]["accent_type"]) == ("タンタンメン", 3)
    assert (words[uid]["mora_count"], words[uid]["part_of_speech_detail_1"]) == (6, "固有名詞")
    # The same word in yomiage's own API and in what the voice reads.
    assert [w["surface"] for w in http.get("/v1/dictionary").json()["words"]] == ["担々麺"]
    query = http.post("/audio_query", params={"text": "担々麺", "speaker": speaker}).json()
    assert _moras(query["accent_phrases"])[0].startswith("タンタンメン")

    rewritten = http.put(f"/user_dict_word/{uid}", params={**params, "pronunciation": "タンタンメーン", "accent_type": 0, "priority": 9})  # fmt: skip
    assert rewritten.status_code == 204 and not rewritten.content
    assert "content-type" not in rewritten.headers
    [word] = http.get("/user_dict").json().values()
    assert (word["pronunciation"], word["accent_type"], word["priority"]) == (
        "タンタンメーン",
        0,
        9,
    )

    assert http.delete(f"/user_dict_word/{uid}").status_code == 204
    assert http.get("/user_dict").json() == {}
    gone = http.delete(f"/user_dict_word/{uid}")
    assert gone.status_code == 422 and "no word with uuid" in gone.json()["detail"]
    assert tts.words() == ()


def test_bad_words_are_refused_with_the_reason(http: httpx.Client) -> None:
    # Words the dictionary refuses: VOICEVOX's 422 with a message.
    cases = [
        ({"surface": "x", "pronunciation": "abc", "accent_type": 0}, "katakana"),
        ({"surface": "語", "pronunciation": "ゴ", "accent_type": 5}, "accent"),
        ({"surface": "語", "pronunciation": "ゴ" * 1000, "accent_type": 1}, "at most"),
    ]
    for params, reason in cases:
        refused = http.post("/user_dict_word", params=params)
        assert refused.status_code == 422, params
        assert reason in refused.json()["detail"], refused.json()
    # Parameters of the wrong shape: FastAPI's 422 naming the parameter, as VOICEVOX's.
    for params, name in (
        ({"surface": "語", "pronunciation": "ゴ", "accent_type": 1, "priority": 11}, "priority"),
        ({"surface": "語", "pronunciation": "ゴ", "accent_type": 1, "word_type": "X"}, "word_type"),
        ({"surface": "語", "pronunciation": "ゴ"}, "accent_type"),
    ):
        malformed = http.post("/user_dict_word", params=params)
        assert malformed.status_code == 422, params
        assert malformed.json()["detail"][0]["loc"] == ["query", name], malformed.json()
    missing = http.put(f"/user_dict_word/{word_uuid('nothing')}", params=cases[0][0])
    assert missing.status_code == 422 and "no word with uuid" in missing.json()["detail"]
    assert http.get("/user_dict").json() == {}


def test_import_checks_every_word_and_override_decides(http: httpx.Client) -> None:
    def word(surface: str, reading: str, accent: int, **more: Any) -> dict[str, Any]:
        return {"surface": surface, "pronunciation": reading, "accent_type": accent,
                "part_of_speech": "名詞", "part_of_speech_detail_1": "一般", **more}  # fmt: skip

    http.post("/user_dict_word", params={"surface": "鬼滅", "pronunciation": "キメツ",
                                         "accent_type": 0})  # fmt: skip
    body = {"a": word("鬼滅", "オニメツ", 2), "b": word("呪術", "ジュジュツ", 1, priority=7)}
    bad = http.post("/import_user_dict", params={"override": "true"},
                    json={**body, "c": word("x", "abc", 0)})  # fmt: skip
    assert bad.status_code == 422 and "word 'c'" in bad.json()["detail"][0]["msg"]
    assert len(http.get("/user_dict").json()) == 1  # nothing of a refused import is used
    assert http.post("/import_user_dict", json=body).status_code == 422  # override is required

    assert http.post("/import_user_dict", params={"override": "false"}, json=body).status_code == 204  # fmt: skip
    words = {w["surface"]: w for w in http.get("/user_dict").json().values()}
    assert words["鬼滅"]["pronunciation"] == "キメツ"  # ours kept
    assert (words["呪術"]["priority"], words["呪術"]["part_of_speech_detail_1"]) == (7, "一般")
    assert http.post("/import_user_dict", params={"override": "true"}, json=body).status_code == 204  # fmt: skip
    words = {w["surface"]: w for w in http.get("/user_dict").json().values()}
    assert words["鬼滅"]["pronunciation"] == "オニメツ"
    for uid in list(http.get("/user_dict").json()):
        assert http.delete(f"/user_dict_word/{uid}").status_code == 204


def test_words_persist_and_dict_api_permissions_hold(tts: TTS, tmp_path: Path) -> None:
    store = tmp_path / "words.json"
    with TTS(threads=1, user_dictionary=store).load("tiny", source=TEST_VOICES / "tiny") as own:
        own.prepare()
        writable = ServerConfig(warmup=False, dict_api="write")
        params = {"surface": "推し", "pronunciation": "オシ", "accent_type": 0}
        with serve(own, writable) as running, running.client() as http:
            assert http.post("/user_dict_word", params=params).status_code == 200
        assert "推し" in store.read_text("utf-8")
        with serve(own, ServerConfig(warmup=False)) as running, running.client() as http:
            assert [w["surface"] for w in http.get("/user_dict").json().values()] == ["推し"]
            denied = http.post("/user_dict_word", params=params)
            assert denied.status_code == 403 and "--dict-api write" in denied.json()["detail"]
        closed = ServerConfig(warmup=False, dict_api="off")
        with serve(own, closed) as running, running.client() as http:
            assert http.get("/user_dict").status_code == 403


def test_kana_is_parsed_as_voicevox_writes_it() -> None:
    [first, second] = parse_kana("_シ'タ、ア'メ？")
    assert [m.vowel for m in first.moras] == ["I", "a"] and first.accent == 1
    assert first.pause == "、" and second.interrogative and second.accent == 1
    assert kana_text([first, second]) == "シタ、アメ？"
    [long] = parse_kana("キョ'ー")
    assert [(m.text, m.vowel) for m in long.moras] == [("キョ", "o"), ("ー", "o")]
    faults = {"": "EMPTY_PHRASE", "'ア": "ACCENT_TOP", "アメ": "ACCENT_NOTFOUND",
              "ア''メ": "ACCENT_TWICE", "ア'//メ'": "EMPTY_PHRASE", "ア'X": "UNKNOWN_TEXT",
              "ア？メ'": "INTERROGATION_MARK_NOT_AT_END", "ー'": "UNKNOWN_TEXT"}  # fmt: skip
    for text, name in faults.items():
        with pytest.raises(KanaError) as caught:
            parse_kana(text)
        assert caught.value.name == name, text


def test_kana_input_gives_phrases_the_voice_times(http: httpx.Client) -> None:
    speaker = _speaker(http)
    kana = "コンニチワ'、ヒ'ホデス"
    made = http.post(
        "/accent_phrases", params={"text": kana, "speaker": speaker, "is_kana": "true"}
    )
    assert made.status_code == 200
    phrases = made.json()
    assert _moras(phrases) == ["コンニチワ", "ヒホデス"]
    assert [p["accent"] for p in phrases] == [5, 1]
    assert phrases[0]["pause_mora"] is not None
    assert all(m["vowel_length"] > 0 for p in phrases for m in p["moras"])
    pitches = [m["pitch"] for m in phrases[1]["moras"]]
    assert pitches[0] > pitches[1]  # the nucleus on ヒ: high, then low

    # The kana's accent, not the frontend's, comes back and is what the voice reads.
    moved = http.post("/accent_phrases", params={"text": "ヒホ'デス", "speaker": speaker,
                                                 "is_kana": "true"}).json()  # fmt: skip
    assert moved[0]["accent"] == 2
    query = {**http.post("/audio_query", params={"text": "はい", "speaker": speaker}).json(),
             "accent_phrases": moved, "kana": None}  # fmt: skip
    audio = http.post("/synthesis", params={"speaker": speaker}, json=query)
    assert audio.status_code == 200 and audio.content[:4] == b"RIFF"
    metrics = http.get("/metrics").text  # counted as the speech routes count
    assert 'yomiage_audio_seconds_total{voice="tiny"}' in metrics
    assert 'route="/synthesis"' in metrics

    assert http.post("/validate_kana", params={"text": kana}).json() is True
    bad = http.post("/validate_kana", params={"text": "アメ"})
    assert bad.status_code == 400
    assert bad.json()["detail"]["error_name"] == "ACCENT_NOTFOUND"
    wrong = http.post("/accent_phrases", params={"text": "アメ", "speaker": speaker, "is_kana": "true"})  # fmt: skip
    assert wrong.status_code == 400 and wrong.json()["detail"]["error_name"] == "ACCENT_NOTFOUND"


def test_edited_phrases_get_pitches_from_their_own_accent(http: httpx.Client) -> None:
    speaker = _speaker(http)
    phrases = http.post("/accent_phrases", params={"text": "ヒホです", "speaker": speaker}).json()
    phrases[0]["accent"] = len(phrases[0]["moras"])  # the nucleus moved to the last mora
    redone = http.post("/mora_data", params={"speaker": speaker}, json=phrases).json()
    pitches = [m["pitch"] for m in redone[0]["moras"] if m["pitch"] > 0]
    assert pitches[0] < pitches[1]  # low then high: the new accent, not the old one
    assert [m["vowel_length"] > 0 for m in redone[0]["moras"]] == [True] * len(redone[0]["moras"])


def test_the_supervised_worker_changes_words_too(test_voice: Path) -> None:
    from tests import crashing_service
    from yomiage.server.engine.worker import WorkerService

    service = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    try:
        config = ServerConfig(warmup=False, dict_api="write")
        with serve(service, config) as running, running.client() as http:  # type: ignore[arg-type]
            params = {"surface": "推し", "pronunciation": "オシ", "accent_type": 0}
            uid = http.post("/user_dict_word", params=params).json()
            assert list(http.get("/user_dict").json()) == [uid]
            assert http.delete(f"/user_dict_word/{uid}").status_code == 204
    finally:
        service.close()
