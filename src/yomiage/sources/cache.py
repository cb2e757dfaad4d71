"""The on-disk cache shared by every remote source, and its locks.

Layout under the root (``YOMIAGE_CACHE``, else the platform's user cache
folder, e.g. ``~/.cache/yomiage``)::

    hub/<owner>--<repo>/<revision>/<repo paths>   files of hub repositories
    s3/<bucket>/<prefix>/<keys below the prefix>  objects of S3 buckets
    converted/<key>/                              bundles converted from SBV2 folders
    manifests/hub/<owner>--<repo>/<revision>/<subfolder>.json
    manifests/s3/<bucket>/<prefix>.json           size + sha256 of every file fetched
    locks/<hash>.lock                             one lock file per snapshot or key

The content folders hold exactly the remote files (plus ``*.incomplete``
partial downloads, never trusted), so they can be handed to loaders as is.
A snapshot counts as present only when its manifest exists and every file in
it still matches the recorded size and sha256.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from filelock import FileLock, Timeout

from yomiage.errors import CacheError, CacheFullError, InvalidSourceError
from yomiage.sources.uri import HubSource, S3Source

log = logging.getLogger(__name__)

ENV_CACHE = "YOMIAGE_CACHE"
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,199}")


def default_cache_root() -> Path:
    """``$YOMIAGE_CACHE`` if set, else the platform's per-user cache folder for yomiage."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("yomiage", appauthor=False))


def _name(part: str) -> str:
    """One path segment for ``part`` (revision, subfolder, prefix): reversible, no slashes."""
    return quote(part, safe="") if part else "@root"


@dataclass(frozen=True)
class Snapshot:
    """Where one remote folder lives in the cache.

    ``files_root`` joined with a remote file's relative path is where that
    file is stored; ``folder`` is what callers get back (the hub subfolder
    inside the revision folder, or the S3 prefix folder).
    """

    source: str
    cache_root: Path
    files_root: Path
    folder: Path
    manifest: Path
    lock: Path


def _chmod_like_umask(path: Path, mode: int) -> None:
    # mkdtemp makes 0700 folders; a cache baked into an image as root must stay readable.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


@dataclass(frozen=True)
class Cache:
    """A cache root. Cheap to make; holds no open files and no state besides its path."""

    root: Path

    @classmethod
    def at(cls, cache_dir: Path | str | None = None) -> Cache:
        """The cache at ``cache_dir``, else :func:`default_cache_root`."""
        root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_root()
        return cls(root.absolute())

    # -- where things go ---------------------------------------------------
    def hub_snapshot(self, src: HubSource) -> Snapshot:
        """The cache places of hub folder ``src`` (revision by name, e.g. ``main``)."""
        repo = src.repo.replace("/", "--")
        files_root = self.root / "hub" / repo / _name(src.revision)
        folder = files_root / src.subfolder if src.subfolder else files_root
        manifest = (
            self.root / "manifests" / "hub" / repo / _name(src.revision) / (_name(src.subfolder))
        ).with_suffix(".json")
        return self._snapshot(str(src), files_root, folder, manifest)

    def s3_snapshot(self, src: S3Source) -> Snapshot:
        """The cache places of all objects below ``s3://bucket/prefix/``."""
        folder = self.root / "s3" / src.bucket
        folder = folder / src.prefix if src.prefix else folder
        manifest = self.root / "manifests" / "s3" / src.bucket / (_name(src.prefix) + ".json")
        return self._snapshot(str(src), folder, folder, manifest)

    def file_snapshot(self, folder: Snapshot, name: str, source: str) -> Snapshot:
        """One file ``name`` of the remote folder ``folder`` (a one-file voice such as an
        AIVMX): stored where the folder's copy of it would be, with its own manifest, so
        the folder itself is never taken for complete."""
        manifest = folder.manifest.with_name(f"{folder.manifest.stem}@{_name(name)}.json")
        return self._snapshot(source, folder.files_root, folder.folder / name, manifest)

    def _snapshot(self, source: str, files_root: Path, folder: Path, manifest: Path) -> Snapshot:
        key = manifest.relative_to(self.root).as_posix()
        return Snapshot(source, self.root, files_root, folder, manifest, self.lock_path(key))

    def converted_dir(self, key: str) -> Path:
        """``<root>/converted/<key>``, where a bundle converted from a source is kept.

        ``key`` is one safe path segment (letters, digits, ``._-``), e.g. a hash
        of the SBV2 files and the converter version; anything else raises
        InvalidSourceError. The folder may not exist yet: fill it with
        :meth:`staging` while holding :meth:`lock` with the same key.
        """
        if not isinstance(key, str) or not _KEY.fullmatch(key) or ".." in key:
            raise InvalidSourceError(f"invalid cache key {key!r}: use letters, digits, '._-'")
        return self.root / "converted" / key

    def lock_path(self, key: str) -> Path:
        """The lock file for ``key`` (any string)."""
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
        return self.root / "locks" / f"{digest}.lock"

    # -- locks and atomic folders -------------------------------------------
    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the inter-process lock for ``key`` (blocks while another process holds it).

        Use one key per thing being written (a converted bundle's key, a
        snapshot's manifest path); the lock is per process and per thread-safe
        FileLock object, so two threads of one process also exclude each other.
        """
        with hold(self.lock_path(key), self.root):
            yield

    @contextmanager
    def staging(self, target: Path) -> Iterator[Path]:
        """A fresh temporary folder beside ``target`` that replaces it on success.

        Write the whole result into the yielded folder; when the ``with``
        block ends without an exception it is renamed to ``target`` (an old
        ``target`` is moved aside and removed), otherwise it is deleted and
        ``target`` is left untouched. Hold :meth:`lock` around this so two
        writers do not race; readers never see a half-written ``target``.
        """
        target = Path(target).absolute()
        if not target.is_relative_to(self.root):
            raise InvalidSourceError(f"{target} is outside the cache {self.root}")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
            _chmod_like_umask(tmp, 0o777)
        except OSError as exc:
            raise cache_write_error(exc, target, self.root) from exc
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        moved = False
        try:
            if target.exists():
                os.replace(target, old)
                moved = True
            os.replace(tmp, target)
        except OSError as exc:
            if moved and not target.exists():
                os.replace(old, target)
            shutil.rmtree(tmp, ignore_errors=True)
            raise cache_write_error(exc, target, self.root) from exc
        shutil.rmtree(old, ignore_errors=True)

    # -- what is no longer wanted -------------------------------------------
    def remove_converted(self, key: str) -> bool:
        """Delete the bundle ``converted/<key>`` (False if there is none), under its lock so
        no conversion of it runs meanwhile. It is renamed aside first: a reader never
        finds half a bundle, and what a failed delete leaves is swept as abandoned."""
        target = self.converted_dir(key)
        with self.lock(key):
            if not target.exists():
                return False
            aside = target.with_name(f".{key}.old-{os.getpid()}")
            try:
                os.replace(target, aside)
            except OSError as exc:
                raise cache_write_error(exc, target, self.root) from exc
            shutil.rmtree(aside, ignore_errors=True)
        return True

    def sweep_converted(self, key: str | None = None) -> list[Path]:
        """Remove what killed conversions left in ``converted/``: staging folders
        (``.<key>.<random>``) and bundles moved aside (``.<key>.old-<pid>``). With ``key``,
        those of that key (the caller holds its :meth:`lock`); else those of every key
        whose lock no process holds now, so a conversion under way keeps its folder.
        Returns the folders removed."""
        folder = self.root / "converted"
        try:
            entries = [p for p in folder.iterdir() if p.name.startswith(".") and p.is_dir()]
        except OSError:  # no converted/ yet, or unreadable: nothing to sweep
            return []
        removed = []
        for path in entries:
            owner = path.name[1:].rsplit(".", 1)[0]
            if not _KEY.fullmatch(owner) or (key is not None and owner != key):
                continue
            if key is None:
                with try_hold(self.lock_path(owner)) as free:
                    if not free:
                        continue
                    shutil.rmtree(path, ignore_errors=True)
            else:
                shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
                log.info("removed %s, left by a conversion that did not finish", path)
        return removed


@contextmanager
def try_hold(lock_path: Path) -> Iterator[bool]:
    """Hold the file lock at ``lock_path`` if no one holds it now: yields whether it does
    (False also where the lock cannot be made: a read-only cache)."""
    lock = FileLock(str(lock_path))
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)
    except (Timeout, OSError):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


@contextmanager
def hold(lock_path: Path, root: Path) -> Iterator[None]:
    """Hold the file lock at ``lock_path``; logs once if another process holds it."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cache_write_error(exc, lock_path, root) from exc
    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0.2)
    except Timeout:
        log.info("waiting for another process to finish writing to the cache (%s)", lock_path)
        lock.acquire()
    except OSError as exc:
        raise cache_write_error(exc, lock_path, root) from exc
    try:
        yield
    finally:
        lock.release()


def cache_write_error(exc: OSError, path: Path, root: Path) -> CacheError:
    """The CacheError for a failed write of ``path``: disk full, read-only or permissions."""
    import errno

    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        why = "no space left on the device"
        hint = "free some space or point YOMIAGE_CACHE at a bigger disk"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        why = "the cache is not writable"
        hint = "point YOMIAGE_CACHE (or cache_dir=) at a writable folder"
    else:
        why = str(exc)
        hint = "check the cache folder, or point YOMIAGE_CACHE elsewhere"
    kind = CacheFullError if why == "no space left on the device" else CacheError
    return kind(f"cannot write {path} in the yomiage cache {root}: {why}; {hint}")
