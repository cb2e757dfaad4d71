"""``yomiage generate`` with the tiny fixture voice: files, stdout, timings and errors."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from yomiage import TTS
from yomiage.cli import main

TEXT = "こんにちは。今日はいい天気ですね。"
YOMIAGE = [sys.executable, "-m", "yomiage"]


@pytest.fixture
def reference(engine: TTS) -> TTS:
    """The session's engine: the library's side of every comparison."""
    return engine


def _args(bundle: Path, *extra: str) -> list[str]:
    return ["generate", "--model", str(bundle), "--threads", "2", *extra]  # as the engine


def test_wav_file_is_the_librarys_audio(
    test_voice: Path, reference: TTS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "hello.wav"
    options = ["--seed", "3", "--style", "Happy", "--speaker-id", "spk_b", "--speed", "1.2",
               "--sdp-ratio", "0.4", "--noise", "0.5", "--noise-w", "0.7", "--style-weight", "2"]  # fmt: skip
    assert main(_args(test_voice, TEXT, "-o", str(out), *options)) == 0
    expected = reference.speakers["tiny"].generate(
        TEXT, seed=3, style="Happy", speaker_id=1, speed=1.2, sdp_ratio=0.4, noise=0.5,
        noise_w=0.7, style_weight=2.0,
    )  # fmt: skip
    assert out.read_bytes() == expected.to_bytes("wav")
    message = capsys.readouterr().err
    assert message.startswith(f"wrote {out}: ") and "real time" in message


@pytest.mark.parametrize(("name", "fmt"), [("out.flac", None), ("out.bin", "mp3"), ("o.ogg", None)])
def test_other_formats(test_voice: Path, tmp_path: Path, name: str, fmt: str | None) -> None:
    soundfile = pytest.importorskip("soundfile")
    out = tmp_path / name
    assert (
        main(_args(test_voice, TEXT, "-o", str(out), "-q", *(["--format", fmt] if fmt else [])))
        == 0
    )
    samples, rate = soundfile.read(out)
    assert rate == 44100 and len(samples) > rate


@pytest.mark.parametrize("output", ["out.bin", "-"])
def test_format_opus_is_a_choice_as_the_opus_suffix_is(
    test_voice: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], output: str
) -> None:
    """Issue 31, 18: ``-o x.opus`` wrote Ogg Opus, but ``--format opus`` was an "invalid
    choice"."""
    soundfile = pytest.importorskip("soundfile")
    out = tmp_path / "out.opus"
    target = "-" if output == "-" else str(tmp_path / output)
    assert main(_args(test_voice, TEXT, "-q", "--format", "opus", "-o", target)) == 0
    if output == "-":
        out.write_bytes(capsysbinary.readouterr().out)
    else:
        out = tmp_path / output
    info = soundfile.info(str(out))
    assert (info.format, info.subtype, info.samplerate) == ("OGG", "OPUS", 48000)
    assert info.duration > 1.0


@pytest.mark.parametrize("command", ["generate", "batch"])
def test_every_format_the_library_writes_is_a_format_choice(command: str) -> None:
    """``--format`` offers what ``Audio.save`` writes (opus was missing), ``batch`` all
    but headerless ``pcm``."""
    from yomiage.audio.formats import FORMATS
    from yomiage.cli.main import build_parser

    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    [flag] = [a for a in sub.choices[command]._actions if "--format" in a.option_strings]
    expected = set(FORMATS) - ({"pcm"} if command == "batch" else set())
    assert set(flag.choices or ()) == expected


def test_stdin_to_stdout_streams_a_wav(test_voice: Path, reference: TTS) -> None:
    done = subprocess.run(
        [*YOMIAGE, *_args(test_voice, "-", "-o", "-", "--seed", "1", "-q")],
        input=TEXT.encode(),
        capture_output=True,
        timeout=120,
        check=True,
    )
    data = done.stdout
    assert data[:4] == b"RIFF" and data[40:44] == b"\xff\xff\xff\xff"  # a stream's header
    chunks = reference.speakers["tiny"].stream(TEXT, seed=1)
    expected = np.concatenate([c.to_int16() for c in chunks])
    np.testing.assert_array_equal(np.frombuffer(data[44:], "<i2"), expected)
    assert done.stderr == b""


def test_pcm_to_stdout_and_file_input(
    test_voice: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    text_file = tmp_path / "in.txt"
    text_file.write_text(TEXT, encoding="utf-8")
    assert (
        main(_args(test_voice, "--file", str(text_file), "-o", "-", "--format", "pcm", "-q")) == 0
    )
    pcm = capsysbinary.readouterr().out
    assert len(pcm) % 2 == 0 and len(pcm) > 2 * 44100
    assert not pcm.startswith(b"RIFF")


@pytest.mark.parametrize("suffix", [".srt", ".vtt", ".json"])
def test_timings_files(test_voice: Path, tmp_path: Path, suffix: str) -> None:
    out, timings = tmp_path / "a.wav", tmp_path / f"a{suffix}"
    assert main(_args(test_voice, TEXT, "-o", str(out), "--timings", str(timings), "-q")) == 0
    text = timings.read_text("utf-8")
    with wave.open(io.BytesIO(out.read_bytes())) as w:
        duration = w.getnframes() / w.getframerate()
    if suffix == ".json":
        record = json.loads(text)
        assert record["duration"] == pytest.approx(duration, abs=1e-5)
        assert [s["text"] for s in record["sentences"]] == [
            "こんにちは。",
            "今日はいい天気ですね。",
        ]
        assert record["words"][0]["text"] == "こんにちは"
        ends = [s["end"] for s in record["phonemes"]]
        assert ends == sorted(ends) and ends[-1] <= duration + 1e-6
        # Phonemes only: the model's "_" blanks are merged into their neighbours.
        phones = [s["text"] for s in record["phonemes"]]
        assert "_" not in phones and phones[:5] == ["k", "o", "N", "n", "i"]
    else:
        assert "こんにちは。" in text and "今日はいい天気ですね。" in text
        separator = "," if suffix == ".srt" else "."
        times = [line for line in text.splitlines() if "-->" in line]
        assert len(times) == 2 and all(separator in t for t in times)
        assert text.startswith("1\n" if suffix == ".srt" else "WEBVTT\n")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--style", "Nope"], "unknown style 'Nope'"),
        (["--speaker-id", "nobody"], "unknown speaker 'nobody'"),
        (["--speed", "0"], "speed must be between"),
        (["--timings", "x.txt"], "--timings takes a .json, .srt or .vtt file"),
        (["--file", "/nonexistent/in.txt"], "cannot read /nonexistent/in.txt: no such file"),
    ],
)
def test_errors_are_one_line(
    test_voice: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    text = [] if "--file" in extra else [TEXT]
    assert main(_args(test_voice, *text, "-o", str(tmp_path / "x.wav"), *extra)) == 1
    err = capsys.readouterr().err
    assert err.startswith("yomiage generate: ") and message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "x.wav").exists()


def test_voice_and_text_are_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", TEXT, "-o", str(tmp_path / "x.wav")]) == 1
    assert "name a voice" in capsys.readouterr().err
    assert main(["generate", "--model", str(tmp_path), "-o", str(tmp_path / "x.wav")]) == 1
    assert "give the text" in capsys.readouterr().err
    assert main(["generate", "  ", "--model", str(tmp_path)]) == 1
    assert "empty" in capsys.readouterr().err
    assert main(["generate", TEXT, "--model", str(tmp_path / "none"), "-o", "x.wav"]) == 1
    assert "no such folder" in capsys.readouterr().err


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["generate", "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "--timings" in out and "--quantize" in out


def test_generate_imports_neither_torch_nor_the_server(test_voice: Path, tmp_path: Path) -> None:
    """The fast path: a short sentence should not pay for torch or FastAPI imports."""
    code = (
        "import sys\nfrom yomiage.cli import main\n"
        f"assert main({_args(test_voice, TEXT, '-o', str(tmp_path / 'a.wav'), '-q')!r}) == 0\n"
        "print(sorted(m for m in ('torch', 'transformers', 'fastapi', 'uvicorn') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_progress_bar_only_on_a_terminal(test_voice: Path, tmp_path: Path) -> None:
    import os
    import pty

    text = "今日はいい天気ですね。" * 4
    command = [*YOMIAGE, *_args(test_voice, text, "-o", str(tmp_path / "a.wav"))]
    master, slave = pty.openpty()
    try:
        done = subprocess.run(command, stderr=slave, stdout=subprocess.DEVNULL, timeout=120)
        os.close(slave)
        seen = b""
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not data:
                break
            seen += data
    finally:
        os.close(master)
    assert done.returncode == 0
    assert b"\r[" in seen and b"sentence" in seen and b"wrote " in seen
    piped = subprocess.run(command, capture_output=True, timeout=120, check=True)
    assert b"\r" not in piped.stderr and piped.stderr.startswith(b"wrote ")


@pytest.mark.parametrize(
    "command", ["generate", "serve", "voices", "download", "convert", "dict", "g2p", "dev"]
)
def test_every_command_has_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main([command, "--help"])
    assert caught.value.code == 0
    assert f"yomiage {command}" in capsys.readouterr().out.split("examples:", 1)[1]


def test_decoder_and_quick_start_flags(
    test_voice: Path, reference: TTS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q.wav"
    text = "駅前の小さな喫茶店で、古い友人と偶然再会して、学生時代の話に花を咲かせました。"
    assert main(_args(test_voice, text, "-o", str(out), "--seed", "1", "--quick-start")) == 0
    expected = reference.speakers["tiny"].generate(text, seed=1, quick_start=True)
    assert out.read_bytes() == expected.to_bytes("wav")
    capsys.readouterr()
    assert main(_args(test_voice, "はい。", "-o", str(out), "--decoder", "int8")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--decoder int8" in err


def test_verbose_names_the_runtime_precision_and_threads_of_each_voice(
    test_voice: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``-v`` did not say which engine, precision and threads ran the voice."""
    caplog.set_level("INFO", logger="yomiage.cli")
    assert main(_args(test_voice, TEXT, "-o", str(tmp_path / "a.wav"), "-q", "-v")) == 0
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("voice tiny:")]
    assert line.endswith("BERT q8, 2 threads"), line
    assert "ONNX Runtime" in line or "OpenVINO" in line, line


def test_mp3_output_says_it_is_encoding(
    test_voice: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bar sat full and silent for seconds while a long text was encoded to mp3."""
    pytest.importorskip("soundfile")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # the progress is on a terminal
    assert main(_args(test_voice, TEXT, "-o", str(tmp_path / "a.mp3"))) == 0
    err = capsys.readouterr().err
    assert "\rencoding mp3…" in err and "encoding mp3… done in " in err
    assert err.index("encoding mp3… done") < err.index("wrote ")
    assert main(_args(test_voice, TEXT, "-o", str(tmp_path / "a.wav"))) == 0
    assert "encoding" not in capsys.readouterr().err  # a WAV is written at once
