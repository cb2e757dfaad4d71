"""HayaKoe's published ONNX layout runs on the CPU backend without torch."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES
from yomiage import TTS
from yomiage.errors import ModelLoadError

TINY = FIXTURES / "sbv2_tiny"


def _layout(root: Path, tiny_bundle: Path, *, duration_predictor: bool) -> Path:
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
    shutil.copy(tiny_bundle / "bert" / "bert.onnx", bert / "bert_q8.onnx")
    shutil.copy(tiny_bundle / "bert" / "bert.onnx.data", bert / "bert.onnx.data")
    shutil.copytree(TINY / "bert" / "tokenizer", root / "bert" / "tokenizer")
    return speaker


def _api() -> dict[str, Any]:
    return json.loads((TINY / "cases" / "api.json").read_text("utf-8"))


def test_hayakoe_voice_matches_reference(tiny_bundle: Path, tmp_path: Path) -> None:
    speaker_dir = _layout(tmp_path, tiny_bundle, duration_predictor=True)
    api = _api()
    reference = np.load(TINY / "cases" / "api.npz")["pcm_generate"]
    with TTS().load("tiny", source=speaker_dir).prepare() as tts:
        speaker = tts.speakers["tiny"]
        assert speaker.styles == ("Neutral", "Happy", "Sad")
        audio = speaker.generate(api["text"], **api["params"])
        assert len(audio.samples) == api["generate_samples"]
        diff = audio.to_int16().astype(np.int32) - reference.astype(np.int32)
        assert int(np.abs(diff).max()) <= 2
        starts = [round(s.start, 9) for s in audio.timings.phonemes]
        assert starts == [round(t[1], 9) for t in api["timings"]]


def test_without_duration_predictor_pauses_use_the_floor(tiny_bundle: Path, tmp_path: Path) -> None:
    speaker_dir = _layout(tmp_path, tiny_bundle, duration_predictor=False)
    api = _api()
    with TTS().load("tiny", source=speaker_dir).prepare() as tts:
        audio = tts.speakers["tiny"].generate(api["text"], **api["params"])
    assert len(audio.samples) == api["onnx_without_duration_predictor_samples"]


def test_torch_backend_refuses_onnx_layouts(tiny_bundle: Path, tmp_path: Path) -> None:
    speaker_dir = _layout(tmp_path, tiny_bundle, duration_predictor=True)
    with pytest.raises(ModelLoadError, match="SBV2 folder"):
        TTS(backend="torch", bert_source=TINY / "bert" / "model").load(
            "tiny", source=speaker_dir
        ).prepare()
