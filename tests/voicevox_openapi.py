"""VOICEVOX's API document for the tests that check the VOICEVOX routes against it
(tests/test_voicevox_openapi*.py, issue 31, item 12): the document with the nulls
VOICEVOX's engine sends, the departures it makes from it, the check of one answer, and
a server in each ``--compat`` mode.

The document is the VOICEVOX editor's ``openapi.json``, kept unmodified in
tests/data/voicevox_openapi (its README gives its origin and licence). An answer is
validated against the schema the document gives for its status: a JSON body with
``jsonschema`` (``$ref``s resolved in the document), a binary one by content type.
Where VOICEVOX's engine itself answers otherwise than its document, yomiage answers as
the engine does, and each such case is listed here with the reason (and in
docs/voicevox.md): a change that departs from the document anywhere else fails.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import referencing
import referencing.jsonschema

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, serve
from yomiage import TTS
from yomiage.server import ServerConfig

DOCUMENT = Path(__file__).parent / "data" / "voicevox_openapi" / "openapi.json"
DOCUMENT_BLOB = "27bcbfb2aaf786b71fdb22fd495bfa1817eac468"  # git blob of the copy kept
AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
URI = "urn:voicevox:openapi"
JSON = {"Content-Type": "application/json"}  # for a body sent as bytes

# Routes VOICEVOX documents that yomiage does not serve, and why.
ABSENT = {
    ("POST", "/connect_waves"): "joins base64 WAVs a client sent: no voice's work, and "
    "the editor joins its audio itself",
    ("GET", "/setting"): "VOICEVOX's settings page in a browser; here they are `yomiage "
    "serve` options",
    ("POST", "/setting"): "as GET /setting",
    ("GET", "/"): "VOICEVOX's welcome page in a browser",
    ("GET", "/downloadable_libraries"): "VOICEVOX's voice libraries are not SBV2 voices "
    "(manage_library is false); AIVMX voices install through /aivm_models",
    ("GET", "/installed_libraries"): "as /downloadable_libraries",
    ("POST", "/install_library/{library_uuid}"): "as /downloadable_libraries",
    ("POST", "/uninstall_library/{library_uuid}"): "as /downloadable_libraries",
}
# Routes yomiage serves among VOICEVOX's that this document does not have, and why.
NOT_IN_DOCUMENT = {
    ("POST", "/streaming_synthesis"): "VOICEVOX's streamed synthesis, newer than this "
    "document (tests/test_voicevox_streaming.py)",
}
# Routes VOICEVOX documents that answer 501 here, as AivisSpeech answers them (an SBV2
# voice cannot sing or morph): the 200 the document gives cannot happen.
UNSUPPORTED = {
    ("POST", "/sing_frame_audio_query"), ("POST", "/sing_frame_f0"),
    ("POST", "/sing_frame_volume"), ("POST", "/frame_synthesis"),
    ("POST", "/synthesis_morphing"), ("POST", "/morphable_targets"),
    ("GET", "/singers"), ("GET", "/singer_info"),
}  # fmt: skip
# Fields VOICEVOX's engine declares `X | SkipJsonSchema[None]` (voicevox_engine at
# d4b1b3e: model.py, tts_pipeline/model.py, preset/model.py, metas/metas.py,
# engine_manifest.py, user_dict/model.py): the document says X, and the engine sends
# null where there is none (its e2e snapshots show "supported_vvlib_manifest_version":
# null and a style's "portrait": null). yomiage sends null there too.
VOICEVOX_NULLS = {
    "Mora": ("consonant", "consonant_length"),
    "AccentPhrase": ("pause_mora",),
    "AudioQuery": ("kana",),
    "Preset": ("pauseLength",),
    "StyleInfo": ("portrait",),
    "EngineManifest": ("supported_vvlib_manifest_version",),
    "SupportedFeatures": ("adjust_pause_length", "sing", "manage_library",
                          "return_resource_url", "apply_katakana_english"),
    "UpdateInfo": ("contributors",),
    "LicenseInfo": ("version", "license"),
    "UserDictWord": ("mora_count",),
}  # fmt: skip


@dataclass(frozen=True)
class Departure:
    """An answer VOICEVOX's engine gives otherwise than its document, which yomiage gives
    as the engine does; ``schema``: what ``detail`` holds (a pointer into the document),
    else a string."""

    status: int
    why: str
    schema: str | None = None


DEPARTURES = {
    "kana": Departure(400, "a kana parse error: the engine raises HTTPException(400, "
                      "detail=ParseKanaBadRequest), so the document's body comes under "
                      "`detail`", "/components/schemas/ParseKanaBadRequest"),
    "message": Departure(422, "a preset or word that does not exist, a word the "
                         "dictionary refuses, queries of different rates: the engine "
                         "raises HTTPException(422, detail=<message>)"),
    "no style": Departure(404, "a style id no voice has: the engine answers 422 "
                          "{'message'}; yomiage 404 {'detail'}, which voicevox-client "
                          "reads as NotFoundError (tests/test_voicevox*.py)"),
    "no speaker": Departure(404, "a speaker uuid no voice has: the engine raises "
                            "HTTPException(404, detail=<message>)"),
    "sing": Departure(501, "singing and morphing: AivisSpeech answers 501, its SBV2 "
                      "voices cannot sing"),
}  # fmt: skip


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _document() -> dict[str, Any]:
    """The document, with VOICEVOX_NULLS' fields also allowing null."""
    doc: dict[str, Any] = copy.deepcopy(json.loads(DOCUMENT.read_text("utf-8")))
    schemas = doc["components"]["schemas"]
    for name, fields in VOICEVOX_NULLS.items():
        for field in fields:
            prop = schemas[name]["properties"][field]
            schemas[name]["properties"][field] = {"anyOf": [prop, {"type": "null"}]}
    return doc


DOC = _document()
_REGISTRY = referencing.Registry().with_resource(
    URI,
    referencing.Resource.from_contents(
        DOC, default_specification=referencing.jsonschema.DRAFT202012
    ),
)


def _pointer(*parts: str) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def _validate(value: Any, pointer: str, what: str) -> None:
    validator = jsonschema.Draft202012Validator({"$ref": f"{URI}#{pointer}"}, registry=_REGISTRY)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    assert not errors, f"{what}: " + "; ".join(
        f"at {list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5]
    )


def check(response: httpx.Response, method: str, path: str, departure: str | None = None) -> Any:
    """``response`` against the document's answer for its status (or the departure named);
    its JSON body, if any."""
    what = f"{method} {path} {response.status_code}"
    if departure is not None:
        known = DEPARTURES[departure]
        assert response.status_code == known.status, f"{what}: {response.text[:300]}"
        assert response.headers["content-type"] == "application/json", what
        detail = response.json()["detail"]
        if known.schema is None:
            assert isinstance(detail, str) and detail, what
        else:
            _validate(detail, known.schema, what)
        return response.json()
    responses = DOC["paths"][path][method.lower()]["responses"]
    status = str(response.status_code)
    assert status in responses, f"{what} is not in VOICEVOX's document: {response.text[:300]}"
    content = responses[status].get("content")
    if content is None:
        assert response.content == b"" and "content-type" not in response.headers, what
        return None
    [(media, _)] = content.items()
    assert response.headers.get("content-type") == media, what
    if media == "application/json":
        body = response.json()
        _validate(body, _pointer("paths", path, method.lower(), "responses", status,
                                 "content", media, "schema"), what)  # fmt: skip
        return body
    magic = {"audio/wav": b"RIFF", "application/zip": b"PK\x03\x04"}[media]
    assert response.content.startswith(magic), what
    return None


def invalid(response: httpx.Response, method: str, path: str, *loc: str | int) -> None:
    """A 422 as VOICEVOX's FastAPI sends it, its first error at ``loc`` (or below it)."""
    assert response.status_code == 422, f"{method} {path}: {response.text[:300]}"
    body = check(response, method, path)
    assert body["detail"] and body["detail"][0]["loc"][: len(loc)] == list(loc), body


# -- the servers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    words = tmp_path_factory.mktemp("dict") / "user_dict.json"
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"),
              bert_source=TEST_VOICES / "tiny" / "bert", user_dictionary=words)  # fmt: skip
    tts.load("tiny", source=TEST_VOICES / "tiny").load("aivm", source=AIVMX).prepare()
    yield tts
    tts.close()


@pytest.fixture(scope="module", params=["voicevox", "aivisspeech"])
def server(
    request: pytest.FixtureRequest, engine: TTS, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    config = ServerConfig(warmup=False, compat=request.param, dict_api="write",
                          presets_path=tmp_path_factory.mktemp("presets") / "presets.json")  # fmt: skip
    with serve(engine, config) as running:
        yield running


@dataclass
class Ctx:
    """What a call needs: a client of one server, a style of it, and its speakers."""

    http: httpx.Client
    style: int
    speakers: list[dict[str, Any]]

    def query(self, text: str = "こんにちは、元気です。") -> dict[str, Any]:
        made = self.http.post("/audio_query", params={"speaker": self.style, "text": text})
        assert made.status_code == 200, made.text
        query: dict[str, Any] = made.json()
        return query

    def preset(self, **fields: Any) -> dict[str, Any]:
        return {"id": 1, "name": "preset", "speaker_uuid": self.speakers[0]["speaker_uuid"],
                "style_id": self.style, "speedScale": 1.0, "pitchScale": 0.0,
                "intonationScale": 1.0, "volumeScale": 1.0, "prePhonemeLength": 0.1,
                "postPhonemeLength": 0.1, **fields}  # fmt: skip

    def add_preset(self) -> int:
        added = self.http.post("/add_preset", json=self.preset())
        assert added.status_code == 200, added.text
        preset_id: int = added.json()
        return preset_id

    def add_word(self, surface: str) -> str:
        params = {"surface": surface, "pronunciation": "テスト", "accent_type": 1}
        added = self.http.post("/user_dict_word", params=params)
        assert added.status_code == 200, added.text
        uid: str = added.json()
        return uid


@pytest.fixture
def ctx(server: RunningServer) -> Iterator[Ctx]:
    with server.client() as http:
        speakers = http.get("/speakers").json()
        yield Ctx(http, speakers[0]["styles"][0]["id"], speakers)


def served(server: RunningServer) -> set[tuple[str, str]]:
    return {(method, route.path) for route in server.app.routes
            if "voicevox" in getattr(route, "tags", ())
            for method in getattr(route, "methods", ())}  # fmt: skip


def documented() -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, ops in DOC["paths"].items() for method in ops}


Call = Callable[[Ctx], None]
