"""``yomiage serve --compat aivisspeech`` (issue 25, item 1): AivisSpeech's meanings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")

from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, audio_query, first_style, serve
from yomiage import TTS
from yomiage.cli.main import build_parser
from yomiage.cli.serve import listen_port
from yomiage.options import SynthesisOptions
from yomiage.server.config import ServerConfig
from yomiage.voicevox.aivisspeech import sdp_ratio, style_weight
from yomiage.voicevox.model import parse_audio_query


@pytest.mark.parametrize(
    ("scale", "weight"),
    [(0.0, 0.0), (0.5, 0.5), (1.0, 1.0), (1.5, 5.5), (2.0, 10.0)],
)
def test_intonation_scale_is_the_style_weight(scale: float, weight: float) -> None:
    assert style_weight(scale) == pytest.approx(weight)


@pytest.mark.parametrize(
    ("scale", "ratio"),
    [(0.0, 0.0), (0.5, 0.1), (1.0, 0.2), (1.5, 0.6), (2.0, 1.0)],
)
def test_tempo_dynamics_scale_is_the_sdp_ratio(scale: float, ratio: float) -> None:
    assert sdp_ratio(scale) == pytest.approx(ratio)


def test_the_scales_outside_0_to_2_stay_in_the_options_ranges() -> None:
    assert style_weight(-1.0) == 0.0 and style_weight(3.0) == 10.0
    assert sdp_ratio(-1.0) == 0.0 and sdp_ratio(3.0) == 1.0


def test_tempo_dynamics_scale_is_parsed_and_echoed_only_when_sent() -> None:
    sent = parse_audio_query({"accent_phrases": [], "tempoDynamicsScale": 1.5})
    assert sent.tempoDynamicsScale == 1.5 and sent.to_json()["tempoDynamicsScale"] == 1.5
    plain = parse_audio_query({"accent_phrases": []})
    assert "tempoDynamicsScale" not in plain.to_json()  # VOICEVOX's shape, unchanged
    with pytest.raises(ValueError, match="tempoDynamicsScale"):
        parse_audio_query({"accent_phrases": [], "tempoDynamicsScale": 2.5})


def test_compat_is_checked() -> None:
    assert ServerConfig().compat == "voicevox"
    with pytest.raises(ValueError, match="compat"):
        ServerConfig(compat="aivis")  # type: ignore[arg-type]


def _serve_args(*flags: str) -> Any:
    return build_parser().parse_args(["serve", "--voice", "x", *flags])


def test_the_port_follows_compat_unless_given() -> None:
    assert listen_port(_serve_args()) == 8000
    assert listen_port(_serve_args("--compat", "aivisspeech")) == 10101
    assert listen_port(_serve_args("--compat", "aivisspeech", "--port", "9000")) == 9000
    assert listen_port(_serve_args("--compat", "aivisspeech", "--port", "0")) == 0


def test_an_unknown_compat_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _serve_args("--compat", "coeiroink")
    assert exited.value.code != 0
    assert "--compat: invalid choice: 'coeiroink'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    tts = TTS(threads=2, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"),
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    yield tts
    tts.close()


@pytest.fixture(scope="module")
def aivis(tts: TTS) -> Iterator[RunningServer]:
    with serve(tts, ServerConfig(warmup=False, compat="aivisspeech")) as running:
        yield running


@pytest.fixture(scope="module")
def vox(tts: TTS) -> Iterator[RunningServer]:
    with serve(tts, ServerConfig(warmup=False)) as running:
        yield running


def _options_of(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch, **fields: Any
) -> SynthesisOptions:
    """The options the engine gets for a query with ``fields`` changed."""
    seen: list[SynthesisOptions] = []
    service = server.state.service
    real_open = service.open

    def open_(request: Any) -> Any:
        seen.append(request.options)
        return real_open(request)

    monkeypatch.setattr(service, "open", open_)
    speaker = first_style(server)
    query = {**audio_query(server, speaker, "こんにちは。今日は晴れです。"), **fields}
    with server.client() as http:
        made = http.post("/synthesis", params={"speaker": speaker}, json=query)
    assert made.status_code == 200, made.text
    monkeypatch.undo()
    return seen[-1]


@pytest.mark.server
def test_aivisspeech_reads_intonation_as_style_strength(
    aivis: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options_of(aivis, monkeypatch, intonationScale=1.5, tempoDynamicsScale=0.5,
                          pauseLength=2.0, pauseLengthScale=3.0)  # fmt: skip
    assert options.style_weight == pytest.approx(5.5)
    assert options.sdp_ratio == pytest.approx(0.1)
    assert options.intonation_scale == 1.0  # no WORLD re-synthesis
    assert (options.pause_seconds, options.pause_scale) == (None, 1.0)  # ignored


@pytest.mark.server
def test_voicevox_mode_keeps_voicevox_meanings(
    vox: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options_of(vox, monkeypatch, intonationScale=1.5, tempoDynamicsScale=0.5,
                          pauseLength=2.0)  # fmt: skip
    assert options.style_weight == 1.0 and options.sdp_ratio == pytest.approx(0.2)
    assert options.intonation_scale == 1.5 and options.pause_seconds == 2.0


@pytest.mark.server
def test_aivisspeech_queries_carry_tempo_dynamics(aivis: RunningServer, vox: RunningServer) -> None:
    assert audio_query(aivis, first_style(aivis), "はい。")["tempoDynamicsScale"] == 1.0
    assert "tempoDynamicsScale" not in audio_query(vox, first_style(vox), "はい。")


@pytest.mark.server
def test_aivisspeech_punctuation_is_pau_moras_and_reads_back_either_way(
    aivis: RunningServer, vox: RunningServer
) -> None:
    text = "こんにちは、元気です。今日は晴れ！"
    shaped = audio_query(aivis, first_style(aivis), text)
    plain = audio_query(vox, first_style(vox), text)
    assert shaped["kana"] == plain["kana"] == text  # the text it reads, in both modes
    assert all(p["pause_mora"] is None for p in shaped["accent_phrases"])
    marks = [(m["text"], m["consonant"], m["pitch"]) for p in shaped["accent_phrases"]
             for m in p["moras"] if m["vowel"] == "pau"]  # fmt: skip
    assert marks == [("、", None, 0.0), ("。", None, 0.0)]
    paused = [p["pause_mora"]["text"] for p in plain["accent_phrases"] if p["pause_mora"]]
    assert paused == ["、", "。"]  # the same pauses, VOICEVOX's shape
    # Either shape, sent to either mode, reads the same and makes the same audio.
    spoken = [len([m for m in p["moras"] if m["vowel"] != "pau"])
              for p in shaped["accent_phrases"]]  # fmt: skip
    assert spoken == [len(p["moras"]) for p in plain["accent_phrases"]]
    wavs = []
    for server, query in ((aivis, shaped), (aivis, plain), (vox, shaped), (vox, plain)):
        # edited phrases: the phonemes are read, not the kana
        query = {**query, "kana": "", "tempoDynamicsScale": 1.0, "intonationScale": 1.0}
        with server.client() as http:
            made = http.post("/synthesis", params={"speaker": first_style(server)}, json=query)
        assert made.status_code == 200, made.text
        wavs.append(made.content)
    assert wavs[0] == wavs[1] and wavs[2] == wavs[3]


@pytest.mark.server
def test_the_manifest_is_aivisspeechs(aivis: RunningServer, vox: RunningServer) -> None:
    with aivis.client() as http:
        manifest = http.get("/engine_manifest").json()
    assert manifest["default_sampling_rate"] == 44100
    assert manifest["frame_rate"] == 172.265625
    assert manifest["supported_features"]["adjust_pause_length"] is False
    with vox.client() as http:
        plain = http.get("/engine_manifest").json()
    assert plain["frame_rate"] == plain["default_sampling_rate"] / 512
    assert plain["supported_features"]["adjust_pause_length"] is True


def test_the_audio_estimate_leaves_aivisspeech_pause_fields_out() -> None:
    from yomiage.voicevox.cost import estimated_seconds
    from yomiage.voicevox.model import AccentPhrase, AudioQuery, Mora

    pause = Mora("。", None, None, "pau", 0.1, 0.0)
    phrase = AccentPhrase((Mora("ハ", "h", 0.05, "a", 0.1, 5.6),), 1, pause, False)
    query = AudioQuery((phrase, phrase), pauseLength=100.0, pauseLengthScale=2.0,
                       prePhonemeLength=0.0, postPhonemeLength=0.0)  # fmt: skip
    assert estimated_seconds(query) > 200.0
    assert estimated_seconds(query, pause_fields=False) < 1.0


@pytest.mark.server
def test_aivisspeech_presets_keep_tempo_dynamics(aivis: RunningServer) -> None:
    style = first_style(aivis)
    with aivis.client() as http:
        speaker = http.get("/speakers").json()[0]["speaker_uuid"]
        preset = {"id": 7, "name": "lively", "speaker_uuid": speaker, "style_id": style,
                  "speedScale": 1.1, "pitchScale": 0.0, "intonationScale": 1.4,
                  "volumeScale": 1.0, "prePhonemeLength": 0.1, "postPhonemeLength": 0.1,
                  "tempoDynamicsScale": 1.6}  # fmt: skip
        assert http.post("/add_preset", json=preset).json() == 7
        listed = next(p for p in http.get("/presets").json() if p["id"] == 7)
        assert listed["tempoDynamicsScale"] == 1.6
        query = http.post("/audio_query_from_preset", params={"text": "はい。", "preset_id": 7})
        assert query.json()["tempoDynamicsScale"] == 1.6 and query.json()["speedScale"] == 1.1
        bad = http.post("/add_preset", json={**preset, "id": 8, "tempoDynamicsScale": 3})
        assert bad.status_code == 422 and "tempoDynamicsScale" in bad.text
        http.post("/delete_preset", params={"id": 7})


@pytest.mark.server
@pytest.mark.parametrize("mark", ["…", "、", "！", "x", ""])
def test_edited_queries_with_any_pause_mark_synthesize(
    aivis: RunningServer, vox: RunningServer, mark: str
) -> None:
    """A mark BERT reads as several tokens ("…" is "...") once failed the edited reading
    with a 500; any mark, as a pause mora or as AivisSpeech's pau mora, is read."""
    pau = {"text": mark, "consonant": None, "consonant_length": None, "vowel": "pau",
           "vowel_length": 0.2, "pitch": 0.0}  # fmt: skip
    for server in (aivis, vox):
        query = audio_query(server, first_style(server), "元気です。今日は。")
        query["kana"] = ""  # edited: the moras are read
        first, last = query["accent_phrases"][0], query["accent_phrases"][-1]
        last["moras"].append(pau)  # AivisSpeech's shape
        first["pause_mora"] = pau | {"text": mark or "、"}  # VOICEVOX's
        with server.client() as http:
            made = http.post("/synthesis", params={"speaker": first_style(server)}, json=query)
        assert made.status_code == 200, made.text
