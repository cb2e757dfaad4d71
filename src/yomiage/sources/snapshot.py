"""Filling one cache snapshot from a remote, the same way for the hub and for S3.

1. If the snapshot's manifest exists and every file matches it, use it: no
   network (unless ``refresh``).
2. Offline: fail, naming the missing files and the command that fetches them.
3. Otherwise take the snapshot's file lock (other processes wait, then find
   it complete), list the remote, keep files whose record and remote version
   still agree, download the others atomically, and write the manifest last.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from yomiage.errors import OfflineError, SourceNotFoundError
from yomiage.sources.cache import Snapshot, cache_write_error, hold
from yomiage.sources.manifest import (
    FileRecord,
    Manifest,
    check_file,
    check_manifest,
    read_manifest,
    write_manifest,
)
from yomiage.sources.transfer import Listing, RemoteFile, fetch_file
from yomiage.sources.uri import safe_relpath

log = logging.getLogger(__name__)


class Remote(Protocol):
    """A remote folder. Made only when going online; ``listing`` is its first request."""

    def listing(self) -> Listing:
        """The files, with paths relative to the snapshot's files root, and their opener."""
        ...


@dataclass(frozen=True)
class OneFile:
    """One file of a remote folder, as a remote of its own (``path``: as the folder lists it)."""

    folder: Remote
    path: str
    source: str

    def listing(self) -> Listing:
        listing = self.folder.listing()
        files = tuple(f for f in listing.files if f.path == self.path)
        if not files:
            raise SourceNotFoundError(
                f"{self.source}: no such file ({self.path} is not in its folder)",
                source=self.source,
            )
        return Listing(listing.revision, files, listing.opener)


@dataclass(frozen=True)
class Request:
    """How to fill a snapshot: the user-facing source, offline mode, the fetch command."""

    source: str
    offline: bool
    offline_reason: str
    command: str
    refresh: bool = False


def cached(snapshot: Snapshot) -> bool:
    """True if ``snapshot`` is complete and intact in the cache (no network, may hash files)."""
    return _intact(snapshot)[0] is not None


def _intact(snapshot: Snapshot) -> tuple[Manifest | None, list[str]]:
    manifest = read_manifest(snapshot.manifest)
    if manifest is None:
        return None, []
    checked, bad = check_manifest(snapshot.files_root, manifest)
    if bad:
        return None, bad
    if checked != manifest:  # re-hashed after a timestamp change: remember the new times
        # A read-only cache (e.g. in a container) still works, only slower.
        with contextlib.suppress(OSError):
            write_manifest(snapshot.manifest, checked)
    return checked, []


def ensure(snapshot: Snapshot, request: Request, connect: Callable[[], Remote]) -> Path:
    """The snapshot's folder, complete and verified; downloads what is missing or damaged."""
    if not request.refresh:
        manifest, bad = _intact(snapshot)
        if manifest is not None:
            return snapshot.folder
    else:
        bad = []
    if request.offline:
        what = f"damaged or missing files {', '.join(bad)}" if bad else "nothing of it is cached"
        raise OfflineError(
            f"{request.source} is needed but {request.offline_reason} and {what} "
            f"(cache: {snapshot.folder}); fetch it while online with `{request.command}`",
            source=request.source,
            command=request.command,
        )
    with hold(snapshot.lock, snapshot.cache_root):
        if not request.refresh and _intact(snapshot)[0] is not None:
            return snapshot.folder  # another process filled it while we waited
        _fill(snapshot, request, connect())
    return snapshot.folder


def _fill(snapshot: Snapshot, request: Request, remote: Remote) -> None:
    listing = remote.listing()
    files, revision = listing.files, listing.revision
    source = request.source
    if not files:
        raise SourceNotFoundError(f"{source}: no files there", source=source)
    old = read_manifest(snapshot.manifest)
    known = {r.path: r for r in old.files} if old is not None else {}
    records: list[FileRecord] = []
    for remote_file in files:
        rel = safe_relpath(remote_file.path, what="remote file name", source=source)
        target = snapshot.files_root / rel
        record = known.get(rel)
        if record is not None and _same_version(record, remote_file):
            checked = check_file(snapshot.files_root, record)
            if checked is not None:
                records.append(checked)
                continue
        size = f" ({remote_file.size / 1e6:.1f} MB)" if remote_file.size else ""
        log.info("downloading %s%s from %s", rel, size, source)
        records.append(
            fetch_file(
                listing.opener, remote_file, target, source=source, cache_root=snapshot.cache_root
            )
        )
    try:
        write_manifest(snapshot.manifest, Manifest(source, revision, tuple(records)))
    except OSError as exc:
        raise cache_write_error(exc, snapshot.manifest, snapshot.cache_root) from exc


def _same_version(record: FileRecord, remote: RemoteFile) -> bool:
    if remote.size is not None and remote.size != record.size:
        return False
    if remote.sha256 is not None:
        return remote.sha256.lower() == record.sha256
    return bool(remote.etag) and remote.etag == record.etag
