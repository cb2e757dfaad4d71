"""Bundle files checked against the sha256 their manifest records, at every load.

A flipped byte in a graph's weights loads fine and gives NaN audio, so a
bundle (``voice.json``, ``bert.json``) is verified before it is loaded. Hashing
hundreds of megabytes on every start would cost seconds, so the size and
modification time of each file are remembered once it has been hashed (in
the cache, under ``verified/``): a file whose size and time have not changed
since is trusted; any other is hashed again. Without a writable cache every
load hashes.
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
