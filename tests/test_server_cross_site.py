"""Requests a page on another site could make, and bodies the parser must never see
(issue 22, items 2 and 8): state-changing requests from origins the server does not
allow are refused whatever their body; JSON nested past any real request is a 400."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from tests.serving import RunningServer, serve  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402
from yomiage.server.request_body import MAX_JSON_DEPTH, nests_too_deep  # noqa: E402

pytestmark = pytest.mark.server

EVIL = "http://evil.example"
PRESET = {"id": 1, "name": "mine", "speaker_uuid": "x", "style_id": 0, "speedScale": 1.5}


def _error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    return dict(body["error"])


@pytest.fixture(scope="module")
def server(engine: TTS) -> Iterator[RunningServer]:
    with serve(engine, ServerConfig(warmup=False, dict_api="write")) as running:
        yield running


@pytest.fixture
def preset(server: RunningServer) -> Iterator[int]:
    with server.client() as http:
        number = int(http.post("/add_preset", json=PRESET).json())
    yield number
    with server.client() as http:
        http.post("/delete_preset", params={"id": number})


def _preset_ids(server: RunningServer) -> list[int]:
    with server.client() as http:
        return [p["id"] for p in http.get("/presets").json()]


@pytest.mark.parametrize(
    "headers",
    [{"Origin": EVIL}, {"Origin": "null"}, {"Origin": "http://localhost.evil.example"},
     {"Sec-Fetch-Site": "cross-site"}],
)  # fmt: skip
def test_a_bodiless_write_from_another_site_is_refused(
    server: RunningServer, preset: int, headers: dict[str, str]
) -> None:
    """``POST /delete_preset?id=3`` from ``Origin: http://evil.example`` answered 204: a CORS
    "simple" request has no body, so the JSON-only check never saw it."""
    with server.client() as http:
        response = http.post("/delete_preset", params={"id": preset}, headers=headers)
    assert response.status_code == 403
    assert _error(response)["code"] == "origin_not_allowed"
    assert preset in _preset_ids(server)  # nothing changed


def test_a_dictionary_word_from_another_site_is_not_added(server: RunningServer) -> None:
    """With write access, ``POST /user_dict_word?surface=…`` from a page added the word."""
    params = {"surface": "ありがとう", "pronunciation": "バカヤロウ", "accent_type": 1}
    with server.client() as http:
        response = http.post("/user_dict_word", params=params, headers={"Origin": EVIL})
        assert response.status_code == 403
        words = http.get("/user_dict").json()
    assert all(w["surface"] != "ありがとう" for w in words.values())
    for method in ("PUT", "DELETE"):
        with server.client() as http:
            response = http.request(method, "/user_dict_word/x", headers={"Origin": EVIL})
        assert response.status_code == 403, method


def test_writes_from_no_page_and_allowed_origins_still_work(server: RunningServer) -> None:
    own = server.url  # the server's own page (the playground)
    for headers in ({}, {"Origin": "http://localhost:3000"}, {"Origin": "app://."},
                    {"Origin": own}, {"Sec-Fetch-Site": "same-origin"}):  # fmt: skip
        with server.client() as http:
            number = http.post("/add_preset", json=PRESET, headers=headers)
            assert number.status_code == 200, headers
            deleted = http.post("/delete_preset", params={"id": number.json()}, headers=headers)
            assert deleted.status_code == 204, headers
    with server.client() as http:  # reading is not a write: CORS decides what a page sees
        assert http.get("/presets", headers={"Origin": EVIL}).status_code == 200


def test_the_origins_follow_the_cors_settings(engine: TTS) -> None:
    config = ServerConfig(warmup=False, cors_local_apps=False, cors_origins=("https://ed.example",))
    with serve(engine, config) as running, running.client() as http:
        for origin, status in (("https://ed.example", 200), ("http://localhost:3000", 403),
                               (running.url, 200)):  # fmt: skip
            response = http.post("/add_preset", json=PRESET, headers={"Origin": origin})
            assert response.status_code == status, origin


# -- JSON nested past any request -------------------------------------------------------


@pytest.mark.parametrize("route", ["/tts", "/v1/audio/speech", "/synthesis?speaker=0",
                                   "/add_preset", "/v1/dictionary"])  # fmt: skip
def test_json_nested_20000_deep_is_a_400_not_a_traceback(server: RunningServer, route: str) -> None:
    """``[[[…]]]`` 20,000 deep raised RecursionError in the JSON parser: a 500."""
    for body in ("[" * 20000 + "]" * 20000, '{"a":' * 12000 + "1" + "}" * 12000):
        with server.client() as http:
            response = http.post(route, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, route
        error = _error(response)
        assert error["code"] == "invalid_json" and "nests deeper" in error["message"]


def test_nesting_is_counted_outside_strings_only() -> None:
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    assert nests_too_deep(deep.encode())
    assert not nests_too_deep(("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH).encode())
    text = '{"text": "' + "[{" * 5000 + '\\"' + "[" * 100 + '"}'
    assert not nests_too_deep(text.encode())
    wide = "[" + ",".join(["{}"] * 10000) + "]"  # many brackets, little depth
    assert not nests_too_deep(wide.encode())
