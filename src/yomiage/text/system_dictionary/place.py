"""Where a compiled OpenJTalk dictionary is read from, unpacked once and checked.

MeCab maps a dictionary from files in a folder, and cannot read it compressed.
The wheel carries the dictionaries packed (:mod:`.pack`); the first analyser
for a reading unpacks its dictionary (103 MB) into the yomiage cache
(``$YOMIAGE_CACHE/openjtalk/<name>-<sha256>/``, else the user cache folder),
whole or not at all (a staging folder renamed into place, under the cache's
lock), where every later process of every user of that cache finds it. Its
files are checked against :data:`~.pins.PINS` as they are written, and before
each use by size and modification time (hashed again if either changed); a
damaged copy is unpacked again.

Where the cache cannot be written (a read-only home, a container's read-only
root), the dictionary goes into a temporary folder of this process's own,
removed when it exits: the first analyser of each process then pays the
unpacking (~1.5 s) and 103 MB of temporary space. Nothing is ever downloaded.

A checkout's editable install has the dictionaries unpacked beside the pack
(``hatch_build.py``), and they are used from there: a test suite that gives
each test a cache of its own would otherwise unpack them in every test.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path

from yomiage.atomic import write_atomic
from yomiage.errors import CacheError, DictionaryNotFoundError
from yomiage.text.system_dictionary.pack import SYS_DIC, PackError, Pin, unpack
from yomiage.text.system_dictionary.pins import PACK_NAME, PINS

log = logging.getLogger(__name__)

CACHE_DIR = "openjtalk"  # under the cache's root
# Beside the files of an unpacked dictionary: the size and time of each when last hashed.
CHECKED = ".checked.json"
_HINT = (
    "point YOMIAGE_CACHE at a writable folder, or fill that cache ahead of time where "
    "it can be written (`yomiage g2p あ`; `--reading sbv2` for SBV2's dictionary)"
)


def package_data() -> Path:
    """The package's ``_data`` folder: the pack, and a checkout's unpacked dictionaries."""
    return Path(str(files("yomiage").joinpath("_data")))


def pins_of(name: str) -> dict[str, Pin]:
    """What each file of the dictionary ``name`` must be (KeyError for an unknown name)."""
    return {file: Pin(size, sha256) for file, (size, sha256) in PINS[name].items()}


def cached_dir(root: Path, name: str) -> Path:
    """Where the cache at ``root`` keeps the dictionary ``name``: named by its sys.dic,
    so that two yomiage versions with different dictionaries of one name share a cache."""
    return root / CACHE_DIR / f"{name}-{PINS[name][SYS_DIC][1][:16]}"


def dictionary_dir(name: str, cache_root: Path | None = None) -> Path:
    """A folder holding the compiled dictionary ``name`` as pinned, unpacked first if
    need be (see the module's docstring); ``cache_root`` defaults to the yomiage cache.
    DictionaryNotFoundError if the package lacks it or is damaged, or if it can be
    unpacked nowhere."""
    pins = pins_of(name)
    beside = package_data() / name
    if _sizes_match(beside, pins):  # a checkout's, unpacked by the build hook
        return beside
    if cache_root is None:
        from yomiage.sources.cache import default_cache_root

        cache_root = default_cache_root()
    target = cached_dir(cache_root.absolute(), name)
    if _checked(target, pins):
        return target
    try:
        return _unpack_into_cache(cache_root.absolute(), name, pins)
    except CacheError as exc:
        return _PRIVATE.get(name, pins, why=str(exc))


def _pack_path(name: str) -> Path:
    pack = package_data() / PACK_NAME
    if not pack.is_file():
        raise DictionaryNotFoundError(
            f"the OpenJTalk dictionary {name} is missing: {pack} is not there; "
            "the installation is incomplete: reinstall yomiage"
        )
    return pack


def _unpack(name: str, folder: Path, pins: Mapping[str, Pin]) -> None:
    """The dictionary ``name`` into the empty ``folder`` (OSError if it cannot be written)."""
    log.info("unpacking the OpenJTalk dictionary %s into %s (once)", name, folder)
    try:
        unpack(_pack_path(name), name, folder, pins)
    except PackError as exc:
        raise DictionaryNotFoundError(
            f"the OpenJTalk dictionary {name} cannot be unpacked: {exc}; "
            "the installation is damaged: reinstall yomiage"
        ) from exc


def _unpack_into_cache(root: Path, name: str, pins: Mapping[str, Pin]) -> Path:
    """Unpack under the cache's lock, unless another process did meanwhile; CacheError
    if the cache cannot be written."""
    from yomiage.sources.cache import Cache, cache_write_error

    cache = Cache(root)
    target = cached_dir(root, name)
    with cache.lock(f"{CACHE_DIR}/{target.name}"):
        if _checked(target, pins):
            return target
        with cache.staging(target) as staging:
            try:
                _unpack(name, staging, pins)
                _remember(staging, pins)
            except OSError as exc:
                raise cache_write_error(exc, target, root) from exc
    return target


def _sizes_match(folder: Path, pins: Mapping[str, Pin]) -> bool:
    try:
        return all((folder / file).stat().st_size == pin.size for file, pin in pins.items())
    except OSError:
        return False


def _stamp(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def _remember(folder: Path, pins: Mapping[str, Pin]) -> None:
    """Record each file's size and time, as hashed just now (OSError if it cannot)."""
    stamps = {file: _stamp(folder / file) for file in pins}
    write_atomic(folder / CHECKED, json.dumps(stamps, sort_keys=True))


def _checked(folder: Path, pins: Mapping[str, Pin]) -> bool:
    """Whether ``folder`` holds the dictionary as pinned: each file as it was when
    last hashed, or hashed again now (and remembered, where the folder is writable)."""
    if not _sizes_match(folder, pins):
        if folder.exists():
            log.warning("the OpenJTalk dictionary in %s is damaged; unpacking it again", folder)
        return False
    try:
        remembered = json.loads((folder / CHECKED).read_text("utf-8"))
    except (OSError, ValueError):
        remembered = {}
    changed = [f for f in pins if remembered.get(f) != _stamp(folder / f)]
    if not changed:
        return True
    for file in changed:
        if _sha256(folder / file) != pins[file].sha256:
            log.warning("the OpenJTalk dictionary in %s is damaged (%s); unpacking it again",
                        folder, file)  # fmt: skip
            return False
    with contextlib.suppress(OSError):  # a read-only cache: hashed again next time
        _remember(folder, pins)
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _PrivateCopies:
    """The dictionaries this process unpacked into temporary folders of its own, for
    lack of a writable cache: one per dictionary, shared by every analyser of the
    process, removed at exit (by the process that made them, not by a forked child)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folders: dict[str, Path] = {}
        self._pid = os.getpid()
        atexit.register(self.remove_all)

    def get(self, name: str, pins: Mapping[str, Pin], why: str) -> Path:
        with self._lock:
            folder = self._folders.get(name)
            if folder is not None and _sizes_match(folder, pins):
                return folder
            try:
                parent = Path(tempfile.mkdtemp(prefix="yomiage-openjtalk-"))
            except OSError as exc:
                raise DictionaryNotFoundError(
                    f"the OpenJTalk dictionary {name} cannot be unpacked: {why}; nor into a "
                    f"temporary folder ({exc}); {_HINT}"
                ) from exc
            folder = parent / name
            try:
                folder.mkdir()
                _unpack(name, folder, pins)
            except OSError as exc:  # a full or read-only temporary folder
                shutil.rmtree(parent, ignore_errors=True)
                raise DictionaryNotFoundError(
                    f"the OpenJTalk dictionary {name} cannot be unpacked: {why}; nor into "
                    f"{parent} ({exc}); {_HINT}"
                ) from exc
            except BaseException:
                shutil.rmtree(parent, ignore_errors=True)
                raise
            log.warning(
                "%s; so the OpenJTalk dictionary %s was unpacked into %s instead, for this "
                "process only (103 MB, removed at exit)", why, name, parent,
            )  # fmt: skip
            self._folders[name] = folder
            return folder

    def remove_all(self) -> None:
        if os.getpid() != self._pid:
            return
        with self._lock:
            for folder in self._folders.values():
                shutil.rmtree(folder.parent, ignore_errors=True)
            self._folders.clear()


# One per process: its folders must outlive every analyser that maps them, and go at exit.
_PRIVATE = _PrivateCopies()
