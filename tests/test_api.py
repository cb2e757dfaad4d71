"""The public API (TTS, Speaker, Audio) on the test voice, and on the reference fixture
voice against the reference outputs in ../shared (cases/api.*)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES, require_fixtures
from yomiage import TTS, Audio, SynthesisOptions
from yomiage.errors import (
    MissingExtraError,
    ModelLoadError,
    NotPreparedError,
    OfflineError,
    TextError,
    UnknownVoiceError,
)
from yomiage.options import OptionFields

TINY = FIXTURES / "sbv2_tiny"


def _api() -> dict[str, Any]:
    return json.loads((TINY / "cases" / "api.json").read_text("utf-8"))


@pytest.fixture
def tts(engine: TTS) -> TTS:
    """The session's engine: the test voice as "tiny" and "tiny2"."""
    return engine


@pytest.fixture(scope="module", params=["bundle", "aivmx"])
def reference_tts(request: pytest.FixtureRequest, reference_bundle: Path) -> Iterator[TTS]:
    """The reference fixture voice, its BERT in float32 (as the reference ran it): converted
    from the SBV2 folder, and read from the same voice in AivisSpeech's AIVMX format."""
    engine = TTS(bert_precision="fp32", decoder_precision="fp32", threads=2,
                 bert_source=reference_bundle / "bert", reading="sbv2")  # fmt: skip
    if request.param == "bundle":
        engine.load("tiny", source=f"file://{reference_bundle}")
    else:
        engine.load("tiny", source=FIXTURES / "aivmx" / "sbv2_tiny.aivmx")
    yield engine.prepare()
    engine.close()


def test_generate_matches_reference(reference_tts: TTS) -> None:
    api = _api()
    reference = np.load(TINY / "cases" / "api.npz")["pcm_generate"]
    audio = reference_tts.speakers["tiny"].generate(api["text"], **api["params"])
    assert len(audio.samples) == api["generate_samples"]
    pcm = audio.to_int16()
    assert int(np.abs(pcm.astype(np.int32) - reference.astype(np.int32)).max()) <= 2
    got = [(s.text, s.start, s.end - s.start) for s in audio.timings.phonemes]
    assert len(got) == len(api["timings"])
    for (text, start, duration), (ref_text, ref_start, ref_duration) in zip(
        got, api["timings"], strict=True
    ):
        assert text == ref_text
        assert start == pytest.approx(ref_start, abs=1e-9)
        assert duration == pytest.approx(ref_duration, abs=1e-9)


def test_sentences_and_gaps_match_reference(reference_tts: TTS) -> None:
    api = _api()
    speaker = reference_tts.speakers["tiny"]
    chunks = list(speaker.stream(api["text"], **api["params"]))
    per_sentence: dict[int, int] = {}
    for chunk in chunks:
        per_sentence[chunk.sentence] = per_sentence.get(chunk.sentence, 0) + len(chunk.samples)
    # Each sentence's chunks hold its pause (zeros first) and then its audio.
    expected = [api["sentence_samples"][0]] + [
        gap + n for gap, n in zip(api["gap_samples"], api["sentence_samples"][1:], strict=True)
    ]
    assert list(per_sentence.values()) == expected == api["stream_chunk_lengths"]
    for sentence, gap in enumerate(api["gap_samples"], start=1):
        first = next(c for c in chunks if c.sentence == sentence)
        assert not first.samples[:gap].any()
        assert first.timings.phonemes[0].start * 44100 == pytest.approx(first.offset + gap)


def test_stream_equals_generate_and_starts_early(tts: TTS, test_voice: Path) -> None:
    """generate() decodes in large windows from the start, stream() in small first ones:
    on float32 the same samples (the receptive field is finite); on the default engine
    (bf16 where the CPU has it) equal within the decoder's precision."""
    text = "今日はいい天気ですね。散歩に行きましょう！"
    with (
        TTS(threads=2, decoder_precision="fp32").load("tiny", source=test_voice).prepare() as exact
    ):
        chunks = list(exact.speakers["tiny"].stream(text, seed=3))
        whole = exact.speakers["tiny"].generate(text, seed=3)
    streamed = np.concatenate([c.samples for c in chunks])
    assert streamed.shape == whole.samples.shape
    assert float(np.abs(streamed - whole.samples).max()) <= 1e-5
    sentence_one = sum(len(c.samples) for c in chunks if c.sentence == 0)
    assert len(chunks[0].samples) < sentence_one  # the first window, not the first sentence
    assert [c.offset for c in chunks] == list(
        np.cumsum([0] + [len(c.samples) for c in chunks])[:-1]
    )
    speaker = tts.speakers["tiny"]
    streamed = np.concatenate([c.samples for c in speaker.stream(text, seed=3)])
    whole = speaker.generate(text, seed=3)
    assert streamed.shape == whole.samples.shape
    error = np.sum((streamed - whole.samples) ** 2)
    # 20 dB: this random tiny voice; a trained decoder's figures are in benchmarks/RESULTS.md
    assert error == 0 or 10 * np.log10(np.sum(whole.samples**2) / error) > 20


def test_seed_reproduces_and_differs(tts: TTS) -> None:
    speaker = tts.speakers["tiny"]
    a = speaker.generate("こんにちは。元気ですか？", seed=1)
    b = speaker.generate("こんにちは。元気ですか？", seed=1)
    c = speaker.generate("こんにちは。元気ですか？", seed=2)
    np.testing.assert_array_equal(a.samples, b.samples)
    assert len(a.samples) != len(c.samples) or not np.array_equal(a.samples, c.samples)


def test_options_are_checked_with_names(tts: TTS) -> None:
    speaker = tts.speakers["tiny"]
    assert speaker.styles == ("Neutral", "Happy", "Sad")
    assert dict(speaker.speaker_ids) == {"spk_a": 0, "spk_b": 1}
    with pytest.raises(ValueError, match="Neutral, Happy, Sad"):
        speaker.generate("こんにちは。", style="Angry")
    with pytest.raises(ValueError, match="spk_a=0, spk_b=1"):
        speaker.generate("こんにちは。", speaker_id=5)
    with pytest.raises(ValueError, match="speed"):
        speaker.generate("こんにちは。", speed=0)
    with pytest.raises(TypeError):
        speaker.generate("こんにちは。", volume=2)  # type: ignore[call-arg]
    for bad in ("", "   ", "😀😀", "\n\n"):
        with pytest.raises(TextError):
            speaker.generate(bad)
    with pytest.raises(KeyError):
        tts.speakers["nobody"]


def test_option_fields_match_the_dataclass() -> None:
    assert set(OptionFields.__annotations__) == set(SynthesisOptions.__dataclass_fields__)


def test_concurrent_generate_equals_alone(tts: TTS) -> None:
    texts = ["こんにちは。", "今日はいい天気ですね！散歩に行こう。", "それで、お茶を飲んだ。"]
    jobs = [
        (("tiny", "tiny2")[i % 2], texts[i % 3], {"seed": i, "style": ("Neutral", "Happy")[i % 2]})
        for i in range(16)
    ]
    alone = [tts.speakers[v].generate(t, **o).samples for v, t, o in jobs]
    start = threading.Barrier(16)

    def run(job: tuple[str, str, dict[str, Any]]) -> np.ndarray:
        voice, text, options = job
        start.wait()
        return tts.speakers[voice].generate(text, **options).samples

    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(run, jobs))
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b)


def test_abandoned_stream_releases_the_gate(tts: TTS) -> None:
    speaker = tts.speakers["tiny"]
    stream = speaker.stream("今日はいい天気ですね。散歩に行きましょう。", seed=0)
    next(stream)
    stream.close()  # type: ignore[attr-defined]
    del stream
    gate = tts._pipeline.gate  # type: ignore[union-attr]
    assert gate.running == 0 and gate.waiting == 0
    assert len(speaker.generate("はい。").samples) > 0


def test_astream_does_not_block_the_loop(tts: TTS) -> None:
    speaker = tts.speakers["tiny"]
    text = "今日はいい天気ですね。散歩に行きましょう。"

    async def main() -> tuple[list[int], int, Audio]:
        ticks = 0
        seen: list[int] = []

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        async for _chunk in speaker.astream(text, seed=4):
            seen.append(ticks)
        audio = await speaker.agenerate(text, seed=4)
        task.cancel()
        return seen, ticks, audio

    seen, _ticks, audio = asyncio.run(main())
    assert len(seen) > 2 and seen[-1] > seen[0]  # the loop ran while chunks were made
    np.testing.assert_array_equal(audio.samples, speaker.generate(text, seed=4).samples)


def test_cancelled_astream_releases_everything(tts: TTS) -> None:
    speaker = tts.speakers["tiny"]

    async def main() -> None:
        async def consume() -> None:
            async for _ in speaker.astream("今日はいい天気ですね。散歩に行きましょう。"):
                await asyncio.sleep(3600)

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert len(speaker.generate("はい。").samples) > 0  # nothing left holding the gate


def test_words_and_timings_cover_the_audio(tts: TTS) -> None:
    audio = tts.speakers["tiny"].generate("東京タワーに行きました。", seed=0)
    words = [w.text for w in audio.timings.words]
    assert "".join(words).startswith("東京タワー")
    assert audio.timings.phonemes[-1].end == pytest.approx(audio.duration)
    starts = [w.start for w in audio.timings.words]
    assert starts == sorted(starts)


def test_user_dictionary_is_per_instance(tts: TTS, test_voice: Path, tmp_path: Path) -> None:
    other = TTS(user_dictionary=tmp_path / "other.json").load("tiny", source=test_voice)
    try:
        tts.add_word("燦燦堂", "サンサンドウ", accent=0)
        assert [w.surface for w in tts.words()] == ["燦燦堂"]
        assert other.words() == ()
        tts.remove_word("燦燦堂")
    finally:
        other.close()


def test_pitch_matches_reference() -> None:
    require_fixtures()
    pytest.importorskip("pyworld")
    from yomiage.synthesis.pitch import adjust_pitch

    arrays = np.load(TINY / "cases" / "api.npz")
    out = adjust_pitch(arrays["pitch_input"], 44100, pitch_scale=1.2, intonation_scale=0.8)
    assert out.shape == arrays["pitch_output"].shape
    assert float(np.abs(out - arrays["pitch_output"]).max()) <= 1e-4


def test_pitch_options_change_the_audio(reference_tts: TTS) -> None:
    """(The test voice makes noise, in which WORLD finds no pitch to move.)"""
    pytest.importorskip("pyworld")
    speaker = reference_tts.speakers["tiny"]
    plain = speaker.generate("こんにちは。", seed=0)
    same = speaker.generate("こんにちは。", seed=0, pitch_scale=1.0, intonation_scale=1.0)
    np.testing.assert_array_equal(plain.samples, same.samples)
    higher = speaker.generate("こんにちは。", seed=0, pitch_scale=1.3)
    assert not np.array_equal(
        plain.samples[: len(higher.samples)], higher.samples[: len(plain.samples)]
    )


def test_adjust_pitch_moves_a_voiced_sound() -> None:
    pytest.importorskip("pyworld")
    from yomiage.synthesis.pitch import adjust_pitch

    rate = 44100
    t = np.arange(rate) / rate
    voiced = sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 6)).astype(np.float32) * 0.3

    def peak(x: np.ndarray) -> float:
        spectrum = np.abs(np.fft.rfft(x[rate // 4 : 3 * rate // 4]))
        return float(np.argmax(spectrum[:400]) * rate / (rate // 2))

    higher = adjust_pitch(voiced, rate, pitch_scale=1.3, intonation_scale=1.0)
    assert peak(voiced) == pytest.approx(150, abs=4)
    assert peak(higher) == pytest.approx(195, abs=8)


def test_pitch_without_pyworld_is_a_clear_error(tts: TTS, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from yomiage.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "pyworld", None)
    with pytest.raises(MissingExtraError, match=r"yomiage\[pitch\]"):
        tts.speakers["tiny"].generate("こんにちは。", pitch_scale=1.2)


def test_engine_errors(test_voice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="device"):
        TTS(device="tpu")
    with pytest.raises(ValueError, match="CPU only"):
        TTS(device="cuda", backend="onnx")
    with pytest.raises(UnknownVoiceError, match="jvnv-F1-jp"):
        TTS().load("jvnv-F9-jp")
    with pytest.raises(OfflineError, match="yomiage download jvnv-F1-jp"):
        TTS(offline=True, bert_source=test_voice / "bert").load("jvnv-F1-jp").prepare()
    with pytest.raises(ModelLoadError, match="no such folder"):
        TTS().load("x", source=tmp_path / "missing").prepare()
    with pytest.raises(ModelLoadError, match="not a voice"):
        TTS(bert_source=test_voice / "bert").load("x", source=tmp_path).prepare()
    sbv2 = tmp_path / "sbv2"  # what an SBV2 folder looks like (never read: torch is missing)
    sbv2.mkdir()
    shutil.copy(test_voice.parent / "hayakoe" / "config.json", sbv2 / "config.json")
    (sbv2 / "voice_e1_s100.safetensors").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingExtraError, match=r"yomiage\[torch\]"):
        TTS(bert_source=test_voice / "bert").load("x", source=sbv2).prepare()
    lone = tmp_path / "lone"
    shutil.copytree(test_voice, lone, ignore=shutil.ignore_patterns("bert"))
    with pytest.raises(OfflineError, match="yomiage download deberta-v2-large-japanese-char-wwm"):
        TTS(offline=True).load("x", source=lone).prepare()  # the catalog's BERT
    declared = TTS().load("tiny", source=test_voice)
    with pytest.raises(NotPreparedError, match="prepare"):
        declared.speakers  # noqa: B018
    with TTS().load("tiny", source=test_voice).prepare() as engine:
        assert list(engine.speakers) == ["tiny"]
    with pytest.raises(NotPreparedError, match="closed"):
        engine.prepare()


def test_torch_backend_through_the_same_pipeline(frontend: Any) -> None:
    """The PyTorch backend gives the same sentences, gaps and timings."""
    require_fixtures()
    pytest.importorskip("torch")
    from yomiage.runtime.torch_backend import TorchBackend
    from yomiage.synthesis.gate import ComputeGate
    from yomiage.synthesis.pipeline import Pipeline

    api = _api()
    backend = TorchBackend(TINY / "bert" / "model", tokenizer_dir=TINY / "bert" / "tokenizer")
    voice = backend.load_voice(TINY / "model")
    pipeline = Pipeline(backend, frontend, ComputeGate(), exact_pauses=True)
    options = SynthesisOptions(**api["params"])
    audio = Audio.from_chunks(pipeline.stream(voice, api["text"], options), 44100)
    reference = np.load(TINY / "cases" / "api.npz")["pcm_generate"]
    assert len(audio.samples) == api["generate_samples"]
    diff = audio.to_int16().astype(np.int32) - reference.astype(np.int32)
    assert int(np.abs(diff).max()) <= 2


def test_public_api_never_imports_torch(test_voice: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from yomiage import TTS\n"
        f"with TTS().load('tiny', source={str(test_voice)!r}).prepare(warmup=True) as tts:\n"
        "    audio = tts.speakers['tiny'].generate('こんにちは。元気？', seed=0)\n"
        f"    audio.save({str(tmp_path / 'a.wav')!r})\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert (tmp_path / "a.wav").stat().st_size > 44


def test_sbv2_folder_is_converted_once_into_the_cache(
    reference_bundle: Path, tmp_path: Path
) -> None:
    """On CPU an SBV2 folder is converted on first use and then loaded from the cache."""
    cache = tmp_path / "cache"
    bert = reference_bundle / "bert"
    with TTS(cache_dir=cache, bert_source=bert).load("v", source=TINY / "model").prepare() as tts:
        converted = tts.speakers["v"].generate("こんにちは。", seed=1)
    [bundle] = (cache / "converted").iterdir()
    stamp = (bundle / "voice.json").stat().st_mtime_ns
    with TTS(cache_dir=cache, bert_source=bert).load("v", source=TINY / "model").prepare() as tts:
        again = tts.speakers["v"].generate("こんにちは。", seed=1)
    assert (bundle / "voice.json").stat().st_mtime_ns == stamp  # not converted twice
    with TTS(bert_source=bert).load("v", source=reference_bundle).prepare() as tts:
        reference = tts.speakers["v"].generate("こんにちは。", seed=1)
    np.testing.assert_array_equal(converted.samples, reference.samples)
    np.testing.assert_array_equal(again.samples, reference.samples)


def test_pre_download_leaves_local_folders(test_voice: Path) -> None:
    tts = TTS(bert_source=test_voice / "bert").load("v", source=test_voice)
    assert tts.pre_download() == [test_voice, test_voice / "bert"]


def test_quick_start_reads_the_first_clause_alone(tts: TTS) -> None:
    speaker = tts.speakers["tiny"]
    text = "駅前の小さな喫茶店で、古い友人と偶然再会して、学生時代の話に花を咲かせました。はい。"
    plain = list(speaker.stream(text, seed=0))
    quick = list(speaker.stream(text, seed=0, quick_start=True))
    assert {c.sentence for c in plain} == {0, 1}
    assert {c.sentence for c in quick} == {0, 1, 2}  # the clause, the rest, then "はい。"
    first_clause = sum(len(c.samples) for c in quick if c.sentence == 0)
    assert first_clause < sum(len(c.samples) for c in plain if c.sentence == 0) / 2
    rest = next(c for c in quick if c.sentence == 1)
    assert rest.samples[:64].any()  # no pause inserted after the comma...
    last = next(c for c in quick if c.sentence == 2)
    assert not last.samples[:441].any()  # ...but the full stop still gets one
    words = [w.text for c in quick for w in c.timings.words]
    assert "".join(words).startswith("駅前の小さな")
    short = list(speaker.stream("こんにちは、元気？", seed=0, quick_start=True))
    assert {c.sentence for c in short} == {0}  # short first sentences are left whole


def test_clause_helpers() -> None:
    from yomiage.text.sentences import ends_at_comma, first_clause

    assert first_clause("短い、文。") == ["短い、文。"]
    long = "駅前の小さな喫茶店で、古い友人と偶然再会して、学生時代の話をしました。"
    assert first_clause(long) == ["駅前の小さな喫茶店で、", long[11:]]
    assert first_clause("あ、" + "い" * 30) == ["あ、" + "い" * 30]  # head too short: no cut
    assert ends_at_comma("駅前で、 ") and not ends_at_comma("駅前で。")


def test_long_text_is_batched_in_bounded_groups(tts: TTS, monkeypatch: pytest.MonkeyPatch) -> None:
    from yomiage.synthesis import pipeline as synthesis

    pipeline = tts._pipeline
    assert pipeline is not None
    batches: list[int] = []
    real = pipeline.backend.bert_features

    def counted(sentences: Any) -> Any:
        batches.append(len(sentences))
        return real(sentences)

    monkeypatch.setattr(pipeline.backend, "bert_features", counted)
    text = "".join(f"これは{i}番目の文です。" for i in range(1, 21))
    chunks = list(tts.speakers["tiny"].stream(text, seed=0))
    assert sorted({c.sentence for c in chunks}) == list(range(20))
    # the first sentence alone, then groups, all made before the second sentence
    # (for the pauses); nothing runs through BERT twice
    group = synthesis.BERT_GROUP
    assert batches == [1, group, group, 20 - 1 - 2 * group]
    # SBV2's way: the whole text once more for the pauses, then the groups as they come
    batches.clear()
    monkeypatch.setattr(pipeline, "exact_pauses", True)
    assert [c.samples.size for c in tts.speakers["tiny"].stream(text, seed=0)]
    assert batches == [1, 1, group, group, 20 - 1 - 2 * group]
    # a text past one BERT pass has no predicted pauses: groups only as the stream reaches them
    batches.clear()
    monkeypatch.setattr(pipeline, "exact_pauses", False)
    book = "".join(f"これは{i}番目の文で、少し長めに書いてあります。" for i in range(1, 41))
    stream = tts.speakers["tiny"].stream(book, seed=0)
    assert batches == [1]
    for chunk in stream:
        if chunk.sentence == 2:
            break
    assert batches == [1, group]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="needs Task.cancelling (Python 3.11)")
def test_aclose_waits_until_the_stream_has_stopped(
    tts: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    speaker = tts.speakers["tiny"]
    pipeline = tts._pipeline
    assert pipeline is not None
    made: list[Any] = []
    real = pipeline.stream

    def recorded(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(pipeline, "stream", recorded)

    async def main() -> None:
        stream = speaker.astream("今日はいい天気ですね。散歩に行きましょう。", seed=0)
        await stream.__anext__()
        await stream.aclose()  # type: ignore[attr-defined]
        assert made[0].gi_frame is None  # the synthesis generator has finished closing

    asyncio.run(main())
