"""The VOICEVOX routes driven by a real VOICEVOX client (voicevox-client 0.4.1, unchanged),
on loopback, with the tiny test voice and the same voice as an AIVMX file."""

from __future__ import annotations

import functools
import io
import wave
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
voicevox = pytest.importorskip("voicevox")

from tests.conftest import TEST_VOICES  # noqa: E402
from tests.serving import RunningServer, serve, with_voicevox_client  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402
from yomiage.voicevox.ids import derived_speaker_uuid, style_id  # noqa: E402

pytestmark = pytest.mark.server

AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
TEXT = "こんにちは、今日はいい天気ですね。散歩に行きましょう。"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    # SBV2's reading: the accents below were checked against it.
    tts = TTS(threads=2, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"),
              bert_source=TEST_VOICES / "tiny" / "bert", reading="sbv2")  # fmt: skip
    tts.load("tiny", source=TEST_VOICES / "tiny").load("aivm", source=AIVMX).prepare()
    with serve(tts, ServerConfig(warmup=False)) as running:
        yield running
    tts.close()


def _wav(data: bytes) -> tuple[int, int, np.ndarray]:
    with wave.open(io.BytesIO(data)) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        return w.getframerate(), w.getnchannels(), frames


def _styles(server: RunningServer) -> dict[tuple[str, str], int]:
    speakers = with_voicevox_client(server, lambda c: c.fetch_speakers())
    return {(s.name, st.name): st.id for s in speakers for st in s.styles}


def test_speakers_have_stable_ids_aivisspeech_gives_aivmx_voices(server: RunningServer) -> None:
    styles = _styles(server)
    aivm_uuid = "4ac091db-7735-1044-c4d0-af1860e99c46"  # spk_a in the file's manifest
    assert styles[("aivm (spk_a)", "ノーマル")] == style_id(aivm_uuid, 0)
    assert styles[("aivm (spk_a)", "Sad")] == style_id(aivm_uuid, 2)
    tiny_a = derived_speaker_uuid("tiny", "spk_a")
    assert styles[("tiny (spk_a)", "Happy")] == style_id(tiny_a, 1)
    assert all(0 < i < 2**31 for i in styles.values())
    assert len(set(styles.values())) == len(styles) == 12  # 2 voices x 2 speakers x 3 styles


def test_audio_query_has_real_accents_lengths_and_pitches(server: RunningServer) -> None:
    speaker = _styles(server)[("tiny (spk_a)", "Neutral")]
    query = with_voicevox_client(
        server, lambda c: c.create_audio_query("こんにちは、ヒホです。", speaker=speaker)
    )
    phrases = query.accent_phrases
    assert ["".join(m.text for m in p.moras) for p in phrases] == ["コンニチワ", "ヒホデス"]
    assert [p.accent for p in phrases] == [5, 1]
    assert phrases[0].pause_mora is not None and phrases[1].pause_mora is None
    su = phrases[1].moras[-1]
    assert (su.consonant, su.vowel, su.pitch) == ("s", "U", 0.0)  # devoiced: unvoiced
    voiced = [m for p in phrases for m in p.moras if m.vowel in "aiueoN"]
    assert all(m.vowel_length > 0 and m.pitch > 0 for m in voiced)
    assert len({m.pitch for m in phrases[0].moras}) == 2  # low コ, then high
    assert query.kana == "こんにちは、ヒホです。"
    assert query.output_sampling_rate == 44100


def test_synthesis_honours_the_edits(server: RunningServer) -> None:
    speaker = _styles(server)[("tiny (spk_b)", "Happy")]

    async def work(client: Any) -> list[bytes]:
        query = await client.create_audio_query(TEXT, speaker=speaker)
        plain = await query.synthesis(speaker=speaker)
        query.speed_scale = 2.0
        fast = await query.synthesis(speaker=speaker)
        query.speed_scale, query.volume_scale = 1.0, 0.5
        quiet = await query.synthesis(speaker=speaker)
        query.volume_scale, query.pre_phoneme_length, query.post_phoneme_length = 1.0, 1.0, 0.5
        padded = await query.synthesis(speaker=speaker)
        query.pre_phoneme_length = query.post_phoneme_length = 0.1
        query.output_sampling_rate, query.output_stereo = 24000, True
        resampled = await query.synthesis(speaker=speaker)
        return [plain, fast, quiet, padded, resampled]

    plain, fast, quiet, padded, resampled = (_wav(b) for b in with_voicevox_client(server, work))
    rate, channels, samples = plain
    assert (rate, channels) == (44100, 1)
    # twice as fast (the 80 ms floor of sentence pauses and rounding up of frames stay)
    assert 0.45 < len(fast[2]) / len(samples) < 0.7
    assert int(np.abs(quiet[2]).max()) == pytest.approx(int(np.abs(samples).max()) / 2, abs=2)
    extra = len(padded[2]) - len(samples)
    assert extra == pytest.approx(44100 * (0.9 + 0.4), abs=2)  # pre 0.1 -> 1.0, post 0.1 -> 0.5
    assert resampled[:2] == (24000, 2)
    assert len(resampled[2]) / 2 == pytest.approx(len(samples) * 24000 / 44100, abs=3)
    assert np.array_equal(resampled[2][0::2], resampled[2][1::2])


def test_the_same_query_gives_the_same_audio_and_an_accent_edit_is_heard(
    server: RunningServer,
) -> None:
    speaker = _styles(server)[("tiny (spk_a)", "Neutral")]

    async def work(client: Any) -> list[bytes]:
        query = await client.create_audio_query("雨が降っています。", speaker=speaker)
        first = await query.synthesis(speaker=speaker)
        again = await query.synthesis(speaker=speaker)
        phrase = query.accent_phrases[0]
        phrase.accent = 1 if phrase.accent != 1 else len(phrase.moras)
        edited = await query.synthesis(speaker=speaker)
        return [first, again, edited]

    first, again, edited = with_voicevox_client(server, work)
    assert first == again
    assert edited != first


def test_pause_length_sets_the_pause_between_sentences(server: RunningServer) -> None:
    speaker = _styles(server)[("tiny (spk_a)", "Neutral")]
    http_query = {"text": "はい。いいえ。", "speaker": speaker}
    with server.client() as http:
        query = http.post("/audio_query", params=http_query).json()
        lengths = []
        for pause in (0.0, 1.0):
            query["pauseLength"] = pause
            response = http.post("/synthesis", params={"speaker": speaker}, json=query)
            assert response.status_code == 200, response.text
            lengths.append(len(_wav(response.content)[2]))
    assert lengths[1] - lengths[0] == pytest.approx(44100, rel=0.02)


def test_multi_synthesis_initialize_and_devices(server: RunningServer) -> None:
    speaker = _styles(server)[("aivm (spk_a)", "ノーマル")]

    async def work(client: Any) -> tuple[Any, ...]:
        queries = [
            await client.create_audio_query(t, speaker=speaker) for t in ("はい。", "いいえ。")
        ]
        archive = await client.multi_synthesis(queries, speaker=speaker)
        await client.init_speaker(speaker)
        inited = await client.check_inited_speaker(speaker)
        devices = await client.check_devices()
        version = await client.fetch_engine_version()
        return archive, inited, devices, version

    archive, inited, devices, version = with_voicevox_client(server, work)
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        assert z.namelist() == ["001.wav", "002.wav"]
        assert all(_wav(z.read(n))[0] == 44100 for n in z.namelist())
    assert inited is True
    assert (devices.cpu, devices.cuda) == (True, False)
    assert isinstance(version, str)


def test_errors_are_voicevox_shaped(server: RunningServer) -> None:
    with pytest.raises(voicevox.errors.NotfoundError, match="style 7 does not exist"):
        with_voicevox_client(server, lambda c: c.create_audio_query("はい", speaker=7))
    with server.client() as http:
        speaker = _styles(server)[("tiny (spk_a)", "Neutral")]
        bad = http.post("/synthesis", params={"speaker": speaker},
                        json={"accent_phrases": [{"moras": [], "accent": 1}]})  # fmt: skip
        assert bad.status_code == 422
        assert bad.headers["content-type"] == "application/json"
        # FastAPI's shape, as VOICEVOX answers a malformed body (issue 31, item 12)
        [error] = bad.json()["detail"]
        assert error["loc"] == ["body", "accent_phrases", 0, "moras"]
        assert error["type"] == "value_error" and "accent_phrases[0].moras" in error["msg"]
        sing = http.post("/sing_frame_audio_query", params={"speaker": speaker})
        assert sing.status_code == 501 and "cannot sing" in sing.json()["detail"]
        info = http.get(
            "/speaker_info", params={"speaker_uuid": derived_speaker_uuid("tiny", "spk_a")}
        )
        assert info.status_code == 200 and "no licence text" in info.json()["policy"]
        manifest = http.get("/engine_manifest").json()
        assert manifest["default_sampling_rate"] == 44100
        assert manifest["supported_features"]["adjust_speed_scale"] is True


def test_apis_can_be_chosen(tmp_path: Path) -> None:
    with TTS(threads=1).load("tiny", source=TEST_VOICES / "tiny").prepare() as tts:
        only = ServerConfig(warmup=False, apis=("openai",))
        with serve(tts, only) as running, running.client() as http:
            assert http.get("/speakers").status_code == 404
            assert http.get("/v1/models").status_code == 200
        with pytest.raises(ValueError, match="unknown API 'grpc'"):
            ServerConfig(apis=("grpc",))


def test_the_supervised_worker_serves_them_too(test_voice: Path) -> None:
    from tests import crashing_service
    from yomiage.server.engine.worker import WorkerService

    service = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    try:
        with serve(service, ServerConfig(warmup=False)) as running:  # type: ignore[arg-type]
            speakers = with_voicevox_client(running, lambda c: c.fetch_speakers())
            speaker = speakers[0].styles[0].id

            async def work(client: Any) -> bytes:
                query = await client.create_audio_query("はい、そうです。", speaker=speaker)
                data: bytes = await query.synthesis(speaker=speaker)
                return data

            rate, _, samples = _wav(with_voicevox_client(running, work))
            assert rate == 44100 and len(samples) > 0
    finally:
        service.close()


def test_presets_make_queries_and_persist(tmp_path: Path) -> None:
    store = tmp_path / "presets.json"
    with TTS(threads=1).load("tiny", source=TEST_VOICES / "tiny").prepare() as tts:
        config = ServerConfig(warmup=False, presets_path=store)
        with serve(tts, config) as running:
            speaker = _styles(running)[("tiny (spk_a)", "Happy")]
            preset = {"id": 1, "name": "fast and quiet", "speaker_uuid": "x", "style_id": speaker,
                      "speedScale": 1.5, "volumeScale": 0.5, "pauseLength": None}  # fmt: skip
            with running.client() as http:
                assert http.post("/add_preset", json=preset).json() == 1
                assert http.post("/add_preset", json=preset).json() == 2  # id taken: renumbered
                assert http.post("/update_preset", json={**preset, "name": "renamed"}).json() == 1
                assert http.post("/delete_preset", params={"id": 2}).status_code == 204
                missing = http.post("/delete_preset", params={"id": 9})
                assert missing.status_code == 422 and "no preset" in missing.json()["detail"]
                bad = http.post("/add_preset", json={**preset, "speedScale": 9})
                assert bad.status_code == 422
                assert bad.json()["detail"][0]["loc"] == ["body", "speedScale"]
                [kept] = http.get("/presets").json()
                assert kept["name"] == "renamed" and kept["pauseLengthScale"] == 1.0

            query = with_voicevox_client(
                running, lambda c: c.create_audio_query_from_preset("はい。", 1)
            )
            assert (query.speed_scale, query.volume_scale) == (1.5, 0.5)
            assert query.accent_phrases
        with serve(tts, config) as running, running.client() as http:  # a restart keeps them
            assert [p["id"] for p in http.get("/presets").json()] == [1]
