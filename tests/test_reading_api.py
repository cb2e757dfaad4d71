"""Readings an editor works on: accent phrases from the frontend, phonemes back from them,
predicted timings, audio from a reading, and the pause options."""

from __future__ import annotations

import numpy as np
import pytest

from yomiage import TTS
from yomiage.errors import OptionError
from yomiage.options import SynthesisOptions
from yomiage.text import Frontend
from yomiage.voicevox.model import AccentPhrase, Mora
from yomiage.voicevox.query import reading_of, sentences


def test_accent_phrases_follow_the_labels(frontend: Frontend) -> None:
    phrases = frontend.accent_phrases(frontend.g2p("こんにちは、ヒホです。"))
    assert ["".join(m.text for m in p.moras) for p in phrases] == ["コンニチワ", "ヒホデス"]
    assert [(p.accent, p.pause) for p in phrases] == [(5, "、"), (1, None)]
    assert phrases[0].tones() == [0, 1, 1, 1, 1] and phrases[1].tones() == [1, 0, 0, 0]
    assert phrases[1].moras[-1].vowel == "U"  # devoiced, as the editors show it
    question = frontend.accent_phrases(frontend.g2p("本当ですか？"))
    assert question[-1].interrogative


def _mora(text: str, consonant: str | None, vowel: str) -> Mora:
    return Mora(text, consonant, None, vowel, 0.1, 5.8)


def test_a_reading_from_phrases_is_what_the_model_reads() -> None:
    ame = AccentPhrase((_mora("ア", None, "a"), _mora("メ", "m", "e")), 1,
                       Mora("。", None, None, "pau", 0.2, 0.0))  # fmt: skip
    desu = AccentPhrase((_mora("デ", "d", "e"), _mora("ス", "s", "U")), 1)
    [first, second] = sentences([ame, desu])
    reading = reading_of(first)
    assert reading.phones == ("_", "a", "m", "e", ".", "_")
    assert reading.tones == (0, 1, 0, 0, 0, 0)  # accent 1: the first mora high
    assert sum(reading.word2ph) == len(reading.phones)
    assert len(reading.word2ph) == len(reading.bert_text) + 2 == 5
    assert reading_of(second).phones == ("_", "d", "e", "s", "u", ".", "_")
    flat = AccentPhrase(ame.moras, 2)
    assert reading_of([flat]).tones == (0, 0, 1, 1, 0, 0)


@pytest.fixture(scope="module")
def exact(test_voice: object) -> TTS:
    tts = TTS(threads=2, decoder_precision="fp32").load("tiny", source=test_voice).prepare()
    yield tts
    tts.close()


def test_generate_reading_of_the_frontends_reading_is_generate(exact: TTS) -> None:
    speaker = exact.speakers["tiny"]
    text = "今日はいい天気ですね。"
    reading = [exact.frontend.g2p(text)]
    a = speaker.generate(text, seed=4)
    b = speaker.generate_reading(reading, seed=4)
    assert a.samples.shape == b.samples.shape
    assert float(np.abs(a.samples - b.samples).max()) <= 1e-5


def test_predicted_timings_are_the_audios(exact: TTS) -> None:
    speaker = exact.speakers["tiny"]
    [(phonemes, timings)] = speaker.predict("今日はいい天気ですね。", seed=4, noise_w=0)
    audio = speaker.generate("今日はいい天気ですね。", seed=4, noise_w=0)
    assert phonemes.text
    assert timings.phonemes[-1].end == pytest.approx(audio.duration, abs=1e-6)
    assert [s.text for s in timings.phonemes] == [s.text for s in audio.timings.phonemes]


def test_pause_options_set_the_pause_between_sentences(exact: TTS) -> None:
    speaker = exact.speakers["tiny"]
    text = "はい。いいえ。"
    none = speaker.generate(text, seed=1, pause_seconds=0.0)
    second = speaker.generate(text, seed=1, pause_seconds=1.0)
    assert (len(second.samples) - len(none.samples)) / 44100 == pytest.approx(1.0, abs=0.02)
    predicted = speaker.generate(text, seed=1)
    doubled = speaker.generate(text, seed=1, pause_scale=2.0)
    assert len(doubled.samples) > len(predicted.samples)
    with pytest.raises(OptionError, match="pause_seconds"):
        SynthesisOptions(pause_seconds=-1.0)
    with pytest.raises(OptionError, match="pause_scale"):
        SynthesisOptions(pause_scale=11.0)
