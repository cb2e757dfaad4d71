"""What a cached snapshot holds: each file's size and sha256, written after its download.

A later run trusts a cached file only if it matches its record: a changed
size means a damaged file; a changed modification time means the file is
hashed again and compared (so flipped bytes are caught without hashing
every file on every load).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yomiage.atomic import write_atomic
from yomiage.json_file import read_json_file

FORMAT = 1
CHUNK = 1 << 20


@dataclass(frozen=True)
class FileRecord:
    """One cached file: ``path`` relative to the snapshot's files root.

    ``etag`` is the remote's version marker (hub: LFS sha256 or git blob id;
    S3: the ETag), compared on refresh to skip files that did not change.
    ``mtime_ns`` is the cached file's modification time when last verified.
    """

    path: str
    size: int
    sha256: str
    etag: str = ""
    mtime_ns: int = 0


@dataclass(frozen=True)
class Manifest:
    """The files of one snapshot (a hub folder at a revision, an S3 prefix)."""

    source: str
    revision: str
    files: tuple[FileRecord, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "source": self.source,
                "revision": self.revision,
                "files": [r.__dict__ for r in self.files],
            },
            indent=1,
        )

    @classmethod
    def from_data(cls, data: Any) -> Manifest:
        """The manifest from :meth:`to_json`'s JSON, parsed (ValueError, KeyError or
        TypeError where it does not hold one)."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("unknown manifest format")
        files = tuple(
            FileRecord(
                path=str(f["path"]),
                size=int(f["size"]),
                sha256=str(f["sha256"]),
                etag=str(f.get("etag", "")),
                mtime_ns=int(f.get("mtime_ns", 0)),
            )
            for f in data["files"]
        )
        return cls(str(data["source"]), str(data.get("revision", "")), files)


def read_manifest(path: Path) -> Manifest | None:
    """The manifest at ``path``; None if it is missing or unreadable (treated as not cached)."""
    try:
        return Manifest.from_data(read_json_file(path))
    except (OSError, ValueError, KeyError, TypeError):  # JsonFileError is a ValueError
        return None


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Write ``manifest`` atomically (temporary file + rename); raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, manifest.to_json())


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def check_file(root: Path, record: FileRecord) -> FileRecord | None:
    """``record`` (with a fresh ``mtime_ns`` if it was re-hashed) if the file matches; else None."""
    path = root / record.path
    try:
        st = path.stat()
        if st.st_size != record.size:
            return None
        if st.st_mtime_ns == record.mtime_ns:
            return record
        if sha256_of(path) != record.sha256:
            return None
    except OSError:
        return None
    return replace(record, mtime_ns=st.st_mtime_ns)


def check_manifest(root: Path, manifest: Manifest) -> tuple[Manifest, list[str]]:
    """(``manifest`` with refreshed times, paths of files missing or damaged)."""
    good: list[FileRecord] = []
    bad: list[str] = []
    for record in manifest.files:
        checked = check_file(root, record)
        if checked is None:
            bad.append(record.path)
        else:
            good.append(checked)
    return replace(manifest, files=tuple(good)), bad
