"""AivisSpeech's AIVMX voices: reading, cutting into a bundle without torch, loading.

``tests/data/aivmx/tiny.aivmx`` is the tiny test voice (``tests/data/voices/tiny``, the
same weights) exported the reference way, so a voice loaded from it must sound
exactly like the bundle converted from the SBV2 folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.conftest import TEST_VOICES, require_fixtures
from yomiage import TTS
from yomiage.aivmx import read_aivmx
from yomiage.aivmx.bundle import write_bundle
from yomiage.aivmx.reader import AivmxError
from yomiage.cli.main import main
from yomiage.errors import ModelLoadError, OptionError
from yomiage.runtime.engines.onnx_session import taken

AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
TEXT = "今日はいい天気ですね。散歩に行きましょう！"


def _edited(tmp_path: Path, edit: Any, name: str = "edited.aivmx") -> Path:
    """A copy of the test AIVMX with ``edit(model, metadata)`` applied."""
    model = onnx.load(str(AIVMX))
    meta = {p.key: p.value for p in model.metadata_props}
    edit(model, meta)
    del model.metadata_props[:]
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def _manifest_edit(change: Any) -> Any:
    def edit(model: Any, meta: dict[str, str]) -> None:
        manifest = json.loads(meta["aivm_manifest"])
        change(manifest)
        meta["aivm_manifest"] = json.dumps(manifest, ensure_ascii=False)

    return edit


# -- reading ------------------------------------------------------------------------------


def test_the_manifest_gives_speakers_styles_and_identity() -> None:
    voice = read_aivmx(AIVMX)
    assert voice.name == "sbv2_tiny"
    assert voice.uuid == "13eb270c-b01d-1efb-f7a0-a7cad39034d3"
    assert voice.spk2id == {"spk_a": 0, "spk_b": 1}
    assert voice.style2id == {"ノーマル": 0, "Happy": 1, "Sad": 2}
    assert voice.style_vectors.shape == (3, 256)
    assert voice.config.version.endswith("JP-Extra")
    assert voice.license is None  # this test file has none; published voices carry the text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_manifest_edit(lambda m: m.update(model_architecture="Style-Bert-VITS2")),
         "'Style-Bert-VITS2' voice"),
        (_manifest_edit(lambda m: [s.update(supported_languages=["en"]) for s in m["speakers"]]),
         "yomiage reads Japanese"),
        (_manifest_edit(lambda m: m["speakers"][0]["styles"][0].update(local_id=7)),
         "local_id 7"),
        (lambda model, meta: meta.pop("aivm_manifest"), "no aivm_manifest"),
        (lambda model, meta: meta.pop("aivm_style_vectors"), "lacks aivm_style_vectors"),
        (lambda model, meta: meta.update(aivm_style_vectors="bm90IG5weQ=="), "not a base64 .npy"),
        (lambda model, meta: meta.update(aivm_hyper_parameters=json.dumps(
            {**json.loads(meta["aivm_hyper_parameters"]), "version": "2.4.1"})), "not a JP-Extra"),
    ],
)  # fmt: skip
def test_unusable_files_say_what_is_wrong(tmp_path: Path, edit: Any, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message):
        read_aivmx(_edited(tmp_path, edit))


def test_a_truncated_file_is_named_as_damaged(tmp_path: Path) -> None:
    data = AIVMX.read_bytes()
    for cut in (len(data) // 2, len(data) - 100):
        path = tmp_path / "cut.aivmx"
        path.write_bytes(data[:cut])
        with pytest.raises(AivmxError, match=str(path)):
            read_aivmx(path)


def test_a_missing_file_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(AivmxError, match="cannot read"):
        read_aivmx(tmp_path / "none.aivmx")


# -- cutting --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_bundle(read_aivmx(AIVMX), tmp_path_factory.mktemp("aivmx") / "bundle")


def test_the_bundle_has_a_converted_voices_graphs_and_keeps_the_identity(bundle: Path) -> None:
    manifest = json.loads((bundle / "voice.json").read_text("utf-8"))
    assert manifest["parity"]["audio"] <= 1e-5
    assert manifest["aivm"]["uuid"] == "13eb270c-b01d-1efb-f7a0-a7cad39034d3"
    assert manifest["aivm"]["sha256"].startswith("03d62c64")
    converted = json.loads((TEST_VOICES / "tiny" / "voice.json").read_text("utf-8"))
    for key in ("sampling_rate", "hop_length", "bert_dim", "inter_channels", "n_speakers",
                "spk2id", "receptive_field_frames", "decoder_stages"):  # fmt: skip
        assert manifest[key] == converted[key], key
    for graph in ("encoder", "flow", "decoder"):
        ours = ort.InferenceSession(str(bundle / f"{graph}.onnx"))
        theirs = ort.InferenceSession(str(TEST_VOICES / "tiny" / f"{graph}.onnx"))
        assert [i.name for i in ours.get_inputs()] == [i.name for i in theirs.get_inputs()]
        assert [o.name for o in ours.get_outputs()] == [o.name for o in theirs.get_outputs()]
        overridable = [i.name for i in ours.get_overridable_initializers()]
        assert overridable == [i.name for i in theirs.get_overridable_initializers()]


def test_cut_graphs_reproduce_the_reference_audio(bundle: Path) -> None:
    """Setting A of every reference case (noise off): the audio SBV2 made, within 3e-6."""
    cases_dir = require_fixtures() / "sbv2_tiny" / "cases"
    cases = json.loads((cases_dir / "cases.json").read_text("utf-8"))["cases"]
    sessions = {g: ort.InferenceSession(str(bundle / f"{g}.onnx")) for g in ("encoder", "flow",
                                                                             "decoder")}  # fmt: skip
    for case in cases:
        data = np.load(cases_dir / f"{case['id']}.npz")
        a = case["settings"]["A"]
        t = len(data["phone_ids"])
        m_p, _, g, durations = sessions["encoder"].run(None, {
            "phone_ids": data["phone_ids"][None].astype(np.int64),
            "tone_ids": data["tone_ids"][None].astype(np.int64),
            "language_ids": data["lang_ids"][None].astype(np.int64),
            "bert": data["bert_phone"][None].astype(np.float32),
            "style": data["style_vec"][None].astype(np.float32),
            "sid": np.array([case["sid"]], np.int64),
            "sdp_noise": np.zeros((1, 2, t), np.float32),
            "sdp_ratio": np.array([a["sdp_ratio"]], np.float32),
            "length_scale": np.array([a["length_scale"]], np.float32),
        })  # fmt: skip
        frames = durations[0, 0].astype(np.int64)
        np.testing.assert_array_equal(frames, data["durations_A"])
        speaker = {"g": g, "sid": np.array([case["sid"]], np.int64)}
        z_p = np.repeat(m_p, frames, axis=2)
        z = sessions["flow"].run(None, {"z_p": z_p, **taken(sessions["flow"], speaker)})[0]
        audio = sessions["decoder"].run(None, {"z": z, **taken(sessions["decoder"], speaker)})
        audio = audio[0][0, 0]
        reference = data["audio_A"].astype(np.float32)
        tolerance = 2.5e-4 if data["audio_A"].dtype == np.float16 else 3e-6
        assert audio.shape == reference.shape
        assert float(np.abs(audio - reference).max()) <= tolerance, case["id"]


def test_cutting_needs_no_torch(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from pathlib import Path\n"
        "from yomiage.aivmx import read_aivmx\n"
        "from yomiage.aivmx.bundle import write_bundle\n"
        f"write_bundle(read_aivmx({str(AIVMX)!r}), Path({str(tmp_path / 'b')!r}))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert (tmp_path / "b" / "voice.json").is_file()


# -- through the public API -------------------------------------------------------------------


@pytest.fixture(scope="module")
def voices(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The AIVMX voice (with the test voice's 64-wide BERT: this file holds none)."""
    cache = tmp_path_factory.mktemp("cache")
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=cache,
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    tts.load("aivmx", source=AIVMX).load("bundle", source=TEST_VOICES / "tiny").prepare()
    yield tts
    tts.close()


def test_an_aivmx_voice_streams_with_timings_like_a_bundle(voices: TTS) -> None:
    """The reference outputs through the public API: tests/test_api.py (reference_tts)."""
    aivmx = voices.speakers["aivmx"]
    assert aivmx.styles == ("ノーマル", "Happy", "Sad")
    assert dict(aivmx.speaker_ids) == {"spk_a": 0, "spk_b": 1}
    chunks = list(aivmx.stream(TEXT, seed=3, style="Happy", speaker_id=1))
    assert len(chunks) > 2  # window by window
    whole = aivmx.generate(TEXT, seed=3, style="Happy", speaker_id=1)
    streamed = np.concatenate([c.samples for c in chunks])
    assert float(np.abs(streamed - whole.samples).max()) <= 1e-5
    assert whole.timings.phonemes[-1].end * 44100 == pytest.approx(len(whole.samples), abs=512)
    assert aivmx.runtime.startswith("decoder fp32 on onnxruntime")


def test_sources_file_uri_and_a_folder_of_voices(tmp_path: Path) -> None:
    folder = tmp_path / "voices"
    folder.mkdir()
    (folder / "tiny.aivmx").write_bytes(AIVMX.read_bytes())
    (folder / "other.aivmx").write_bytes(AIVMX.read_bytes())
    cache = tmp_path / "cache"
    kwargs: dict[str, Any] = {"threads": 1, "cache_dir": cache,
                              "bert_source": TEST_VOICES / "tiny" / "bert"}  # fmt: skip
    with (
        TTS(**kwargs)
        .load("tiny", source=folder)
        .load("by-uri", source=(folder / "other.aivmx").as_uri())
        .prepare() as tts
    ):
        assert set(tts.speakers) == {"tiny", "by-uri"}
    converted = [p for p in (cache / "converted").iterdir() if p.name.startswith("aivmx-")]
    assert len(converted) == 1  # one file content, cut once, shared by both
    with pytest.raises(ModelLoadError, match="several AIVMX voices"):
        TTS(**kwargs).load("third", source=folder).prepare()


def test_convert_cli_cuts_an_aivmx_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["convert", str(AIVMX), str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "sbv2_tiny" in printed and "licence: none given" in printed
    assert (out / "voice.json").is_file() and not (out / "bert").exists()
    assert main(["convert", str(tmp_path / "missing.aivmx"), str(out), "-q"]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_neutral_and_normal_name_the_same_style(voices: TTS) -> None:
    """SBV2 says "Neutral", AivisSpeech "ノーマル": either reaches a voice's neutral style."""
    aivmx, bundle = voices.speakers["aivmx"], voices.speakers["bundle"]
    assert aivmx.options(style="Neutral").style == "ノーマル"
    assert bundle.options(style="ノーマル").style == "Neutral"
    same = aivmx.generate("はい。", style="Neutral", seed=0)
    np.testing.assert_array_equal(same.samples, aivmx.generate("はい。", seed=0).samples)
    with pytest.raises(OptionError, match="unknown style 'Angry'"):
        aivmx.options(style="Angry")


LICENCE = "ACML 1.0\nこの音声モデルの利用規約。\nCredit the voice as 'sbv2_tiny' when publishing."


@pytest.mark.server
def test_the_licence_is_visible_wherever_the_voice_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("fastapi")
    from tests.serving import serve
    from yomiage.server import ServerConfig

    licensed = _edited(tmp_path, _manifest_edit(lambda m: m.update(license=LICENCE)))
    assert main(["voices", str(licensed)]) == 0
    printed = capsys.readouterr().out
    assert "Credit the voice as 'sbv2_tiny'" in printed and "spk_b (id 1)" in printed
    tts = TTS(threads=1, cache_dir=tmp_path / "cache", bert_source=TEST_VOICES / "tiny" / "bert")
    with tts.load("licensed", source=licensed).prepare():
        credits = tts.speakers["licensed"].credits
        assert credits is not None and credits.license == LICENCE
        assert credits.uuid == "13eb270c-b01d-1efb-f7a0-a7cad39034d3"
        with serve(tts, ServerConfig(warmup=False)) as running, running.client() as http:
            [voice] = http.get("/v1/audio/voices").json()["voices"]
        assert voice["license"] == LICENCE
        assert voice["credits"]["name"] == "sbv2_tiny" and voice["credits"]["format"] == "AIVMX"
        assert voice["styles"] == ["ノーマル", "Happy", "Sad"]


def test_a_hub_source_naming_one_aivmx_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hf://owner/repo/dir/voice.aivmx: that file is fetched (not its folder), cut once,
    and works offline afterwards."""
    from tests.sources_servers import fake_hub

    with fake_hub() as (endpoint, state):
        state.add_repo("someone/aivm-voices", {
            "voices/tiny.aivmx": AIVMX.read_bytes(), "voices/big.aivmx": b"x" * 1000,
            "README.md": b"voices",
        })  # fmt: skip
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        for var in ("HF_HUB_OFFLINE", "YOMIAGE_OFFLINE", "HF_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        kwargs: dict[str, Any] = {"threads": 1, "cache_dir": tmp_path / "cache",
                                  "bert_source": TEST_VOICES / "tiny" / "bert"}  # fmt: skip
        source = "hf://someone/aivm-voices/voices/tiny.aivmx"
        with TTS(**kwargs).load("tiny", source=source).prepare() as tts:
            online = tts.speakers["tiny"].generate("はい。", seed=0)
    fetched = tmp_path / "cache" / "hub" / "someone--aivm-voices" / "main" / "voices"
    assert sorted(p.name for p in fetched.iterdir()) == ["tiny.aivmx"]
    with TTS(**kwargs, offline=True).load("tiny", source=source).prepare() as tts:
        offline = tts.speakers["tiny"].generate("はい。", seed=0)
    np.testing.assert_array_equal(online.samples, offline.samples)


def test_a_changed_file_is_cut_again(tmp_path: Path) -> None:
    """The cut bundle is keyed by the file's content, not its name."""
    path = tmp_path / "voice.aivmx"
    path.write_bytes(AIVMX.read_bytes())
    kwargs: dict[str, Any] = {"threads": 1, "cache_dir": tmp_path / "cache",
                              "bert_source": TEST_VOICES / "tiny" / "bert"}  # fmt: skip

    def credits() -> Any:
        with TTS(**kwargs).load("v", source=path).prepare() as tts:
            return tts.speakers["v"].credits

    assert credits().license is None
    assert credits().license is None  # the second load finds the cut bundle
    edited = _edited(tmp_path, _manifest_edit(lambda m: m.update(license=LICENCE)))
    path.write_bytes(edited.read_bytes())
    assert credits().license == LICENCE
    cut = [p for p in (tmp_path / "cache" / "converted").iterdir() if p.name.startswith("aivmx-")]
    assert len(cut) == 2


def test_generate_cli_reads_an_aivmx_file(tmp_path: Path) -> None:
    out = tmp_path / "hello.wav"
    args = ["generate", "はい、そうです。", "--model", str(AIVMX), "--cache-dir",
            str(tmp_path / "cache"), "--bert", str(TEST_VOICES / "tiny" / "bert"), "-o", str(out)]  # fmt: skip
    assert main([*args, "-q"]) == 0
    assert out.stat().st_size > 1000


def test_an_aivmx_path_is_named_after_its_manifest_without_reading_the_graph(
    tmp_path: Path,
) -> None:
    """Issue 22 (15): ``--model voice.aivmx`` took the file's name, not the voice's; the
    manifest is read by seeking over the graph, so naming costs no 250 MB parse."""
    from yomiage.aivmx.metadata import MetadataError, read_metadata
    from yomiage.engine_spec import parse_voices

    source = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
    expected = {p.key: p.value for p in onnx.load(source).metadata_props}
    assert read_metadata(source) == expected
    renamed = tmp_path / "downloaded (1).aivmx"
    renamed.write_bytes(source.read_bytes())
    [(name, path)] = parse_voices([], [str(renamed)])
    assert name == json.loads(expected["aivm_manifest"])["name"] and path == str(renamed)
    cut = tmp_path / "cut.aivmx"
    cut.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    with pytest.raises(MetadataError, match="cut short"):
        read_metadata(cut)
    assert parse_voices([], [str(cut)])[0][0] == "cut"  # unreadable: named after the file
