"""End to end with the PyTorch backend: text → frontend → BERT → synthesizer."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES, reference_cases, reference_options
from yomiage.options import SynthesisOptions
from yomiage.runtime.voice import decode, encode
from yomiage.text import Frontend

pytest.importorskip("torch")
pytest.importorskip("transformers")

from yomiage.runtime.torch_backend import PyTorchVoice, TorchBackend

TINY = FIXTURES / "sbv2_tiny"


@pytest.fixture(scope="module")
def backend() -> TorchBackend:
    if not TINY.is_dir():
        pytest.skip("shared fixtures not available")
    return TorchBackend(TINY / "bert" / "model", tokenizer_dir=TINY / "bert" / "tokenizer")


@pytest.fixture(scope="module")
def voice(backend: TorchBackend) -> PyTorchVoice:
    return backend.load_voice(TINY / "model")


def _cases() -> list[dict[str, Any]]:
    path = TINY / "cases" / "cases.json"
    return json.loads(path.read_text("utf-8"))["cases"] if path.exists() else []


@pytest.mark.parametrize("case", reference_cases("sbv2_tiny/cases/cases.json"))
def test_text_to_audio_matches_reference(
    backend: TorchBackend, frontend: Frontend, case: dict[str, Any], voice: PyTorchVoice
) -> None:
    arrays = np.load(TINY / "cases" / f"{case['id']}.npz")
    setting = case["settings"]["A"]
    options = reference_options(case, setting)
    rng = backend.new_rng(0)
    [encoded] = encode(backend, voice, [frontend.g2p(case["text"])], options, rng)
    assert encoded.durations.tolist() == setting["durations"]
    audio = voice.decode(encoded, options, rng)  # the whole sentence at once, as SBV2
    assert audio.shape == arrays["audio_A"].shape
    assert float(np.abs(audio - arrays["audio_A"]).max()) <= 1e-4


def test_batched_bert_matches_one_by_one(
    backend: TorchBackend, frontend: Frontend, voice: PyTorchVoice
) -> None:
    sentences = [frontend.g2p(t) for t in ("ねえ、聞いて！", "昨日、先生に会ったの。", "うん。")]
    options = SynthesisOptions(noise=0.0, noise_w=0.0)
    together = encode(backend, voice, sentences, options, backend.new_rng(0))
    for sentence, batched in zip(sentences, together, strict=True):
        [alone] = encode(backend, voice, [sentence], options, backend.new_rng(0))
        assert alone.durations.tolist() == batched.durations.tolist()


def test_seed_reproduces_noise(
    backend: TorchBackend, frontend: Frontend, voice: PyTorchVoice
) -> None:
    sentence = [frontend.g2p("今日はいい天気ですね。")]
    options = SynthesisOptions(seed=7)

    def run(seed: int) -> Any:
        rng = backend.new_rng(seed)
        [enc] = encode(backend, voice, sentence, options, rng)
        return decode(voice, enc, options, rng)

    a, b, c = run(7), run(7), run(8)
    assert np.array_equal(a, b)
    assert a.shape != c.shape or not np.array_equal(a, c)


def test_unknown_style_and_speaker(
    backend: TorchBackend, voice: PyTorchVoice, frontend: Frontend
) -> None:
    sentence = [frontend.g2p("はい。")]
    with pytest.raises(ValueError, match="Neutral, Happy, Sad"):
        encode(backend, voice, sentence, SynthesisOptions(style="Angry"), backend.new_rng(0))
    with pytest.raises(ValueError, match="spk_a=0, spk_b=1"):
        encode(backend, voice, sentence, SynthesisOptions(speaker_id=5), backend.new_rng(0))


def test_bad_options() -> None:
    for bad in ({"sdp_ratio": 1.5}, {"speed": 0}, {"noise": -1}, {"speed": float("nan")}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SynthesisOptions(**bad)  # type: ignore[arg-type]


def test_a_reading_edited_to_no_frames_decodes_one_frame_window_by_window(
    backend: TorchBackend, voice: PyTorchVoice, frontend: Frontend
) -> None:
    """SBV2 makes at least one frame of a reading whose tokens are all given none (an
    edited timing); the windowed decoding ran out of flow spans on it instead."""
    options = SynthesisOptions(noise=0.0, noise_w=0.0)
    [encoded] = encode(backend, voice, [frontend.g2p("うん。")], options, backend.new_rng(0))
    silent = voice.with_durations(encoded, np.zeros_like(encoded.durations))
    windowed = np.concatenate(list(voice.decode_windows(silent, options, backend.new_rng(0))))
    whole = voice.decode(silent, options, backend.new_rng(0))
    assert len(windowed) == len(whole) == voice.info.hop_length
    assert float(np.abs(windowed - whole).max()) <= 1e-4
