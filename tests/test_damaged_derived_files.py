"""Files the cache derives from a bundle are checked against the sha256 recorded when
they were made, before each use (issue 49, item 10).

The prober flipped 64 KiB inside the plan's 2-D decoder (``decoders/…/decoder.onnx.data``)
and inside an OpenVINO blob (``openvino/…/*.blob``), sizes unchanged: both loaded, and
``generate`` and ``serve`` spoke noise (-7.6 and -7.8 dB SNR against the right audio)
with no error, on every start. Now such a file is made again and the voice speaks
right. The flips here are the prober's, on the tiny voice; each file's time is moved
on as a later write moves it (a write within the same clock tick as the file's
making would keep it, which the check trusts)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.decoder_layouts import DecoderLayouts
from yomiage.runtime.engines.placement import OPENVINO, OPENVINO_FP32
from yomiage.runtime.engines.sessions import Sessions, probe_speaker

TINY = Path(__file__).parent / "data" / "voices" / "tiny"
DECODER = TINY / "decoder.onnx"


def _flip(path: Path, start: float, stop: float) -> None:
    """XOR the bytes between two fractions of ``path``, its size unchanged, its time
    moved on by a second."""
    data = bytearray(path.read_bytes())
    for i in range(int(len(data) * start), int(len(data) * stop)):
        data[i] ^= 0x55
    before = path.stat()
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))


def _decode(session: object) -> np.ndarray:
    rng = np.random.default_rng(0)
    speaker = probe_speaker(session, rng)  # type: ignore[arg-type]
    z = rng.standard_normal((1, 16, 40), dtype=np.float32)
    return np.asarray(session.run({"z": z, **speaker})[0])  # type: ignore[attr-defined]


def test_a_made_decoder_with_flipped_weights_is_made_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    layouts = DecoderLayouts(tmp_path / "decoders")
    made = layouts.graph(DECODER, "abc", 1)
    sessions = Sessions(1, openvino=False)
    right = _decode(sessions.open(DECODER))
    weights = made.with_name("decoder.onnx.data")
    size = weights.stat().st_size
    _flip(weights, 0.4, 0.4 + min(65536 / size, 0.3))  # 64 KiB, or what the tiny one has
    with caplog.at_level(logging.WARNING):
        again = layouts.graph(DECODER, "abc", 1)
    np.testing.assert_allclose(_decode(sessions.open(again)), right, atol=1e-5)
    assert again == made and weights.stat().st_size == size
    assert "decoder.onnx.data: its sha256 is not the one recorded" in caplog.text


def test_a_made_decoder_without_its_record_is_made_again_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Made by a version that recorded nothing: nothing is known against it, but nothing
    vouches for it either."""
    layouts = DecoderLayouts(tmp_path / "decoders")
    made = layouts.graph(DECODER, "abc", 1)
    (made.parent / "sha256.json").unlink()
    stamp = made.stat().st_mtime_ns
    os.utime(made, ns=(stamp, stamp - 5_000_000_000))
    with caplog.at_level(logging.INFO):
        assert layouts.graph(DECODER, "abc", 1) == made
    assert "never recorded" in caplog.text and "WARNING" not in caplog.text
    assert made.stat().st_mtime_ns != stamp - 5_000_000_000  # a new file
    assert (made.parent / "sha256.json").is_file()


def test_a_made_decoder_missing_its_weights_is_made_again(tmp_path: Path) -> None:
    layouts = DecoderLayouts(tmp_path / "decoders")
    made = layouts.graph(DECODER, "abc", 1)
    made.with_name("decoder.onnx.data").unlink()
    assert layouts.graph(DECODER, "abc", 1) == made
    assert made.with_name("decoder.onnx.data").is_file()


needs_openvino = pytest.mark.skipif(OPENVINO.version() is None, reason="OpenVINO not installed")


def _open_openvino(cache: Path) -> object:
    manifest = read_manifest(TINY)
    session = Sessions(1, cache_dir=cache, openvino=True).open(
        DECODER, OPENVINO_FP32, sha256=manifest.files["decoder.onnx"]
    )
    assert session.placement == OPENVINO_FP32
    return session


def _blob(cache: Path) -> Path:
    (blob,) = cache.rglob("*.blob")
    return blob


@needs_openvino
def test_a_flipped_openvino_blob_is_compiled_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "openvino"
    right = _decode(_open_openvino(cache))
    blob = _blob(cache)
    _flip(blob, 0.30, 0.35)  # inside the weights: loaded as they are, NaN came out
    with caplog.at_level(logging.WARNING):
        again = _decode(_open_openvino(cache))
    np.testing.assert_allclose(again, right, atol=1e-5)
    assert "its sha256 is not the one recorded" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO):  # the blob written anew is recorded: trusted now
        np.testing.assert_allclose(_decode(_open_openvino(cache)), right, atol=1e-5)
    assert "compiled again" not in caplog.text


@needs_openvino
def test_an_openvino_blob_nobody_recorded_is_compiled_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "openvino"
    right = _decode(_open_openvino(cache))
    blob = _blob(cache)
    (blob.parent / "sha256.json").unlink()
    _flip(blob, 0.30, 0.35)  # a cache from before the record, damaged since
    with caplog.at_level(logging.INFO):
        np.testing.assert_allclose(_decode(_open_openvino(cache)), right, atol=1e-5)
    assert "never recorded" in caplog.text


@needs_openvino
def test_a_damaged_blob_that_cannot_be_removed_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only cache (made here by a removal that fails): OpenVINO compiles the
    graph without the cache rather than map the damaged blob."""
    cache = tmp_path / "openvino"
    right = _decode(_open_openvino(cache))
    _flip(_blob(cache), 0.30, 0.35)
    original = Path.unlink

    def read_only(self: Path, missing_ok: bool = False) -> None:
        if self.suffix == ".blob":
            raise PermissionError(13, "Read-only file system", str(self))
        original(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", read_only)
    np.testing.assert_allclose(_decode(_open_openvino(cache)), right, atol=1e-5)


def test_a_copy_of_the_cache_keeps_its_records(tmp_path: Path) -> None:
    """A cache copied with its times (``cp -a``, a Docker layer) is trusted as it is."""
    layouts = DecoderLayouts(tmp_path / "decoders")
    made = layouts.graph(DECODER, "abc", 1)
    shutil.copytree(tmp_path / "decoders", tmp_path / "copy")
    copied = DecoderLayouts(tmp_path / "copy").graph(DECODER, "abc", 1)
    assert copied.stat().st_mtime_ns == made.stat().st_mtime_ns  # not made again
