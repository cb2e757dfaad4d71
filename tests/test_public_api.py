"""The public surface, pinned: a change here is a change users see (and the README says)."""

from __future__ import annotations

import dataclasses

import yomiage
from yomiage import TTS, Audio, AudioChunk, Speaker, SynthesisOptions


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_package_exports() -> None:
    assert sorted(yomiage.__all__) == [
        "Audio", "AudioChunk", "AudioFormatError", "Cancelled", "DictionaryNotFoundError",
        "LimitError", "Limits", "MissingExtraError", "ModelLoadError", "NotPreparedError",
        "OptionError", "Span", "Speaker", "SynthesisOptions", "TTS", "TextError", "Timings",
        "UserDictionaryError", "VoiceNotLoadedError", "YomiageError", "__version__",
    ]  # fmt: skip
    for name in yomiage.__all__:
        assert getattr(yomiage, name) is not None


def test_tts_surface(engine: TTS) -> None:
    assert _public(TTS) == {
        "add_word", "close", "closed", "frontend", "load", "measure_plans", "pre_download", "prepare",
        "remove_word",
        "speakers", "take_measured_plans", "unload", "update_words", "words",
    }  # fmt: skip
    assert {k for k in vars(engine) if not k.startswith("_")} == {
        "backend_name", "bert_precision", "cache_dir", "device", "limits", "offline",
        "plan_request", "reading", "threads",
    }  # fmt: skip


def test_speaker_surface(engine: TTS) -> None:
    assert _public(Speaker) == {
        "agenerate", "astream", "generate", "generate_reading", "options", "predict", "stream",
        "stream_reading", "warm",
    }  # fmt: skip
    speaker = engine.speakers["tiny"]
    assert {k for k in vars(speaker) if not k.startswith("_")} == {
        "credits",
        "name",
        "plan",
        "runtime",
        "sample_rate",
        "speaker_ids",
        "style_ids",
        "styles",
    }


def test_audio_surface() -> None:
    assert [f.name for f in dataclasses.fields(Audio)] == [
        "samples",
        "sample_rate",
        "timings",
        "options",
        "sentences",
    ]
    assert _public(Audio) == {
        "duration", "from_chunks", "options", "save", "sentences", "to_bytes", "to_int16"
    }  # fmt: skip
    assert [f.name for f in dataclasses.fields(AudioChunk)] == [
        "samples",
        "sample_rate",
        "offset",
        "sentence",
        "timings",
        "text",
        "options",
    ]
    assert _public(AudioChunk) == {"duration", "options", "text", "to_int16", "to_pcm_bytes"}


def test_options_fields() -> None:
    assert [f.name for f in dataclasses.fields(SynthesisOptions)] == [
        "style", "style_weight", "speaker_id", "speed", "sdp_ratio", "noise", "noise_w",
        "pitch_scale", "intonation_scale", "seed", "quick_start", "pause_seconds", "pause_scale",
    ]  # fmt: skip
