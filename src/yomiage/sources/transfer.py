"""Writing one downloaded file into the cache: partial file, checks, then rename.

The bytes go to ``<name>.incomplete`` beside the target. Only when the
stream ended, the size matches and the sha256 (or git blob id) matches is
the partial renamed to the target, so a file under its real name is always
complete. A cut transfer leaves the partial, which the next attempt resumes
(when the server honours ``Range``) or overwrites.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from yomiage.errors import CacheError, SourceNetworkError
from yomiage.sources.cache import cache_write_error
from yomiage.sources.manifest import CHUNK, FileRecord

PARTIAL_SUFFIX = ".incomplete"
# Downloaded files get a modification time in the past: any later write stamps
# the current time, so a stat() alone tells a changed file (see manifest.py).
MTIME_BACKDATE_NS = 10 * 1_000_000_000


@dataclass(frozen=True)
class RemoteFile:
    """A file a remote offers: ``path`` relative to the snapshot's files root.

    ``size``, ``sha256`` and ``git_sha1`` (a git blob id) are checked when
    known; ``etag`` is the remote's version marker, kept in the manifest.
    """

    path: str
    size: int | None = None
    sha256: str | None = None
    git_sha1: str | None = None
    etag: str = ""


class _Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def hexdigest(self) -> str: ...


# Opens the file's bytes from ``offset``; yields (offset actually served, chunks).
# Transport failures must surface as SourceError subclasses, not OSError.
Opener = Callable[[RemoteFile, int], AbstractContextManager[tuple[int, Iterator[bytes]]]]


@dataclass(frozen=True)
class Listing:
    """A remote folder's files at one revision, and how to open them."""

    revision: str
    files: tuple[RemoteFile, ...]
    opener: Opener


log = logging.getLogger(__name__)
PROGRESS_SECONDS = 5.0  # how often a long download says how far it is


def _amount(done: int, total: int | None) -> str:
    if total:
        return f"{done / 1e6:.0f} of {total / 1e6:.0f} MB ({100 * done / total:.0f} %)"
    return f"{done / 1e6:.0f} MB"


def partial_path(target: Path) -> Path:
    return target.with_name(target.name + PARTIAL_SUFFIX)


def _prefix_hashes(path: Path, upto: int, remote: RemoteFile) -> tuple[_Hasher, _Hasher | None]:
    sha: _Hasher = hashlib.sha256()
    git = _git_hasher(remote)
    with path.open("rb") as f:
        left = upto
        while left > 0 and (block := f.read(min(CHUNK, left))):
            sha.update(block)
            if git is not None:
                git.update(block)
            left -= len(block)
    return sha, git


def _git_hasher(remote: RemoteFile) -> _Hasher | None:
    if remote.git_sha1 is None or remote.size is None:
        return None
    git = hashlib.sha1(usedforsecurity=False)
    git.update(f"blob {remote.size}\0".encode())
    return git


def fetch_file(
    opener: Opener, remote: RemoteFile, target: Path, *, source: str, cache_root: Path
) -> FileRecord:
    """Download ``remote`` to ``target`` atomically and return its manifest record.

    Raises CacheError (disk full, unwritable cache, content not matching the
    expected size or hash: the partial is deleted) and whatever the opener
    raises for transport failures (the partial is kept for resuming).
    """
    part = partial_path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        offset = part.stat().st_size if part.exists() else 0
    except OSError as exc:
        raise cache_write_error(exc, target, cache_root) from exc
    if remote.size is not None and offset >= remote.size:
        offset = 0  # nothing left to ask for: start over and re-check everything
    with opener(remote, offset) as (start, chunks):
        if start != offset:
            start = 0
        try:
            if start:
                sha, git = _prefix_hashes(part, start, remote)
            else:
                sha, git = hashlib.sha256(), _git_hasher(remote)
            written = start
            shown = time.monotonic()
            with part.open("r+b" if start else "wb") as f:
                f.seek(start)
                f.truncate()
                for chunk in chunks:
                    f.write(chunk)
                    sha.update(chunk)
                    if git is not None:
                        git.update(chunk)
                    written += len(chunk)
                    if time.monotonic() - shown >= PROGRESS_SECONDS:
                        shown = time.monotonic()
                        log.info("%s: %s", remote.path, _amount(written, remote.size))
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            part.unlink(missing_ok=True)
            raise cache_write_error(exc, target, cache_root) from exc
    if remote.size is not None and written < remote.size:
        raise SourceNetworkError(
            f"{source}: the transfer of {remote.path} ended after {written} of {remote.size} "
            "bytes; run again to resume it",
            source=source,
        )
    digest = sha.hexdigest()
    problem = ""
    if remote.size is not None and written != remote.size:
        problem = f"{written} bytes, expected {remote.size}"
    elif remote.sha256 is not None and digest != remote.sha256.lower():
        problem = f"sha256 {digest}, expected {remote.sha256}"
    elif git is not None and git.hexdigest() != remote.git_sha1:
        problem = f"git blob id does not match {remote.git_sha1}"
    if problem:
        part.unlink(missing_ok=True)
        raise CacheError(
            f"{source}: downloaded {remote.path} is corrupt ({problem}); it was discarded, "
            "run again to fetch it anew",
            source=source,
        )
    try:
        os.replace(part, target)
        past = time.time_ns() - MTIME_BACKDATE_NS
        os.utime(target, ns=(past, past))
        mtime_ns = target.stat().st_mtime_ns
    except OSError as exc:
        raise cache_write_error(exc, target, cache_root) from exc
    return FileRecord(remote.path, written, digest, remote.etag, mtime_ns)
