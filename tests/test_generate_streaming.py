"""A long text is spoken as it is read, and ``yomiage generate`` writes its file as the
audio is decoded (issue 49, 1): a 10 MB text printed nothing for 150 s while every
sentence went through g2p, and the whole audio was held until the end."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yomiage import TTS
from yomiage.cli import main
from yomiage.synthesis.pipeline import BERT_GROUP

SENTENCES = [f"今日は{n}番目の文を読みます。" for n in range(1, 81)]
TEXT = "".join(SENTENCES)


@pytest.fixture
def g2p_calls(engine: TTS, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the engine's frontend reads, in order (the session engine's own)."""
    frontend = engine.speakers["tiny"]._pipeline.frontend
    calls: list[str] = []
    real = frontend.g2p

    def counted(text: str) -> Any:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(frontend, "g2p", counted)
    return calls


def test_the_first_audio_comes_before_the_last_sentence_is_read(
    engine: TTS, g2p_calls: list[str]
) -> None:
    chunks = engine.speakers["tiny"].stream(TEXT, seed=0)
    first = next(chunks)
    assert first.text == SENTENCES[0]
    assert len(g2p_calls) <= BERT_GROUP + 1  # the first sentence and one group ahead
    for chunk in chunks:
        if chunk.sentence == 1:
            break
    # The pauses need the whole text read only when it fits one BERT pass (this one
    # does not): finding that out reads no further than the BERT's length.
    assert len(g2p_calls) < len(SENTENCES) // 2
    chunks.close()


def test_a_lazily_read_stream_is_the_audio_of_the_whole_text(engine: TTS) -> None:
    speaker = engine.speakers["tiny"]
    text = "".join(SENTENCES[:12])
    streamed = list(speaker.stream(text, seed=4, early_audio=False))
    whole = speaker.generate(text, seed=4)
    assert [c.text for c in streamed if c.timings.phonemes] == SENTENCES[:12]
    assert whole.sentences == tuple(SENTENCES[:12])
    np.testing.assert_array_equal(np.concatenate([c.samples for c in streamed]), whole.samples)


def _args(voice: Path, *extra: str) -> list[str]:
    return ["generate", "--model", str(voice), "--threads", "2", "-q", *extra]


def test_generate_writes_its_file_before_the_text_is_all_read(
    test_voice: Path, tmp_path: Path, g2p_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first chunk goes to disk (a spool beside the target) before the text's last
    sentence is read."""
    from yomiage.batch import audio_file

    seen: list[tuple[int, list[str]]] = []
    real_add = audio_file.AudioFileWriter.add

    def add(self: audio_file.AudioFileWriter, samples: Any) -> None:
        real_add(self, samples)
        spools = sorted(p.name for p in tmp_path.glob(".out.wav.*.spool"))
        seen.append((len(g2p_calls), spools))

    monkeypatch.setattr(audio_file.AudioFileWriter, "add", add)
    out = tmp_path / "out.wav"
    monkeypatch.setattr(sys, "stdin", _Stdin(TEXT.encode()))
    assert main(_args(test_voice, "-", "-o", str(out), "--seed", "1")) == 0
    assert seen, "the file was not written through the spool"
    read_then, spools = seen[0]
    assert read_then < len(SENTENCES) // 2 and len(spools) == 1
    assert out.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["out.wav"]


class _Stdin:
    def __init__(self, data: bytes) -> None:
        import io

        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def _interrupted_after(chunks: int, monkeypatch: pytest.MonkeyPatch, at: list[list[str]],
                       folder: Path) -> None:  # fmt: skip
    """Speaker.stream yields ``chunks`` chunks, then Ctrl-C (noting the folder's files)."""
    from yomiage.speaker import Speaker

    real = Speaker.stream

    def stream(self: Speaker, *args: Any, **kwargs: Any) -> Iterator[Any]:
        inner = real(self, *args, **kwargs)

        def cut() -> Iterator[Any]:
            for n, chunk in enumerate(inner):
                if n == chunks:
                    at.append(sorted(p.name for p in folder.iterdir()))
                    raise KeyboardInterrupt
                yield chunk

        return cut()

    monkeypatch.setattr(Speaker, "stream", stream)


@pytest.mark.parametrize("suffix", ["wav", "flac"])
def test_generate_interrupted_midway_leaves_the_old_file_and_no_temporary_one(
    test_voice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    if suffix == "flac":
        pytest.importorskip("soundfile")
    out = tmp_path / f"out.{suffix}"
    out.write_bytes(b"the old file")
    at: list[list[str]] = []
    _interrupted_after(3, monkeypatch, at, tmp_path)
    assert main(_args(test_voice, "".join(SENTENCES[:10]), "-o", str(out))) == 130
    [files] = at
    assert any(name.endswith(".spool") for name in files)  # it was being written
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]
    assert out.read_bytes() == b"the old file"


def test_generate_does_not_hold_the_whole_audio(
    test_voice: Path, engine: TTS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is Audio.save's, made without an Audio of the whole text."""
    from yomiage.audio import Audio

    text = "".join(SENTENCES[:6])
    expected = engine.speakers["tiny"].generate(text, seed=2).to_bytes("wav")

    def refuse(*args: Any, **kwargs: Any) -> Audio:
        raise AssertionError("the whole audio was gathered")

    monkeypatch.setattr(Audio, "from_chunks", refuse)
    out = tmp_path / "o.wav"
    assert main(_args(test_voice, text, "-o", str(out), "--seed", "2")) == 0
    assert out.read_bytes() == expected


@pytest.mark.parametrize("source", ["argument", "file", "stdin"])
def test_generate_refuses_a_text_one_file_cannot_hold_naming_batch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
) -> None:
    """Over the cap, before any voice is loaded (there is none here to load)."""
    from yomiage.batch.items import MAX_ITEM_CHARS

    text = "あ" * (MAX_ITEM_CHARS + 1)
    given = [text]
    if source == "file":
        path = tmp_path / "book.txt"
        path.write_text(text, "utf-8")
        given = ["--file", str(path)]
    elif source == "stdin":
        monkeypatch.setattr(sys, "stdin", _Stdin(text.encode()))
        given = ["-"]
    out = tmp_path / "book.flac"
    args = ["generate", *given, "--model", str(tmp_path / "no-voice"), "-o", str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "more than 200,000 characters" in err and "`yomiage batch`" in err
    assert err.count("\n") == 1 and not out.exists()


def test_the_cap_is_for_files_a_stream_to_stdout_takes_any_length(
    test_voice: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    from yomiage import text_input

    monkeypatch.setattr(text_input, "MAX_TEXT_CHARS", 20)
    text = "".join(SENTENCES[:3])  # over 20 characters
    assert main(_args(test_voice, text, "-o", "-", "--format", "pcm")) == 0
    assert len(capsysbinary.readouterr().out) > 44100
    assert main(_args(test_voice, text, "-o", "-", "--format", "flac")) == 1
    assert b"`yomiage batch`" in capsysbinary.readouterr().err


def test_a_whole_file_format_on_stdout_is_the_files_audio(
    test_voice: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    soundfile = pytest.importorskip("soundfile")
    text = "".join(SENTENCES[:3])
    out = tmp_path / "a.flac"
    assert main(_args(test_voice, text, "--seed", "5", "-o", str(out))) == 0
    assert main(_args(test_voice, text, "--seed", "5", "-o", "-", "--format", "flac")) == 0
    piped = tmp_path / "b.flac"
    piped.write_bytes(capsysbinary.readouterr().out)
    np.testing.assert_array_equal(soundfile.read(piped)[0], soundfile.read(out)[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.flac", "b.flac"]


def test_audio_past_what_a_wav_holds_stops_when_it_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not after hours more of decoding, at the end."""
    from yomiage.batch import audio_file
    from yomiage.errors import AudioFormatError

    monkeypatch.setattr(audio_file, "WAV_MAX_BYTES", 2 * 1000)
    with audio_file.AudioFileWriter(tmp_path / "a.wav", "wav", 44100) as writer:
        writer.add(np.zeros(600, np.float32))
        with pytest.raises(AudioFormatError, match="more than a WAV file holds"):
            writer.add(np.zeros(600, np.float32))
