"""What the cache's ``converted/`` folder keeps (issue 31, R13): a conversion killed midway
leaves a staging folder that the next conversion of it, or the next start, removes; a
conversion under way keeps its own; a bundle that goes takes what running it made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.aivm_files import AIVMX
from yomiage.converted import aivmx_key, aivmx_once, remove_aivmx_cuts
from yomiage.errors import CacheError
from yomiage.runtime import derived
from yomiage.runtime.bundle import sha256_file
from yomiage.runtime.derived import COMPILED_DIR, LAYOUTS_DIR, bundle_files, remove_derived
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


def _earlier_cut(cache: Cache, sha256: str) -> Path:
    """A cut as yomiage before the stage trims kept it: ``aivmx-<sha>-v1``, no ``-cut``."""
    folder = cache.converted_dir(f"aivmx-{sha256[:32]}-v1")
    folder.mkdir(parents=True)
    (folder / "voice.json").write_text('{"format": "earlier"}')
    return folder


def test_a_voice_cut_by_an_earlier_version_is_cut_again_and_the_old_cut_goes(
    tmp_path: Path,
) -> None:
    """Cuts are cached by the file's hash: without a cut number in the key, a voice cut
    before the stage trims would decode whole windows for as long as the file is kept."""
    voice = tmp_path / "voice.aivmx"
    shutil.copy(AIVMX, voice)
    cache = Cache.at(tmp_path / "cache")
    old = _earlier_cut(cache, sha256_file(voice))
    another_files = _earlier_cut(cache, "f" * 64)
    bundle = aivmx_once(voice, cache)
    assert bundle.name == aivmx_key(sha256_file(voice)) != old.name
    assert "decoder_stages" in json.loads((bundle / "voice.json").read_text())
    assert not old.exists()
    assert another_files.exists()
    prefix = f"aivmx-{sha256_file(voice)[:32]}-"
    cuts = [p.name for p in (cache.root / "converted").iterdir() if p.name.startswith(prefix)]
    assert cuts == [bundle.name]


@pytest.mark.parametrize(
    ("error", "raised"),
    [(RuntimeError("unexpected"), RuntimeError), (OSError(28, "No space left"), CacheError)],
)
def test_a_cut_that_fails_midway_leaves_the_earlier_cut_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, raised: type
) -> None:
    voice = tmp_path / "voice.aivmx"
    shutil.copy(AIVMX, voice)
    cache = Cache.at(tmp_path / "cache")
    old = _earlier_cut(cache, sha256_file(voice))
    from yomiage.aivmx import bundle as aivmx_bundle

    real = aivmx_bundle.write_bundle

    def fails_after_writing(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise error

    monkeypatch.setattr(aivmx_bundle, "write_bundle", fails_after_writing)
    with pytest.raises(raised):
        aivmx_once(voice, cache)
    assert sorted(p.name for p in (cache.root / "converted").iterdir()) == [old.name]
    assert json.loads((old / "voice.json").read_text()) == {"format": "earlier"}


def test_forgetting_a_file_removes_its_cuts_by_every_version(tmp_path: Path) -> None:
    """An uninstall after an upgrade: the file's cut by this version and by an earlier one."""
    from yomiage.server.voicevox.aivm_bundles import Content, ConvertedBundles

    cache = Cache.at(tmp_path)
    sha = "a" * 64
    old = _earlier_cut(cache, sha)
    current = cache.converted_dir(aivmx_key(sha))
    current.mkdir()
    kept = _earlier_cut(cache, "b" * 64)
    nothing_installed = SimpleNamespace(installed=dict)
    bundles = ConvertedBundles(cache, nothing_installed, dict)  # type: ignore[arg-type]
    assert bundles.forget(Content(sha, 1)) is True
    assert not old.exists() and not current.exists() and kept.exists()
    assert bundles.forget(Content(sha, 1)) is False


def _cut_with_files(cache: Cache, key: str, decoder: str, data: str) -> Path:
    folder = cache.converted_dir(key)
    folder.mkdir(parents=True)
    files = {"decoder.onnx": decoder, "decoder.onnx.data": data, "flow.onnx": "f" * 64}
    (folder / "voice.json").write_text(json.dumps({"files": files}))
    return folder


def _made_from(cache: Cache, decoder: str, data: str) -> list[Path]:
    """What running a bundle with that decoder leaves in the cache: the decoder in another
    layout and OpenVINO's compiled forms of it (two OpenVINO folders)."""
    made = [
        cache.root / LAYOUTS_DIR / f"{decoder[:16]}{data[:16]}-2d128",
        cache.root / COMPILED_DIR / "2026.4.1-form2" / decoder,
        cache.root / COMPILED_DIR / "2026.5.0-form2" / decoder,
    ]
    for folder in made:
        folder.mkdir(parents=True)
        (folder / "x.blob").write_bytes(b"\0" * 64)
    return made


def test_an_uninstalled_voice_takes_what_running_it_made_with_it(tmp_path: Path) -> None:
    """A relaid decoder and OpenVINO's blobs (~57 MB each for the full-size voice) are the
    voice's as much as its bundle; another voice's stay."""
    from yomiage.server.voicevox.aivm_bundles import Content, ConvertedBundles

    cache = Cache.at(tmp_path)
    sha = "a" * 64
    _cut_with_files(cache, aivmx_key(sha), "d" * 64, "e" * 64)
    made = _made_from(cache, "d" * 64, "e" * 64)
    _cut_with_files(cache, aivmx_key("b" * 64), "1" * 64, "2" * 64)
    others = _made_from(cache, "1" * 64, "2" * 64)
    bundles = ConvertedBundles(cache, SimpleNamespace(installed=dict), dict)  # type: ignore[arg-type]
    assert bundles.forget(Content(sha, 1)) is True
    assert not any(p.exists() for p in made)
    assert all(p.exists() for p in others)


def test_a_cut_made_again_keeps_what_it_shares_with_the_one_it_replaces(tmp_path: Path) -> None:
    cache = Cache.at(tmp_path)
    sha = "a" * 64
    old = _cut_with_files(cache, f"aivmx-{sha[:32]}-v1", "d" * 64, "e" * 64)
    new = _cut_with_files(cache, aivmx_key(sha), "d" * 64, "e" * 64)  # the same decoder
    made = _made_from(cache, "d" * 64, "e" * 64)
    assert remove_aivmx_cuts(sha, cache, keep=new.name) is True
    assert not old.exists() and new.exists()
    assert all(p.exists() for p in made)


def test_what_cannot_be_removed_is_left_with_a_warning_and_nothing_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = Cache.at(tmp_path)
    _cut_with_files(cache, "k", "d" * 64, "e" * 64)
    made = _made_from(cache, "d" * 64, "e" * 64)
    monkeypatch.setattr(derived.shutil, "rmtree", lambda *a, **k: None)  # a file held open
    with caplog.at_level("WARNING"):
        assert remove_derived(cache.root, bundle_files(cache.converted_dir("k"))) == []
    assert all(p.exists() for p in made)
    assert "could not remove" in caplog.text


def test_a_bundle_that_cannot_be_removed_keeps_what_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundle goes first: where it stays, so does what serves it."""
    cache = Cache.at(tmp_path)
    sha = "a" * 64
    cut = _cut_with_files(cache, aivmx_key(sha), "d" * 64, "e" * 64)
    made = _made_from(cache, "d" * 64, "e" * 64)

    def refuse(key: str) -> bool:
        raise CacheError(f"cannot remove {key}")

    monkeypatch.setattr(Cache, "remove_converted", lambda self, key: refuse(key))
    assert remove_aivmx_cuts(sha, cache) is False
    assert cut.exists() and all(p.exists() for p in made)


def test_a_bundle_without_a_readable_manifest_goes_alone(tmp_path: Path) -> None:
    cache = Cache.at(tmp_path)
    old = _earlier_cut(cache, "a" * 64)  # its voice.json names no files
    made = _made_from(cache, "d" * 64, "e" * 64)
    assert remove_aivmx_cuts("a" * 64, cache) is True
    assert not old.exists() and all(p.exists() for p in made)
