"""The opt-in int8 decoder: written by convert, chosen by decoder_precision, error recorded."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FIXTURES
from yomiage import TTS
from yomiage.errors import ModelLoadError
from yomiage.runtime.bundle import read_manifest

TINY = FIXTURES / "sbv2_tiny"


@pytest.fixture(scope="module")
def int8_bundle(reference_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from yomiage.export.convert import convert_voice

    out = tmp_path_factory.mktemp("int8") / "tiny"
    convert_voice(TINY / "model", out, decoder_int8=True)
    shutil.copytree(reference_bundle / "bert", out / "bert")
    return out


def test_convert_records_the_error(int8_bundle: Path) -> None:
    manifest = read_manifest(int8_bundle)
    assert "decoder_int8.onnx" in manifest.files
    assert manifest.decoder_int8 is not None
    assert manifest.decoder_int8["snr_db"] >= 20.0
    assert 0 < manifest.decoder_int8["max_abs"] < 1


def test_int8_decoder_follows_float32(int8_bundle: Path) -> None:
    text = "今日はいい天気ですね。散歩に行きましょう！"
    options = {"noise": 0.0, "noise_w": 0.0, "seed": 0}
    with TTS(bert_precision="fp32").load("v", source=int8_bundle).prepare() as tts:
        reference = tts.speakers["v"].generate(text, **options)
    with (
        TTS(bert_precision="fp32", decoder_precision="int8")
        .load("v", source=int8_bundle)
        .prepare() as tts
    ):
        audio = tts.speakers["v"].generate(text, **options)
    # Durations, and so lengths and timings, do not depend on the decoder.
    assert len(audio.samples) == len(reference.samples)
    assert audio.timings == reference.timings
    err = (audio.samples - reference.samples).astype(np.float64)
    snr = 10 * math.log10(
        float((reference.samples.astype(np.float64) ** 2).sum()) / float((err**2).sum())
    )
    assert (
        snr > 15.0
    )  # windows and pauses included; convert's own probe says ~26 dB on its held-out sentence


def test_int8_needs_a_bundle_that_has_it(reference_bundle: Path) -> None:
    with pytest.raises(ModelLoadError, match="--decoder int8"):
        TTS(decoder_precision="int8").load("v", source=reference_bundle).prepare()
    with pytest.raises(ValueError, match="decoder_precision"):
        TTS(decoder_precision="int4")
    with pytest.raises(ValueError, match="CPU backend"):
        TTS(device="cuda", decoder_precision="int8")
