"""Files checked against a sha256 recorded when they were written, before each use.

A flipped byte in a graph's weights loads fine and gives NaN audio (or noise), so
a bundle (``voice.json``, ``bert.json``) is verified before it is loaded. Hashing
hundreds of megabytes on every start would cost seconds, so the size and
modification time of each file are remembered once it has been hashed (in
the cache, under ``verified/``): a file whose size and time have not changed
since is trusted; any other is hashed again. Without a writable cache every
load hashes.

What the cache makes from a bundle (a decoder in another layout, OpenVINO's
compiled blobs: :mod:`yomiage.runtime.derived`) has no manifest of its own, so
its maker records each file's sha256 in the folder it wrote
(:data:`MADE_RECORD`, :func:`record_made`), and its user checks the files
against that record first (:func:`unlike_made`), on the same terms: a file
whose size and time are as recorded is trusted, any other is hashed again. A
file that is not as it was made is made again: a damaged one in the cache spoke
noise, with no error, on every start.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from yomiage.atomic import write_atomic
from yomiage.errors import ModelLoadError
from yomiage.json_file import read_json_object
from yomiage.runtime.bundle import sha256_file

log = logging.getLogger(__name__)

_MEMO_FORMAT = 1
# Beside the files the cache made, the sha256 each had when it was made.
MADE_RECORD = "sha256.json"
_MADE_FORMAT = 1
# Why :func:`unlike_made` gives for a file made before its maker recorded it: nothing
# wrong is known of it (made by an older version, or its maker stopped before the
# record), so callers make it again without a warning.
NOT_RECORDED = "its sha256 was never recorded"


def _memo_path(memo_dir: Path, folder: Path) -> Path:
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:32]
    return memo_dir / f"{key}.json"


def _read_memo(path: Path) -> dict[str, list[object]]:
    try:
        data = read_json_object(path)
    except FileNotFoundError:
        return {}
    except ValueError as exc:  # damaged: every file is hashed again, and the memo rewritten
        log.info("ignoring the verified-file memo %s", exc)
        return {}
    if data.get("format") != _MEMO_FORMAT:
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}


def _write_memo(path: Path, files: Mapping[str, list[object]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"format": _MEMO_FORMAT, "files": files}))
    except OSError as exc:  # a read-only cache: the next load hashes again
        log.debug("cannot remember verified files in %s: %s", path.parent, exc)


def verify_files(
    folder: Path, digests: Mapping[str, str], names: Iterable[str], memo_dir: Path | None
) -> None:
    """Check ``names`` (files of ``folder``) against ``digests``; ModelLoadError names a
    missing or corrupt file and says how to get a good one."""
    memo_file = _memo_path(memo_dir, folder) if memo_dir is not None else None
    memo = _read_memo(memo_file) if memo_file is not None else {}
    changed = False
    for name in names:
        expected = digests.get(name)
        path = folder / name
        if expected is None:
            continue
        try:
            st = path.stat()
        except OSError:
            raise ModelLoadError(
                f"{path} is missing from the bundle; convert or download it again"
            ) from None
        if memo.get(name) == [st.st_size, st.st_mtime_ns, expected]:
            continue
        actual = sha256_file(path)
        if actual != expected:
            raise ModelLoadError(
                f"{path} is corrupt (its sha256 is not the one {folder.name}'s manifest "
                "records); convert or download the bundle again"
            )
        memo[name] = [st.st_size, st.st_mtime_ns, expected]
        changed = True
    if changed and memo_file is not None:
        _write_memo(memo_file, memo)


def used_files(files: Iterable[str], graph: str, alternatives: Iterable[str]) -> list[str]:
    """The listed files a load reads: all but the other choices of one graph
    (``decoder_int8.onnx`` and its weights when ``decoder.onnx`` is used)."""
    unused = {Path(a).name.split(".")[0] for a in alternatives} - {graph.split(".")[0]}
    return [f for f in files if f.split(".")[0] not in unused]


def file_sha256(path: Path, memo_dir: Path | None) -> str:
    """The sha256 of ``path``, hashed only if its size or time changed since it was last
    hashed (same memo as :func:`verify_files`): a one-file voice keyed by its content
    (an AIVMX file, 250 MB: 0.25 s to hash) loads without reading it whole every time."""
    st = path.stat()
    memo_file = _memo_path(memo_dir, path.parent) if memo_dir is not None else None
    memo = _read_memo(memo_file) if memo_file is not None else {}
    entry = memo.get(path.name)
    if isinstance(entry, list) and len(entry) == 3 and entry[:2] == [st.st_size, st.st_mtime_ns]:
        return str(entry[2])
    digest = sha256_file(path)
    if memo_file is not None:
        memo[path.name] = [st.st_size, st.st_mtime_ns, digest]
        _write_memo(memo_file, memo)
    return digest


def record_made(folder: Path, names: Iterable[str]) -> None:
    """Record the sha256 of ``names`` (files just made in ``folder``), with the size and
    time of each, in ``folder``'s :data:`MADE_RECORD` (beside what it records already;
    a file recorded with its present size and time is not hashed again). Raises OSError
    where a file cannot be read or the record written."""
    record = _read_made(folder)
    changed = False
    for name in names:
        st = (folder / name).stat()
        entry = record.get(name)
        if isinstance(entry, list) and entry[:2] == [st.st_size, st.st_mtime_ns]:
            continue
        record[name] = [st.st_size, st.st_mtime_ns, sha256_file(folder / name)]
        changed = True
    if changed or not (folder / MADE_RECORD).is_file():
        _write_made(folder, record)


def unlike_made(folder: Path, names: Iterable[str]) -> dict[str, str]:
    """Those of ``names`` in ``folder`` that are not as :func:`record_made` recorded them,
    each with why (missing, never recorded, or changed since); empty when all are.
    Only a file whose size or time changed since is hashed; one that was only touched
    (the same sha256) is recorded with its new time, so it is not hashed again."""
    record = _read_made(folder)
    unlike: dict[str, str] = {}
    touched = False
    for name in names:
        path = folder / name
        try:
            st = path.stat()
        except OSError:
            unlike[name] = "it is missing"
            continue
        entry = record.get(name)
        if not (isinstance(entry, list) and len(entry) == 3):
            unlike[name] = NOT_RECORDED
            continue
        if entry[:2] == [st.st_size, st.st_mtime_ns]:
            continue
        try:
            actual = sha256_file(path)
        except OSError as exc:
            unlike[name] = f"it cannot be read ({exc})"
            continue
        if actual != entry[2]:
            unlike[name] = "its sha256 is not the one recorded when it was made"
            continue
        record[name] = [st.st_size, st.st_mtime_ns, actual]
        touched = True
    if touched:
        try:
            _write_made(folder, record)
        except OSError as exc:  # a read-only cache: hashed again next time
            log.debug("cannot update %s: %s", folder / MADE_RECORD, exc)
    return unlike


def _read_made(folder: Path) -> dict[str, list[object]]:
    try:
        data = read_json_object(folder / MADE_RECORD)
    except (OSError, ValueError):  # none, or damaged: every file counts as unrecorded
        return {}
    files = data.get("files") if data.get("format") == _MADE_FORMAT else None
    return files if isinstance(files, dict) else {}


def _write_made(folder: Path, record: Mapping[str, list[object]]) -> None:
    write_atomic(folder / MADE_RECORD, json.dumps({"format": _MADE_FORMAT, "files": record}))
