"""Audio written as it is made: one spool for batch items, ``yomiage generate``'s file
and the server's whole responses (there were two, each with its own encoder)."""

from __future__ import annotations

import subprocess
import sys
import threading
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from yomiage.audio import Audio
from yomiage.audio.formats import rate_for
from yomiage.audio.resample import resample
from yomiage.audio.spool import BLOCK_SAMPLES, AudioSpool, SpooledAudio, write_file
from yomiage.errors import AudioFormatError, Cancelled


def _chunks(n: int, size: int) -> Iterator[np.ndarray]:
    """Chunks of odd sizes (not multiples of any block), louder as they go: the peak is
    in the last one, so a writer that scaled by an early peak would clip."""
    rng = np.random.default_rng(7)
    for k in range(n):
        yield (0.1 * (k + 1) * rng.standard_normal(size + 37 * k)).astype(np.float32)


def _decoded(data: bytes, tmp_path: Path, fmt: str) -> tuple[np.ndarray, int]:
    import soundfile

    path = tmp_path / f"decoded.{fmt}"
    path.write_bytes(data)
    samples, rate = soundfile.read(path, dtype="int16")
    path.unlink()
    return samples, rate


@pytest.mark.parametrize("fmt", ["wav", "pcm", "flac", "ogg", "opus", "mp3"])
def test_a_spool_is_encoded_into_what_audio_to_bytes_makes(tmp_path: Path, fmt: str) -> None:
    """Chunk by chunk into the spool (opus resampled to 48 kHz on the way, as batch
    does), then block by block into the file: the bytes of the whole result."""
    if fmt not in ("wav", "pcm"):
        pytest.importorskip("soundfile")
    kept = []
    with AudioSpool.beside(tmp_path / f"x.{fmt}", 44100, to_rate=rate_for(fmt, 44100)) as spool:
        for chunk in _chunks(12, 9000):
            spool.add(chunk)
            kept.append(chunk)
        audio = spool.finish()
        assert Path(audio.path).name.startswith(f".x.{fmt}.")
        out = tmp_path / f"x.{fmt}"
        size = write_file(audio, fmt, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # the spool is gone
    data = out.read_bytes()
    assert size == len(data)
    whole = Audio(np.concatenate(kept), 44100).to_bytes(fmt)
    if fmt in ("wav", "pcm", "flac"):
        assert data == whole
    else:  # an Ogg stream's serial number is drawn anew each time: compare the audio
        ours, rate = _decoded(data, tmp_path, fmt)
        theirs, _ = _decoded(whole, tmp_path, fmt)
        assert rate == rate_for(fmt, 44100)
        np.testing.assert_array_equal(ours, theirs)


def test_a_spool_resampled_when_encoded_is_scaled_by_the_resampled_peak(tmp_path: Path) -> None:
    """A rate asked for at the end (a server's ``sample_rate``) goes through a second
    spool beside the file, which is removed."""
    samples = np.concatenate(list(_chunks(6, 3 * BLOCK_SAMPLES // 5)))
    source = tmp_path / "source.f32"
    samples.tofile(source)
    audio = SpooledAudio(str(source), 44100, len(samples), float(np.abs(samples).max()))
    out = tmp_path / "out.wav"
    write_file(audio, "wav", out, sample_rate=16000)
    want = Audio(resample(samples, 44100, 16000), 16000).to_bytes("wav")
    assert out.read_bytes() == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.wav", "source.f32"]


def test_a_spool_that_cannot_be_resampled_beside_its_file_leaves_nothing(tmp_path: Path) -> None:
    source = tmp_path / "source.f32"
    np.ones(100, np.float32).tofile(source)
    audio = SpooledAudio(str(source), 44100, 100, 1.0)
    with pytest.raises(FileNotFoundError):
        write_file(audio, "wav", tmp_path / "gone" / "out.wav", sample_rate=16000)
    assert [p.name for p in tmp_path.iterdir()] == ["source.f32"]


def test_opus_at_a_rate_it_does_not_hold_is_refused_by_name(tmp_path: Path) -> None:
    pytest.importorskip("soundfile")
    source = tmp_path / "source.f32"
    np.ones(100, np.float32).tofile(source)
    with pytest.raises(AudioFormatError, match="opus cannot hold 44100 Hz"):
        write_file(SpooledAudio(str(source), 44100, 100, 1.0), "opus", tmp_path / "out.opus")


def test_a_spool_keeps_its_length_and_peak_and_resamples_as_it_goes(tmp_path: Path) -> None:
    chunks = list(_chunks(5, 4000))
    with AudioSpool(44100, to_rate=48000, folder=tmp_path) as spool:
        for chunk in chunks:
            spool.add(chunk)
        audio = spool.finish()
        stored = np.fromfile(audio.path, np.float32)
    whole = resample(np.concatenate(chunks), 44100, 48000)
    np.testing.assert_array_equal(stored, whole)
    assert (audio.sample_rate, audio.length) == (48000, len(whole))
    assert audio.peak == float(np.abs(whole).max())
    assert audio.seconds == pytest.approx(len(whole) / 48000)
    assert list(tmp_path.iterdir()) == []  # closed on leaving the block


def test_a_spool_closed_by_another_thread_cancels_the_next_add(tmp_path: Path) -> None:
    """A server's client that left closes the spool while its synthesis still runs:
    the next chunk stops that work, and the file is already gone."""
    spool = AudioSpool(44100, folder=tmp_path)
    spool.add(np.ones(10, np.float32))
    closer = threading.Thread(target=spool.close)
    closer.start()
    closer.join()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(Cancelled):
        spool.add(np.ones(10, np.float32))
    with pytest.raises(Cancelled):
        spool.finish()
    spool.close()  # again: nothing to do


def test_a_finished_spool_takes_no_more_samples(tmp_path: Path) -> None:
    with AudioSpool(44100, folder=tmp_path) as spool:
        spool.add(np.ones(10, np.float32))
        audio = spool.finish()
        with pytest.raises(RuntimeError, match="finished"):
            spool.add(np.ones(10, np.float32))
        assert audio.length == 10 and Path(audio.path).stat().st_size == 40


def test_a_silent_spool_is_written_as_silence(tmp_path: Path) -> None:
    with AudioSpool(22050, folder=tmp_path) as spool:
        spool.add(np.zeros(500, np.float32))
        spool.add(np.zeros(0, np.float32))
        write_file(spool.finish(), "wav", tmp_path / "out.wav")
    with wave.open(str(tmp_path / "out.wav")) as w:
        assert (w.getframerate(), w.getnframes()) == (22050, 500)
        assert not any(w.readframes(500))


def test_the_audio_package_stands_below_the_server_and_batch() -> None:
    """The spool both use is the audio package's: it imports neither of them."""
    code = (
        "import sys, yomiage.audio.spool\n"
        "print(sorted(m for m in sys.modules if m.startswith(('yomiage.server', "
        "'yomiage.batch', 'yomiage.cli'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
