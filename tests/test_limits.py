"""What one request may cost (issue 11): bounded options, flow spans, limits, cancellation."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yomiage import TTS, Limits, SynthesisOptions
from yomiage.errors import Cancelled, LimitError, ModelLoadError, OptionError
from yomiage.options import RANGES
from yomiage.runtime.chunking import clause_ends, flow_spans
from yomiage.text.symbols import SYMBOL_TO_ID

# -- options ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RANGES))
def test_every_option_is_bounded_and_named(name: str) -> None:
    low, high = RANGES[name]
    SynthesisOptions(**{name: low})
    SynthesisOptions(**{name: high})
    for bad in (low - 0.01, high + 0.01, 1e9, -1e9, float("nan"), float("inf"), "1", True):
        with pytest.raises(OptionError) as caught:
            SynthesisOptions(**{name: bad})
        assert caught.value.field == name
        assert name in str(caught.value)


def test_noise_w_that_held_a_server_for_300_s_is_refused() -> None:
    with pytest.raises(OptionError, match="noise_w must be between 0 and 2") as caught:
        SynthesisOptions(noise_w=10, sdp_ratio=1)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("field", "value"),
    [("seed", -1), ("seed", 2**64), ("seed", 1.5), ("speaker_id", -1), ("speaker_id", 2**31),
     ("style", ""), ("style", "x" * 300), ("style", 3), ("quick_start", "yes")],
)  # fmt: skip
def test_other_options_are_checked(field: str, value: Any) -> None:
    with pytest.raises(OptionError) as caught:
        SynthesisOptions(**{field: value})
    assert caught.value.field == field


def test_unknown_option_from_a_mapping_is_named() -> None:
    with pytest.raises(OptionError) as caught:
        SynthesisOptions.from_fields({"speed": 1.0, "volume": 2})
    assert caught.value.field == "volume"


# -- flow spans ----------------------------------------------------------------

COMMA = SYMBOL_TO_ID[","]


def test_short_sentence_is_one_span() -> None:
    durations = np.full(50, 3, np.int64)
    assert flow_spans(durations, np.zeros(50, bool), 1024, 256) == [(0, 150)]


def test_long_sentence_is_cut_at_clause_ends_within_the_cap() -> None:
    ids = np.zeros(400, np.int64)
    ids[[90, 200, 310]] = COMMA
    durations = np.full(400, 5, np.int64)  # 2,000 frames
    spans = flow_spans(durations, clause_ends(ids), 1024, 512)
    # After the comma at token 90 (first span at most 512), then the comma at
    # token 200 (the one at 310 ends beyond 455 + 1024), then the rest.
    assert spans == [(0, 455), (455, 1005), (1005, 2000)]


def test_no_clause_end_cuts_between_tokens_and_a_huge_token_inside() -> None:
    durations = np.array([7] * 300, np.int64)
    spans = flow_spans(durations, np.zeros(300, bool), 100, 100)
    assert all(b - a <= 100 for a, b in spans) and spans[-1][1] == 2100
    assert all(a % 7 == 0 for a, _ in spans)
    giant = flow_spans(np.array([5000], np.int64), np.zeros(1, bool), 100, 100)
    assert len(giant) == 50 and giant[-1] == (4900, 5000)


# -- the engine ----------------------------------------------------------------


@pytest.fixture
def tts(engine: TTS) -> TTS:
    return engine


def test_extreme_options_end_in_audio_of_bounded_length(tts: TTS) -> None:
    speaker = tts.speakers["tiny"]
    text = "今日はいい天気ですね。"
    base = speaker.generate(text, seed=0, noise_w=0, sdp_ratio=0)
    corners = [
        {"noise_w": 2.0, "sdp_ratio": 1.0, "noise": 2.0},
        {"speed": 4.0, "noise_w": 2.0, "sdp_ratio": 1.0},
        {"speed": 0.25, "style_weight": 20.0},
        {"style_weight": 0.0, "noise": 0.0, "noise_w": 0.0},
    ]
    for options in corners:
        audio = speaker.generate(text, seed=0, **options)
        assert np.isfinite(audio.samples).all()
        assert 0 < audio.duration < 40 * base.duration


def test_sentence_longer_than_the_limit_fails_before_its_audio(test_voice: Path) -> None:
    limits = Limits(max_sentence_seconds=0.2)
    with TTS(limits=limits).load("tiny", source=test_voice) as engine:
        speaker = engine.prepare().speakers["tiny"]
        with pytest.raises(LimitError, match=r"at most 0\.2 s") as caught:
            speaker.stream("駅前の小さな喫茶店で、古い友人と偶然再会しました。", seed=0)
        assert caught.value.limit == "max_sentence_seconds"


def test_request_longer_than_the_limit_is_refused_before_any_audio(
    tts: TTS, test_voice: Path
) -> None:
    """Issue 22 (8): the request limit was met only after the sentences before it were
    decoded (a server's 900 s after 69 s of work); a request that may come near it now
    has every sentence's duration predicted before any audio, and one that fits runs."""
    one = tts.speakers["tiny"].generate("今日はいい天気ですね。", seed=0).duration
    limits = Limits(max_request_seconds=5 * one)
    with TTS(limits=limits).load("tiny", source=test_voice) as engine:
        speaker = engine.prepare().speakers["tiny"]
        with pytest.raises(LimitError) as caught:
            speaker.stream("今日はいい天気ですね。" * 20, seed=0)  # at the call: no chunk made
        assert caught.value.limit == "max_request_seconds"
        near = speaker.generate("今日はいい天気ですね。" * 3, seed=0)  # checked whole, and fits
        assert near.duration > 2.5 * one


def test_limits_reject_nonsense() -> None:
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_sentence_seconds"):
            Limits(max_sentence_seconds=bad)


def test_cancel_stops_before_the_first_chunk(tts: TTS) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        tts.speakers["tiny"].stream("こんにちは。", cancel=cancel)


def test_cancel_from_another_thread_stops_a_stream(tts: TTS) -> None:
    cancel = threading.Event()
    chunks = tts.speakers["tiny"].stream("今日はいい天気ですね。" * 10, seed=0, cancel=cancel)
    next(chunks)
    threading.Thread(target=cancel.set).start()
    with pytest.raises(Cancelled):
        for _ in chunks:
            pass


def test_cancel_while_waiting_for_the_gate(tts: TTS) -> None:
    """A request queued behind a long one leaves at once when cancelled."""
    gate = tts.speakers["tiny"]._pipeline.gate
    cancel = threading.Event()
    errors: list[BaseException] = []
    started = threading.Event()

    def wait_for_gate() -> None:
        started.set()
        try:
            gate.run(lambda: None, cancel=cancel)
        except BaseException as exc:
            errors.append(exc)

    release, busy = threading.Event(), threading.Semaphore(0)
    holders = [
        threading.Thread(target=gate.run, args=(lambda: (busy.release(), release.wait(10)),))
        for _ in range(gate.slots)
    ]
    for holder in holders:
        holder.start()
    for _ in holders:  # every slot is busy
        assert busy.acquire(timeout=10)
    waiter = threading.Thread(target=wait_for_gate)
    waiter.start()
    started.wait()
    cancel.set()
    waiter.join(timeout=5)
    release.set()
    for holder in holders:
        holder.join(timeout=10)
    assert not waiter.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)


def test_non_finite_audio_is_never_returned(tts: TTS, monkeypatch: pytest.MonkeyPatch) -> None:
    """Corrupt weights gave NaN audio that the server sent as 200."""
    voice = tts.speakers["tiny"]._voice
    real = voice.decode_windows

    def poisoned(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for piece in real(*args, **kwargs):
            yield np.full_like(piece, np.nan)

    monkeypatch.setattr(voice, "decode_windows", poisoned)
    with pytest.raises(ModelLoadError, match="non-finite"):
        tts.speakers["tiny"].generate("こんにちは。", seed=0)


def test_a_sentence_whose_reading_is_too_long_is_cut_further(tts: TTS) -> None:
    """200 digits read out are 600 kana: the encoder took 5.6 s before the first audio."""
    from yomiage.synthesis.reading import MAX_READING_CHARS, read_sentences

    frontend = tts.frontend
    pieces = read_sentences(frontend, "9" * 200 + "。こんにちは。")
    readings = [p.phonemes.bert_text for p in pieces]
    assert all(len(r) <= MAX_READING_CHARS for r in readings)
    assert "".join(readings[:-1]).count("キュー") == 200
    assert "".join(p.text for p in pieces) == "9" * 200 + "。こんにちは。"
    # The cut pieces of the first sentence follow each other without a pause.
    assert [p.clause for p in pieces] == [True] * (len(pieces) - 2) + [False, False]
    whole = read_sentences(frontend, "今日はいい天気ですね、" * 18)[0].phonemes
    assert whole.bert_text.count("天気") == 18
    # Text the splitter cannot cut (long vowel marks only) is read as it is, once.
    assert len(read_sentences(frontend, "ー" * 345)) == 1
