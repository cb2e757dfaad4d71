"""What the cache's ``converted/`` folder keeps (issue 31, R13): a conversion killed midway
leaves a staging folder that the next conversion of it, or the next start, removes; a
conversion under way keeps its own."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.aivm_files import AIVMX
from yomiage.artifacts import aivmx_key, aivmx_once
from yomiage.runtime.bundle import sha256_file
from yomiage.sources.cache import Cache


def _left_by_a_killed_conversion(cache: Cache, key: str, suffix: str = "k1ll3d") -> Path:
    """What ``Cache.staging`` holds when its process is killed: ``.<key>.<random>``."""
    folder = cache.root / "converted" / f".{key}.{suffix}"
    (folder / "bundle").mkdir(parents=True)
    (folder / "bundle" / "encoder.onnx").write_bytes(b"\0" * 4096)
    return folder


def test_a_staging_folder_of_a_killed_conversion_goes_when_the_voice_converts_again(
    tmp_path: Path,
) -> None:
    """R13: four worker kills during installs left four staging folders for good."""
    voice = tmp_path / "voice.aivmx"
    shutil.copy(AIVMX, voice)
    cache = Cache.at(tmp_path / "cache")
    key = aivmx_key(sha256_file(voice))
    left = [_left_by_a_killed_conversion(cache, key, s) for s in ("a1", "b2")]
    other = _left_by_a_killed_conversion(cache, "voice-0123456789abcdef01234567")
    bundle = aivmx_once(voice, cache)
    assert (bundle / "voice.json").is_file() and bundle.name == key
    assert not any(p.exists() for p in left)
    assert other.exists()  # another key's: its own conversion, or the sweep, sees to it


def test_the_sweep_removes_abandoned_staging_folders_and_keeps_one_under_way(
    tmp_path: Path,
) -> None:
    cache = Cache.at(tmp_path)
    abandoned = _left_by_a_killed_conversion(cache, "aivmx-aaaa-v1")
    moved_aside = _left_by_a_killed_conversion(cache, "voice-bbbb", "old-12345")
    busy = _left_by_a_killed_conversion(cache, "aivmx-cccc-v1")
    done = cache.converted_dir("aivmx-dddd-v1")
    done.mkdir()
    (done / "voice.json").write_text("{}")
    with cache.lock("aivmx-cccc-v1"):  # a conversion running now (any process)
        removed = cache.sweep_converted()
    assert sorted(removed) == sorted([abandoned, moved_aside])
    assert busy.exists() and (done / "voice.json").exists()
    assert cache.sweep_converted() == [busy]
    assert Cache.at(tmp_path / "none").sweep_converted() == []  # no cache yet


def test_remove_converted_takes_a_bundle_out_whole(tmp_path: Path) -> None:
    cache = Cache.at(tmp_path)
    bundle = cache.converted_dir("aivmx-eeee-v1")
    bundle.mkdir(parents=True)
    (bundle / "voice.json").write_text("{}")
    assert cache.remove_converted("aivmx-eeee-v1") is True
    assert list((tmp_path / "converted").iterdir()) == []
    assert cache.remove_converted("aivmx-eeee-v1") is False
