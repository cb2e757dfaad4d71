"""Edited mora and pause lengths are heard (issue 25, item 4): voicevox-client unchanged."""

from __future__ import annotations

import io
import wave
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
voicevox = pytest.importorskip("voicevox")

from tests.conftest import TEST_VOICES  # noqa: E402
from tests.serving import (  # noqa: E402
    RunningServer,
    audio_query,
    first_style,
    serve,
    with_voicevox_client,
)
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402

pytestmark = pytest.mark.server

FRAME = 512 / 44100


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tts = TTS(threads=2, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"),
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    with serve(tts, ServerConfig(warmup=False)) as running:
        yield running
    tts.close()


def _seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as w:
        return w.getnframes() / w.getframerate()


def test_the_manifest_says_lengths_can_be_edited(server: RunningServer) -> None:
    with server.client() as http:
        features = http.get("/engine_manifest").json()["supported_features"]
    assert features["adjust_phoneme_length"] is True
    assert features["adjust_mora_pitch"] is False  # pitch edits are not read (docs say why)


def test_a_longer_vowel_and_pause_last_exactly_that_much_longer(server: RunningServer) -> None:
    speaker = first_style(server)

    async def work(client: Any) -> list[bytes]:
        query = await client.create_audio_query("こんにちは、今日は晴れです。", speaker=speaker)
        plain = await query.synthesis(speaker=speaker)
        again = await query.synthesis(speaker=speaker)
        query.accent_phrases[0].moras[0].vowel_length += 0.5
        vowel = await query.synthesis(speaker=speaker)
        pause = query.accent_phrases[0].pause_mora
        assert pause is not None
        pause.vowel_length += 0.25
        both = await query.synthesis(speaker=speaker)
        return [plain, again, vowel, both]

    plain, again, vowel, both = with_voicevox_client(server, work)
    assert plain == again
    assert _seconds(vowel) - _seconds(plain) == pytest.approx(0.5, abs=FRAME)
    assert _seconds(both) - _seconds(vowel) == pytest.approx(0.25, abs=FRAME)


def test_speed_scale_shortens_edited_lengths_too(server: RunningServer) -> None:
    speaker = first_style(server)
    with server.client() as http:
        query = audio_query(server, speaker, "はい。")
        query["accent_phrases"][0]["moras"][0]["vowel_length"] = 1.0
        slow = http.post("/synthesis", params={"speaker": speaker}, json=query)
        query["speedScale"] = 2.0
        fast = http.post("/synthesis", params={"speaker": speaker}, json=query)
    assert slow.status_code == fast.status_code == 200
    # the 1 s vowel is 0.5 s at speedScale 2 (the rest is short on this text)
    assert _seconds(slow.content) - _seconds(fast.content) > 0.45


def test_all_zero_lengths_as_aivisspeech_sends_them_are_not_read(server: RunningServer) -> None:
    speaker = first_style(server)
    query = audio_query(server, speaker, "こんにちは。")
    with server.client() as http:
        plain = http.post("/synthesis", params={"speaker": speaker}, json=query)
        for phrase in query["accent_phrases"]:
            for mora in phrase["moras"]:
                mora["vowel_length"] = 0.0
                if mora["consonant"]:
                    mora["consonant_length"] = 0.0
        zeros = http.post("/synthesis", params={"speaker": speaker}, json=query)
    assert plain.status_code == zeros.status_code == 200
    # the voice's own lengths: about as long as the voice reads it, not silence
    assert _seconds(zeros.content) == pytest.approx(_seconds(plain.content), rel=0.35)


def test_a_stretched_vowel_counts_in_full_against_the_audio_limit(server: RunningServer) -> None:
    """Lengths are read as set now, so the estimate counts them as set (no 1 s cap)."""
    from yomiage.voicevox.model import MAX_MORA_SECONDS

    speaker = first_style(server)
    with server.client() as http:
        # 99 moras at the longest a mora may be: past the 900 s a request may make
        query = audio_query(server, speaker, "ありがとうございます。" * 9)
        for phrase in query["accent_phrases"]:
            for mora in phrase["moras"]:
                mora["vowel_length"] = MAX_MORA_SECONDS
        refused = http.post("/synthesis", params={"speaker": speaker}, json=query)
        query["accent_phrases"][0]["moras"][0]["vowel_length"] = MAX_MORA_SECONDS + 1
        too_long = http.post("/synthesis", params={"speaker": speaker}, json=query)
    assert refused.status_code == 413
    assert "would last" in refused.json()["detail"]
    assert too_long.status_code == 422 and "vowel_length" in too_long.text
