"""An editor's phoneme lengths replace the predicted ones (synthesis.lengths, issue 25)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import FIXTURES, require_fixtures
from yomiage import TTS, Audio, SynthesisOptions
from yomiage.errors import OptionError
from yomiage.synthesis.lengths import edited_durations
from yomiage.text.frontend import Frontend

HOP_SECONDS = 512 / 44100


def test_unchanged_lengths_keep_the_predicted_frames() -> None:
    # pads and blanks: _ b a b k b a b _  ->  tokens: b _ b a b k b a b _ b (2n+1)
    predicted = np.array([1, 2, 1, 3, 2, 1, 4, 3, 2, 1, 1], np.int64)
    n_phones = (len(predicted) - 1) // 2 - 2
    same = [float(predicted[2 * i + 1] + predicted[2 * i + 2]) * HOP_SECONDS
            for i in range(1, n_phones + 1)]  # fmt: skip
    out = edited_durations(predicted, same, frame_seconds=HOP_SECONDS, add_blank=True)
    np.testing.assert_array_equal(out, predicted)
    kept = edited_durations(predicted, [None] * n_phones, frame_seconds=HOP_SECONDS,
                            add_blank=True)  # fmt: skip
    np.testing.assert_array_equal(kept, predicted)


def test_a_changed_length_is_split_like_the_predicted_one() -> None:
    predicted = np.array([1, 2, 1, 3, 1, 1, 1], np.int64)  # _ x _ with one phoneme (3 + 1)
    out = edited_durations(predicted, [8 * HOP_SECONDS], frame_seconds=HOP_SECONDS,
                           add_blank=True)  # fmt: skip
    assert out[3] + out[4] == 8
    assert (out[3], out[4]) == (6, 2)
    assert list(out[:3]) == [1, 2, 1] and list(out[5:]) == [1, 1]  # pads untouched
    no_blanks = edited_durations(np.array([2, 5, 2]), [3 * HOP_SECONDS],
                                 frame_seconds=HOP_SECONDS, add_blank=False)  # fmt: skip
    assert list(no_blanks) == [2, 3, 2]


def test_lengths_that_do_not_fit_the_sentence_are_refused() -> None:
    predicted = np.array([1, 2, 1, 3, 1, 1, 1], np.int64)
    with pytest.raises(OptionError, match="2 phoneme lengths for a sentence of 1"):
        edited_durations(predicted, [0.1, 0.1], frame_seconds=HOP_SECONDS, add_blank=True)
    with pytest.raises(OptionError, match="0 or more"):
        edited_durations(predicted, [-1.0], frame_seconds=HOP_SECONDS, add_blank=True)


def test_edited_lengths_change_the_audio(engine: TTS) -> None:
    speaker = engine.speakers["tiny"]
    reading = [engine.frontend.g2p("こんにちは。")]
    n = len(reading[0].phones) - 2
    plain = speaker.generate_reading(reading, seed=1)
    lengths = tuple(0.05 for _ in range(n))
    edited = speaker.generate_reading(reading, seed=1, lengths=[lengths])
    assert edited.samples.shape != plain.samples.shape
    frames = round(0.05 / HOP_SECONDS)
    phonemes = [p for p in edited.timings.phonemes if p.text != "_"]
    assert len(phonemes) == n
    # each phoneme's token and the blank after it: exactly the frames asked for
    between = edited.timings.phonemes
    assert all(p.duration > 0 for p in phonemes)
    total = sum(p.duration for p in between[3 : 3 + 2 * n])  # token 3 is the first phoneme
    assert total == pytest.approx(n * frames * HOP_SECONDS, abs=1e-9)
    with pytest.raises(OptionError, match="one entry per sentence"):
        speaker.generate_reading(reading, lengths=[lengths, lengths])


def test_the_pytorch_backend_takes_edited_lengths_too(frontend: Frontend) -> None:
    """The PyTorch voice spreads its prior over the frames of its own state: both change."""
    require_fixtures()
    pytest.importorskip("torch")
    from yomiage.runtime.torch_backend import TorchBackend
    from yomiage.synthesis.gate import ComputeGate
    from yomiage.synthesis.pipeline import Pipeline

    tiny = FIXTURES / "sbv2_tiny"
    backend = TorchBackend(tiny / "bert" / "model", tokenizer_dir=tiny / "bert" / "tokenizer")
    voice = backend.load_voice(tiny / "model")
    pipeline = Pipeline(backend, frontend, ComputeGate())
    reading = [frontend.g2p("こんにちは。")]
    n = len(reading[0].phones) - 2
    options = SynthesisOptions(seed=1)
    plain = Audio.from_chunks(pipeline.stream(voice, "", options, reading=reading), 44100)
    edited = Audio.from_chunks(
        pipeline.stream(voice, "", options, reading=reading, lengths=[(0.05,) * n]), 44100
    )
    frames = round(0.05 / HOP_SECONDS)
    tokens = edited.timings.phonemes
    assert sum(p.duration for p in tokens[3 : 3 + 2 * n]) == pytest.approx(
        n * frames * HOP_SECONDS, abs=1e-9
    )
    assert len(edited.samples) != len(plain.samples)
