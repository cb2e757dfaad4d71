"""VOICEVOX's own round trip (issue 49, item 12): every query ``/audio_query`` writes for
a text it accepts, ``/synthesis`` and ``/multi_synthesis`` accept back; a text whose
query could not come back is refused where it is sent."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")

from tests.serving import RunningServer, first_style, serve
from yomiage import TTS
from yomiage.server import ServerConfig

pytestmark = pytest.mark.server
PARAGRAPH = (
    "今日はいい天気ですね。明日の会議は午後三時から始まります。"
    "東京都渋谷区の駅前で待ち合わせをしましょう。"
)
MAX_CHARS = 500  # past 4 bytes a character + 64 KiB, the /tts body limit, for any query
# Texts of the characters whose queries weigh most for what they read: a mora with a
# consonant for each character, a phrase and a pause for every two, numbers and letters
# read as several moras (measured: 155-176 bytes a character of kana), and prose.
HEAVY = ["か", "か、", "1、", "a、", PARAGRAPH]


def _json(body: Any) -> dict[str, str]:
    return {"content": json.dumps(body, ensure_ascii=False), "headers": _TYPE}


_TYPE = {"Content-Type": "application/json"}


@pytest.fixture(scope="module", params=["voicevox", "aivisspeech"])
def server(request: pytest.FixtureRequest, engine: TTS) -> Iterator[RunningServer]:
    config = ServerConfig(warmup=False, max_input_chars=MAX_CHARS, compat=request.param)
    with serve(engine, config) as running:
        yield running


def test_the_query_of_a_450_character_text_is_accepted_back(engine: TTS) -> None:
    """With the default flags the query for 450 characters (87 KB) was 413 from
    /synthesis and /multi_synthesis: the body limit was /tts's."""
    text = (PARAGRAPH * 10)[:450]
    with serve(engine, ServerConfig(warmup=False)) as running, running.client() as http:
        speaker = first_style(running)
        made = http.post("/audio_query", params={"speaker": speaker, "text": text})
        assert made.status_code == 200 and len(made.content) > 81_920
        back = http.post("/synthesis", params={"speaker": speaker}, content=made.content,
                         headers=_TYPE)  # fmt: skip
        assert back.status_code == 200, back.text
        many = http.post("/multi_synthesis", params={"speaker": speaker},
                         **_json([made.json()]))  # fmt: skip
        assert many.status_code == 200, many.text


def _query_filling(http: Any, speaker: int, chars: str) -> Any:
    """The query for the longest text of ``chars`` repeated that reads at most
    --max-chars characters of kana (what makes a query's weight): the text at
    --max-chars, else cut to fit as the 413 says."""
    text = (chars * MAX_CHARS)[:MAX_CHARS]
    made = http.post("/audio_query", params={"speaker": speaker, "text": text})
    found = re.search(r"reads as (\d+) characters", made.text)
    if made.status_code == 413 and found:
        text = text[: len(text) * MAX_CHARS // int(found.group(1)) - len(chars)]
        made = http.post("/audio_query", params={"speaker": speaker, "text": text})
    assert made.status_code == 200, (chars, made.text)
    return made


def test_every_query_this_server_writes_fits_the_body_it_reads_back(
    server: RunningServer,
) -> None:
    """For texts of the heaviest characters that fill --max-chars, the query comes back
    through the body limit of every query route, as this server writes it and as an
    ASCII-only encoder (Python's default, which ``requests`` uses) writes it."""
    speaker = first_style(server)
    limits = server.state.body_limits
    with server.client() as http:
        for chars in HEAVY:
            made = _query_filling(http, speaker, chars)
            ascii_only = json.dumps(made.json()).encode()
            for path in ("/synthesis", "/multi_synthesis", "/streaming_synthesis", "/mora_data"):
                assert len(made.content) <= limits[path] and len(ascii_only) <= limits[path]


def test_a_max_chars_query_is_synthesized_back(server: RunningServer) -> None:
    """The round trip itself, for the heaviest text that fills --max-chars (a mora with
    a consonant for each character: ~175 bytes a character)."""
    speaker = first_style(server)
    with server.client() as http:
        made = http.post("/audio_query", params={"speaker": speaker, "text": "か" * MAX_CHARS})
        assert made.status_code == 200 and len(made.content) > MAX_CHARS * 4 + 64 * 1024
        back = http.post("/synthesis", params={"speaker": speaker}, content=made.content,
                         headers=_TYPE)  # fmt: skip
        assert back.status_code == 200, back.text
        assert back.content.startswith(b"RIFF")


def test_a_text_whose_query_could_not_come_back_is_refused_when_sent(engine: TTS) -> None:
    """㍿ is seven moras and w four: a text within --max-chars made a query that
    /synthesis then refused (its moras' kana past --max-chars, or more than 2,000 moras)."""
    config = ServerConfig(warmup=False, max_input_chars=60)
    with serve(engine, config) as running, running.client() as http:
        speaker = first_style(running)
        for text in ("㍿" * 10, "w" * 20):
            for path in ("/audio_query", "/accent_phrases"):
                refused = http.post(path, params={"speaker": speaker, "text": text})
                assert refused.status_code == 413, (path, refused.text)
                assert "send it in parts" in refused.json()["detail"]
        made = http.post("/audio_query", params={"speaker": speaker, "text": "㍿" * 7})
        back = http.post("/synthesis", params={"speaker": speaker}, content=made.content,
                         headers=_TYPE)  # fmt: skip
        assert made.status_code == 200 and back.status_code == 200, back.text
