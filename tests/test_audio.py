"""Audio containers, int16 conversion, streamed WAV headers, pauses and timings."""

from __future__ import annotations

import io
import struct
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from yomiage.audio import Audio, AudioChunk, wav_header
from yomiage.errors import AudioFormatError, MissingExtraError
from yomiage.synthesis.pauses import boundary_frames, gap_samples, trailing_silence
from yomiage.text.symbols import SYMBOL_TO_ID

SR = 44100


def _tone(seconds: float = 0.5, amplitude: float = 0.5) -> Audio:
    t = np.arange(int(SR * seconds)) / SR
    return Audio((amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32), SR)


def test_int16_is_peak_normalized_and_truncated() -> None:
    audio = Audio(np.array([0.5, -0.25, 0.1, 0.0], np.float32), SR)
    assert audio.to_int16().tolist() == [32767, -16383, 6553, 0]
    assert audio.to_int16(normalize=False).tolist() == [16383, -8191, 3276, 0]
    silent = Audio(np.zeros(4, np.float32), SR)
    assert silent.to_int16().tolist() == [0, 0, 0, 0]
    loud = AudioChunk(np.array([1.5, -2.0], np.float32), SR, 0, 0)
    assert loud.to_int16().tolist() == [32767, -32767]  # clipped, never wrapped


def test_wav_round_trip(tmp_path: Path) -> None:
    audio = _tone()
    path = audio.save(tmp_path / "out.wav")
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, SR)
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    np.testing.assert_array_equal(pcm, audio.to_int16())
    assert audio.to_bytes("pcm") == audio.to_int16().astype("<i2").tobytes()
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left


@pytest.mark.parametrize("fmt", ["flac", "ogg", "mp3"])
def test_compressed_formats(tmp_path: Path, fmt: str) -> None:
    soundfile = pytest.importorskip("soundfile")
    audio = _tone()
    path = audio.save(tmp_path / f"out.{fmt}")
    data, rate = soundfile.read(str(path), dtype="float32")
    assert rate == SR
    assert abs(len(data) - len(audio.samples)) < 0.1 * SR  # codecs pad a little
    if fmt == "flac":  # lossless
        np.testing.assert_array_equal((data * 32768).round().astype(np.int16), audio.to_int16())


def test_format_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    audio = _tone(0.05)
    with pytest.raises(AudioFormatError, match="suffix"):
        audio.save(tmp_path / "out.xyz")
    with pytest.raises(AudioFormatError, match="unknown audio format"):
        audio.to_bytes("aac")
    monkeypatch.setitem(sys.modules, "soundfile", None)
    with pytest.raises(MissingExtraError, match=r"yomiage\[audio\]"):
        audio.save(tmp_path / "out.flac")
    assert not list(tmp_path.iterdir())
    audio.save(tmp_path / "still.wav")  # wav needs nothing


def test_streamed_wav_header() -> None:
    header = wav_header(SR)
    assert len(header) == 44 and header[:4] == b"RIFF" and header[8:16] == b"WAVEfmt "
    assert struct.unpack("<I", header[40:44])[0] == 0xFFFFFFFF
    chunks = [AudioChunk(_tone(0.1).samples, SR, 0, 0), AudioChunk(_tone(0.1).samples, SR, 0, 0)]
    sized = wav_header(SR, sum(len(c.samples) for c in chunks))
    body = b"".join(c.to_pcm_bytes() for c in chunks)
    with wave.open(io.BytesIO(sized + body)) as w:
        assert w.getnframes() == sum(len(c.samples) for c in chunks)
        assert w.getframerate() == SR


def test_trailing_silence_and_gaps() -> None:
    speech = _tone(0.2).samples
    assert trailing_silence(speech, SR) == 0.0
    padded = np.concatenate([speech, np.zeros(int(0.05 * SR), np.float32)])
    assert trailing_silence(padded, SR) == pytest.approx(0.05, abs=0.0101)
    assert trailing_silence(np.zeros(1000, np.float32), SR) == pytest.approx(1000 / SR)
    assert trailing_silence(np.ones(10, np.float32), SR) == 0.0  # shorter than a window
    assert gap_samples(0.2, 0.0, SR) == int(SR * 0.2)
    assert gap_samples(0.2, 0.15, SR) == int(SR * (0.2 - 0.15))
    assert gap_samples(0.01, 0.0, SR) == int(SR * 0.08)  # the floor
    assert gap_samples(None, 0.0, SR) == int(SR * 0.08)
    assert gap_samples(0.2, 0.3, SR) == 0


def test_boundary_frames_merge_marks_and_take_blanks() -> None:
    blank, a, dot, ex, q = (SYMBOL_TO_ID[s] for s in ("_", "a", ".", "!", "?"))
    ids = np.array([blank, a, blank, ex, blank, q, blank, a, blank, dot, blank])
    durations = np.array([1, 5, 2, 3, 4, 6, 7, 5, 1, 2, 3])
    # "!?" is one boundary at "?": 6 + blanks 4 and 7; "." at the end: 2 + 1 + 3.
    assert boundary_frames(ids, durations) == [17, 6]


_LONG_AUDIO_PROBE = """
import sys
import numpy as np
from yomiage.audio import Audio

seconds, fmt, path = float(sys.argv[1]), sys.argv[2], sys.argv[3]
sr = 44100
t = np.arange(int(sr * seconds), dtype=np.float32) / sr
audio = Audio((0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), sr)
audio.save(path)
"""


@pytest.mark.parametrize("fmt", ["ogg", "opus", "mp3", "flac", "wav"])
def test_long_audio_in_every_format(tmp_path: Path, fmt: str) -> None:
    """libsndfile's Vorbis encoder crashed (SIGSEGV) on ~48 s or more written in one call."""
    pytest.importorskip("soundfile")
    import subprocess

    import soundfile

    path = tmp_path / f"long.{fmt}"
    run = subprocess.run(
        [sys.executable, "-c", _LONG_AUDIO_PROBE, "120", fmt, str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-500:]
    info = soundfile.info(str(path))
    assert info.duration == pytest.approx(120, abs=0.1)


def test_opus_at_an_unsupported_rate_is_resampled_by_audio() -> None:
    pytest.importorskip("soundfile")
    import soundfile

    data = _tone(1.0).to_bytes("opus")
    assert soundfile.info(io.BytesIO(data)).samplerate == 48000
    from yomiage.audio.formats import encode

    with pytest.raises(AudioFormatError, match="opus cannot hold 44100 Hz"):
        encode(_tone().to_int16(), SR, "opus")
