"""A voice converted on first use is converted again when what converting writes changes
(``converted.CONVERT_REVISION``), and an upgrade never takes a working voice away: without
torch, or when converting again fails, the earlier conversion serves."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest

from yomiage import converted
from yomiage.converted import CONVERT_REVISION, converted_voice
from yomiage.errors import MissingExtraError
from yomiage.runtime.bundle import FORMAT_VERSION
from yomiage.sources.cache import Cache


def _sbv2_folder(root: Path) -> Path:
    """Enough of an SBV2 folder for the cache key (the key reads names, sizes, times)."""
    folder = root / "voice"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "G_100.safetensors").write_bytes(b"\0" * 64)
    return folder


def _key_before_revisions(folder: Path, extra: str = "") -> str:
    """The key every version before revisions gave a converted voice, written out."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    described = [
        (str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files
    ]
    blob = json.dumps(["voice", FORMAT_VERSION, extra, str(folder.resolve()), described])
    return f"voice-{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


def _bundle_at(cache: Cache, key: str, made_by: str) -> Path:
    folder = cache.converted_dir(key)
    folder.mkdir(parents=True)
    (folder / "voice.json").write_text(json.dumps({"made_by": made_by}))
    (folder / "decoder.onnx").write_bytes(made_by.encode() * 100)
    return folder


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))}


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    return Cache.at(tmp_path / "cache")


@pytest.fixture
def converts(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Today's conversion, without torch's work: writes a bundle marked "today"."""
    calls: list[Path] = []

    def convert_voice(source: Path, out: Path, progress: object = None) -> None:
        calls.append(source)
        out.mkdir(parents=True)
        (out / "decoder.onnx").write_bytes(b"today")
        (out / "voice.json").write_text(json.dumps({"made_by": "today"}))

    monkeypatch.setattr(converted, "torch_installed", lambda: True)
    monkeypatch.setattr(converted, "_export_voice", convert_voice)
    return calls


def _made_by(bundle: Path) -> str:
    return str(json.loads((bundle / "voice.json").read_text())["made_by"])


def _converted_keys(cache: Cache) -> list[str]:
    return sorted(p.name for p in (cache.root / "converted").iterdir())


def test_a_voice_converted_by_an_earlier_version_is_converted_again_once(
    tmp_path: Path, cache: Cache, converts: list[Path]
) -> None:
    folder = _sbv2_folder(tmp_path)
    earlier = _bundle_at(cache, _key_before_revisions(folder), "earlier")
    bundle = converted_voice(folder, cache)
    assert _made_by(bundle) == "today" and converts == [folder]
    assert bundle.name != earlier.name
    assert not earlier.exists()  # it would only cost disk from now on
    assert _converted_keys(cache) == [bundle.name]
    assert converted_voice(folder, cache) == bundle and len(converts) == 1  # once


def test_one_checkpoint_of_a_folder_is_keyed_apart_and_converted_again(
    tmp_path: Path, cache: Cache, converts: list[Path]
) -> None:
    folder = _sbv2_folder(tmp_path)
    checkpoint = folder / "G_100.safetensors"
    earlier = _bundle_at(cache, _key_before_revisions(folder, checkpoint.name), "earlier")
    whole = _bundle_at(cache, _key_before_revisions(folder), "the folder's newest")
    bundle = converted_voice(folder, cache, checkpoint)
    assert _made_by(bundle) == "today" and converts == [checkpoint]
    assert not earlier.exists() and whole.exists()  # another source's bundle stays


def test_without_torch_the_earlier_conversion_serves_and_says_why(
    tmp_path: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _sbv2_folder(tmp_path)
    earlier = _bundle_at(cache, _key_before_revisions(folder), "earlier")
    before = _snapshot(earlier)
    monkeypatch.setattr(converted, "torch_installed", lambda: False)
    with caplog.at_level(logging.WARNING, logger="yomiage.converted"):
        bundle = converted_voice(folder, cache)
    assert bundle == earlier and _snapshot(earlier) == before
    assert _converted_keys(cache) == [earlier.name]
    assert "earlier yomiage" in caplog.text and "install torch" in caplog.text


def test_without_torch_and_no_earlier_conversion_it_names_the_extra(
    tmp_path: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(converted, "torch_installed", lambda: False)
    with pytest.raises(MissingExtraError, match="torch"):
        converted_voice(_sbv2_folder(tmp_path), cache)


@pytest.mark.parametrize("fault", [RuntimeError("an exporter bug"), OSError(28, "No space")])
def test_converting_again_that_fails_midway_leaves_the_earlier_serving(
    tmp_path: Path,
    cache: Cache,
    converts: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: Exception,
) -> None:
    folder = _sbv2_folder(tmp_path)
    earlier = _bundle_at(cache, _key_before_revisions(folder), "earlier")
    before = _snapshot(earlier)

    def half_then_fail(source: Path, out: Path, progress: object = None) -> None:
        out.mkdir(parents=True)
        (out / "encoder.onnx").write_bytes(b"half")
        raise fault

    monkeypatch.setattr(converted, "_export_voice", half_then_fail)
    with caplog.at_level(logging.WARNING, logger="yomiage.converted"):
        bundle = converted_voice(folder, cache)
    assert bundle == earlier and _snapshot(earlier) == before
    assert _converted_keys(cache) == [earlier.name]  # no half bundle, no staging folder
    assert "converting it again failed" in caplog.text


def test_a_failed_first_conversion_still_raises(
    tmp_path: Path, cache: Cache, converts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(source: Path, out: Path, progress: object = None) -> None:
        raise RuntimeError("an exporter bug")

    monkeypatch.setattr(converted, "_export_voice", fail)
    with pytest.raises(RuntimeError, match="an exporter bug"):
        converted_voice(_sbv2_folder(tmp_path), cache)
    assert _converted_keys(cache) == []


def test_an_earlier_bundle_that_cannot_be_removed_costs_disk_not_the_load(
    tmp_path: Path,
    cache: Cache,
    converts: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = _sbv2_folder(tmp_path)
    _bundle_at(cache, _key_before_revisions(folder), "earlier")

    def refuse(self: Cache, key: str) -> bool:
        raise PermissionError(13, "Permission denied", key)

    monkeypatch.setattr(Cache, "remove_converted", refuse)
    with caplog.at_level(logging.WARNING, logger="yomiage.converted"):
        bundle = converted_voice(folder, cache)
    assert _made_by(bundle) == "today"
    assert "could not remove the converted bundle" in caplog.text


def test_the_revision_is_in_the_key_from_two_on() -> None:
    assert CONVERT_REVISION >= 2  # the decoder's trims and 2-D stages are revision 2
    assert converted._revised("G_1.safetensors", 1) == "G_1.safetensors"
    assert converted._revised("", CONVERT_REVISION) != ""
