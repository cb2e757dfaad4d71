"""HayaKoe's published ONNX layout runs on the CPU backend without torch."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES, hayakoe_layout
from yomiage import TTS
from yomiage.errors import ModelLoadError

TINY = FIXTURES / "sbv2_tiny"


def _layout(root: Path, reference_bundle: Path, *, duration_predictor: bool) -> Path:
    """``onnx/speakers/tiny``, ``onnx/bert/q8`` and ``bert/tokenizer`` as HayaKoe has them."""
    speaker = root / "onnx" / "speakers" / "tiny"
    speaker.mkdir(parents=True)
    for name in ("config.json", "style_vectors.npy"):
        shutil.copy(TINY / "model" / name, speaker / name)
    graphs = ["synthesizer"] + (["duration_predictor"] if duration_predictor else [])
    for graph in graphs:
        with gzip.open(TINY / "onnx" / f"{graph}.onnx.gz") as src:
            (speaker / f"{graph}.onnx").write_bytes(src.read())
    bert = root / "onnx" / "bert" / "q8"
    bert.mkdir(parents=True)
    # Our float32 tiny BERT has HayaKoe's interface; its weights file keeps its name.
    shutil.copy(reference_bundle / "bert" / "bert.onnx", bert / "bert_q8.onnx")
    shutil.copy(reference_bundle / "bert" / "bert.onnx.data", bert / "bert.onnx.data")
    shutil.copytree(TINY / "bert" / "tokenizer", root / "bert" / "tokenizer")
    return speaker


def _api() -> dict[str, Any]:
    return json.loads((TINY / "cases" / "api.json").read_text("utf-8"))


def test_hayakoe_voice_matches_reference(reference_bundle: Path, tmp_path: Path) -> None:
    speaker_dir = _layout(tmp_path, reference_bundle, duration_predictor=True)
    api = _api()
    reference = np.load(TINY / "cases" / "api.npz")["pcm_generate"]
    with TTS(reading="sbv2").load("tiny", source=speaker_dir).prepare() as tts:
        speaker = tts.speakers["tiny"]
        assert speaker.styles == ("Neutral", "Happy", "Sad")
        audio = speaker.generate(api["text"], **api["params"])
        assert len(audio.samples) == api["generate_samples"]
        diff = audio.to_int16().astype(np.int32) - reference.astype(np.int32)
        assert int(np.abs(diff).max()) <= 2
        starts = [round(s.start, 9) for s in audio.timings.phonemes]
        assert starts == [round(t[1], 9) for t in api["timings"]]


def test_without_duration_predictor_pauses_use_the_floor(
    reference_bundle: Path, tmp_path: Path
) -> None:
    speaker_dir = _layout(tmp_path, reference_bundle, duration_predictor=False)
    api = _api()
    with TTS().load("tiny", source=speaker_dir).prepare() as tts:
        audio = tts.speakers["tiny"].generate(api["text"], **api["params"])
    assert len(audio.samples) == api["onnx_without_duration_predictor_samples"]


def test_torch_backend_refuses_onnx_layouts(reference_bundle: Path, tmp_path: Path) -> None:
    speaker_dir = _layout(tmp_path, reference_bundle, duration_predictor=True)
    with pytest.raises(ModelLoadError, match="SBV2 folder"):
        TTS(backend="torch", bert_source=TINY / "bert" / "model").load(
            "tiny", source=speaker_dir
        ).prepare()


# -- the test voice in HayaKoe's layout (no torch, no ../shared) ---------------------


def _test_layout(root: Path, test_voice: Path, *, duration_predictor: bool) -> Path:
    speaker = hayakoe_layout(root, test_voice, test_voice.parent / "hayakoe")
    if not duration_predictor:
        (speaker / "duration_predictor.onnx").unlink()
    return speaker


def test_hayakoe_layout_runs_with_its_own_bert(test_voice: Path, tmp_path: Path) -> None:
    speaker_dir = _test_layout(tmp_path, test_voice, duration_predictor=True)
    text = "こんにちは。今日はいい天気ですね。"
    with TTS().load("tiny", source=speaker_dir).prepare() as tts:  # BERT found beside it
        speaker = tts.speakers["tiny"]
        assert speaker.styles == ("Neutral", "Happy", "Sad")
        assert dict(speaker.speaker_ids) == {"spk_a": 0, "spk_b": 1}
        chunks = list(speaker.stream(text, noise=0, noise_w=0))
        audio = speaker.generate(text, noise=0, noise_w=0)
    # A whole-utterance voice streams one chunk per sentence, deterministic without noise.
    assert [c.sentence for c in chunks] == [0, 1]
    assert [c.text for c in chunks] == ["こんにちは。", "今日はいい天気ですね。"]
    np.testing.assert_array_equal(np.concatenate([c.samples for c in chunks]), audio.samples)
    assert audio.timings.phonemes[-1].end <= audio.duration
    assert audio.options is not None and audio.options.noise == 0


def test_hayakoe_timings_match_the_durations(test_voice: Path, tmp_path: Path) -> None:
    """The synthesizer's durations output gives the timings; audio is frames x hop."""
    speaker_dir = _test_layout(tmp_path, test_voice, duration_predictor=True)
    with TTS().load("tiny", source=speaker_dir).prepare() as tts:
        audio = tts.speakers["tiny"].generate("東京タワー。", noise=0, noise_w=0)
    hop = 512
    assert len(audio.samples) % hop == 0
    assert audio.timings.phonemes[-1].end == pytest.approx(audio.duration)


def test_hayakoe_without_duration_predictor_keeps_the_pause_floor(
    test_voice: Path, tmp_path: Path
) -> None:
    from yomiage.synthesis.pauses import MIN_PAUSE_SECONDS

    text = "こんにちは。今日はいい天気ですね。"
    with_dp = _test_layout(tmp_path / "a", test_voice, duration_predictor=True)
    without = _test_layout(tmp_path / "b", test_voice, duration_predictor=False)
    gaps = []
    for folder in (with_dp, without):
        with TTS().load("tiny", source=folder).prepare() as tts:
            chunks = list(tts.speakers["tiny"].stream(text, noise=0, noise_w=0))
        first_len = len(chunks[0].samples)
        gaps.append(chunks[1].timings.phonemes[0].start - first_len / 44100)
    assert gaps[1] == pytest.approx(MIN_PAUSE_SECONDS, abs=0.011)  # the floor (less trailing)
    assert gaps[0] >= 0


def test_broken_hayakoe_graphs_are_load_errors(test_voice: Path, tmp_path: Path) -> None:
    speaker_dir = _test_layout(tmp_path, test_voice, duration_predictor=True)
    (speaker_dir / "synthesizer.onnx").write_bytes(b"not a graph")
    with pytest.raises(ModelLoadError, match=r"synthesizer\.onnx"):
        TTS().load("tiny", source=speaker_dir).prepare()
