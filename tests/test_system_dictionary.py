"""The bundled OpenJTalk dictionaries: packed in the wheel (issue 49, item 19: the user
install weighed 712 MB, 206 of them two unpacked dictionaries), unpacked once into the
cache, checked against their pins, unpacked again when damaged, and readable from a
read-only cache or, with no writable cache, from a private temporary folder."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from yomiage.errors import DictionaryNotFoundError
from yomiage.text.system_dictionary import pack as pack_format
from yomiage.text.system_dictionary import place
from yomiage.text.system_dictionary.pack import PackError, Pin
from yomiage.text.system_dictionary.pins import PACK_NAME, PINS

NAMES = ("dic_a", "dic_b")


def _sys_dic(seed: int, entries: int) -> bytes:
    """A file laid out as MeCab's sys.dic: header, trie units, tokens, features."""
    rng = np.random.default_rng(seed)
    units = 4 * entries
    index = np.arange(units, dtype=np.int64)
    check = np.where(rng.random(units) < 0.1, 0, index - rng.integers(0, 257, units))
    base = np.where(rng.random(units) < 0.3, -rng.integers(1, 1 << 20, units), index + 40)
    trie = np.stack([base, np.maximum(check, 0)], axis=1).astype("<u4").tobytes()
    tokens = np.zeros((entries, 4), dtype="<u4")
    tokens[:, 0] = rng.integers(0, 1377, entries) * 0x10001
    tokens[:, 1] = (rng.integers(0, 60, entries) | (rng.integers(-900, 900, entries) << 16)) & (
        0xFFFFFFFF
    )
    features = b"".join(
        f"名詞,一般,*,*,*,*,語{i},ゴ{i % 50},ゴ{i % 50},1/2,C{i % 5}\0".encode()
        for i in range(entries)
    )
    tokens[:, 2] = np.cumsum([0, *[len(f) + 1 for f in features.split(b"\0")[:-2]]])
    header = struct.pack("<10I32s", 0xE954_0000 + seed, 102, 0, entries, 1377, 1377,
                         len(trie), tokens.nbytes, len(features), 0, b"utf-8")  # fmt: skip
    return header + trie + tokens.tobytes() + features


def _matrix(seed: int) -> bytes:
    costs = np.random.default_rng(seed).integers(-3000, 3000, (7, 9)).cumsum(axis=1)
    return struct.pack("<2H", 9, 7) + costs.astype("<i2").tobytes()


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Pin]]]:
    """Two small dictionaries, the second a variant of the first, and their pack."""
    root = tmp_path_factory.mktemp("dictionaries")
    folders = []
    for seed, name in enumerate(NAMES):
        folder = root / name
        folder.mkdir()
        (folder / "sys.dic").write_bytes(_sys_dic(seed, 300 + seed))
        (folder / "matrix.bin").write_bytes(_matrix(seed))
        (folder / "char.bin").write_bytes(bytes(range(256)) * 4)
        (folder / "COPYING").write_text(f"licence of {name}\n")
        folders.append(folder)
    data = root / "package_data"
    data.mkdir()
    pins = pack_format.pack(folders, data / PACK_NAME)
    return data, pins


@pytest.fixture
def installed(
    small_pack: tuple[Path, dict[str, dict[str, Pin]]], monkeypatch: pytest.MonkeyPatch
) -> dict[str, dict[str, Pin]]:
    """yomiage as a wheel installs it, with the small pack in place of the real one."""
    data, pins = small_pack
    monkeypatch.setattr(place, "package_data", lambda: data)
    as_tuples = {n: {f: (p.size, p.sha256) for f, p in files.items()} for n, files in pins.items()}
    monkeypatch.setattr(place, "PINS", as_tuples)
    monkeypatch.setattr(place, "_PRIVATE", place._PrivateCopies())
    return pins


def _files(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.iterdir()
        if p.name != place.CHECKED
    }


# -- the format ---------------------------------------------------------------------
def test_each_rewrite_is_undone_exactly() -> None:
    data = _sys_dic(7, 500)
    _, trie, tokens, _ = pack_format.sys_dic_sections(data)
    assert pack_format.decode_trie(pack_format.encode_trie(trie)) == trie
    assert pack_format.encode_trie(trie) != trie
    assert pack_format.decode_tokens(pack_format.encode_tokens(tokens)) == tokens
    matrix = _matrix(3)
    assert pack_format.decode_matrix(pack_format.encode_matrix(matrix)) == matrix


def test_a_pack_gives_back_every_file_of_each_dictionary(
    small_pack: tuple[Path, dict[str, dict[str, Pin]]], tmp_path: Path
) -> None:
    data, pins = small_pack
    for name in NAMES:
        out = tmp_path / name
        out.mkdir()
        pack_format.unpack(data / PACK_NAME, name, out, pins[name])
        source = data.parent / name
        assert _files(out) == _files(source)


def test_a_file_unlike_its_pin_is_refused(
    small_pack: tuple[Path, dict[str, dict[str, Pin]]], tmp_path: Path
) -> None:
    data, pins = small_pack
    wrong = dict(pins["dic_b"])
    wrong["sys.dic"] = Pin(wrong["sys.dic"].size, "0" * 64)
    with pytest.raises(PackError, match=r"sys\.dic"):
        pack_format.unpack(data / PACK_NAME, "dic_b", tmp_path, wrong)


def test_a_damaged_pack_is_refused(
    small_pack: tuple[Path, dict[str, dict[str, Pin]]], tmp_path: Path
) -> None:
    data, pins = small_pack
    damaged = tmp_path / "damaged.pack"
    blob = bytearray((data / PACK_NAME).read_bytes())
    with zipfile.ZipFile(data / PACK_NAME) as archive:
        info = archive.getinfo("features.xz")  # a stream every dictionary reads
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    blob[start + info.compress_size // 2] ^= 0xFF
    damaged.write_bytes(bytes(blob))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(PackError):
        pack_format.unpack(damaged, "dic_a", out, pins["dic_a"])


# -- where it is unpacked -----------------------------------------------------------
def test_first_use_unpacks_into_the_cache_once(
    installed: dict[str, dict[str, Pin]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = place.dictionary_dir("dic_b", tmp_path / "cache")
    assert folder == place.cached_dir(tmp_path / "cache", "dic_b")
    assert _files(folder) == {f: p.sha256 for f, p in installed["dic_b"].items()}

    def no_unpacking(*args: object) -> None:
        raise AssertionError("unpacked again")

    monkeypatch.setattr(place, "unpack", no_unpacking)
    assert place.dictionary_dir("dic_b", tmp_path / "cache") == folder


def test_a_damaged_unpacked_dictionary_is_unpacked_again(
    installed: dict[str, dict[str, Pin]], tmp_path: Path
) -> None:
    folder = place.dictionary_dir("dic_a", tmp_path)
    sys_dic = folder / "sys.dic"
    blob = bytearray(sys_dic.read_bytes())
    blob[100] ^= 0xFF  # same size, a later time
    sys_dic.write_bytes(bytes(blob))
    os.utime(sys_dic, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert place.dictionary_dir("dic_a", tmp_path) == folder
    assert _files(folder)["sys.dic"] == installed["dic_a"]["sys.dic"].sha256

    (folder / "matrix.bin").unlink()  # a file gone: unpacked again as well
    assert place.dictionary_dir("dic_a", tmp_path) == folder
    assert _files(folder) == {f: p.sha256 for f, p in installed["dic_a"].items()}


def test_an_unpacking_cut_short_is_never_taken_for_a_dictionary(
    installed: dict[str, dict[str, Pin]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = place.cached_dir(tmp_path, "dic_a")
    # What a process killed while unpacking leaves: its staging folder, half written.
    left = target.with_name(f".{target.name}.abandoned")
    left.mkdir(parents=True)
    (left / "sys.dic").write_bytes(b"half")
    real_unpack = place.unpack

    def interrupted(pack: Path, name: str, out: Path, pins: dict[str, Pin]) -> None:
        (out / "sys.dic").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(place, "unpack", interrupted)
    with pytest.raises(KeyboardInterrupt):
        place.dictionary_dir("dic_a", tmp_path)
    assert not target.exists()
    assert sorted(p.name for p in target.parent.iterdir()) == [left.name]
    monkeypatch.setattr(place, "unpack", real_unpack)
    assert place.dictionary_dir("dic_a", tmp_path) == target
    assert _files(target) == {f: p.sha256 for f, p in installed["dic_a"].items()}


def test_threads_unpack_a_dictionary_once(
    installed: dict[str, dict[str, Pin]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real_unpack = place.unpack

    def counted(*args: object) -> None:
        calls.append(args)
        real_unpack(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(place, "unpack", counted)
    found: list[Path] = []
    threads = [
        threading.Thread(target=lambda: found.append(place.dictionary_dir("dic_b", tmp_path)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert found == [place.cached_dir(tmp_path, "dic_b")] * 4


def test_without_a_writable_cache_a_private_copy_is_used_and_removed(
    installed: dict[str, dict[str, Pin]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cache = blocker / "cache"  # cannot be made, even by root
    folder = place.dictionary_dir("dic_a", cache)
    assert _files(folder) == {f: p.sha256 for f, p in installed["dic_a"].items()}
    assert "for this process only" in caplog.text
    assert place.dictionary_dir("dic_a", cache) == folder  # one copy per process
    place._PRIVATE.remove_all()
    assert not folder.exists()


def test_with_nothing_writable_the_error_says_what_to_do(
    installed: dict[str, dict[str, Pin]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr("tempfile.tempdir", str(blocker / "tmp"))
    with pytest.raises(DictionaryNotFoundError, match="YOMIAGE_CACHE"):
        place.dictionary_dir("dic_a", blocker / "cache")


def test_a_missing_pack_says_to_reinstall(
    installed: dict[str, dict[str, Pin]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(place, "package_data", lambda: tmp_path / "empty")
    with pytest.raises(DictionaryNotFoundError, match="reinstall"):
        place.dictionary_dir("dic_a", tmp_path / "cache")


def test_a_checkouts_unpacked_folder_is_used_as_it_is(
    installed: dict[str, dict[str, Pin]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    shutil.copytree(place.package_data(), data)
    shutil.copytree(place.package_data().parent / "dic_a", data / "dic_a")
    monkeypatch.setattr(place, "package_data", lambda: data)
    assert place.dictionary_dir("dic_a", tmp_path / "cache") == data / "dic_a"
    assert not (tmp_path / "cache").exists()


_READ_ONLY = """
import sys, tempfile
from pathlib import Path
from yomiage.text.system_dictionary import place
data, cache = Path(sys.argv[1]), Path(sys.argv[2])
place.package_data = lambda: data
place.PINS = {"dic_a": eval(sys.argv[3])}
tempfile.tempdir = str(Path(sys.argv[4]) / "no-tmp")
print(place.dictionary_dir("dic_a", cache))
"""


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare for a read-only mount",
)
def test_a_read_only_cache_filled_ahead_is_read(
    installed: dict[str, dict[str, Pin]], tmp_path: Path
) -> None:
    """A cache filled at an image's build and mounted read-only: read, even with its
    files' times changed (hashed again, not remembered), and nothing is unpacked."""
    cache = tmp_path / "cache"
    folder = place.dictionary_dir("dic_a", cache)
    for path in folder.iterdir():
        os.utime(path, ns=(1, 10**18))
    pins = repr({f: (p.size, p.sha256) for f, p in installed["dic_a"].items()})
    script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    cmd = ["unshare", "-m", "sh", "-c", script, "sh", str(cache), sys.executable, "-c",
           _READ_ONLY, str(place.package_data()), str(cache), pins, str(tmp_path)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0 and "mount" in out.stderr:
        pytest.skip(f"cannot mount read-only here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(folder)


# -- the pack yomiage ships -----------------------------------------------------------
@pytest.fixture(scope="module")
def wheel_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's _data as a wheel installs it: the pack alone, nothing unpacked."""
    data = tmp_path_factory.mktemp("wheel_data")
    (data / PACK_NAME).symlink_to(place.package_data() / PACK_NAME)
    return data


@pytest.mark.parametrize("name", sorted(PINS))
def test_the_bundled_pack_gives_each_dictionary_as_pinned(
    name: str, wheel_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unpacked the way an installed yomiage does, every file matches its pin, and
    OpenJTalk reads from it exactly as from the checkout's unpacked copy."""
    from yomiage.text.openjtalk import OpenJTalk

    checkout = place.dictionary_dir(name)
    monkeypatch.setattr(place, "package_data", lambda: wheel_data)
    folder = place.dictionary_dir(name, tmp_path)
    assert folder == place.cached_dir(tmp_path, name)
    assert _files(folder) == {file: sha256 for file, (_, sha256) in PINS[name].items()}
    text = "今日は良い天気ですね。他の人に聞いた話では、明日は雨らしい。"
    assert OpenJTalk(folder).analyze(text) == OpenJTalk(checkout).analyze(text)


def test_sbv2s_dictionary_is_the_one_the_reference_used() -> None:
    from tests.conftest import require_fixtures
    from yomiage.text.openjtalk import READING_DICTIONARIES

    meta = json.loads((require_fixtures() / "g2p" / "g2p_cases.json").read_text("utf-8"))
    name = READING_DICTIONARIES["sbv2"]
    assert meta["versions"]["openjtalk_dictionary"] == name
    assert PINS[name]["sys.dic"][1] == meta["versions"]["openjtalk_sys_dic_sha256"]
