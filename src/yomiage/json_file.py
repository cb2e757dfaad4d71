"""A JSON file that yomiage wrote, read back whatever state it was left in.

The cache's files (measured plans, the verified-file memo, snapshot manifests, a
converted bundle's manifest, the voice load journal) are written by this
library, but a full disk, an interrupted copy or a hand may leave anything in
their place: truncated or binary text, a folder, a FIFO, the wrong types, or
arrays nested 100,000 deep, where ``json.loads`` raises RecursionError, which
no reader expected (it stopped every start of a server). :func:`read_json_file`
turns each of those into one :class:`JsonFileError` naming the file and what is
wrong with it, so a reader can treat a damaged file as one never written.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

# Far above any file yomiage writes (a plan is ~10 kB, a manifest of a big snapshot
# ~100 kB): a larger one is damage, and is not read whole into memory to find out.
MAX_JSON_BYTES = 16 << 20


class JsonFileError(ValueError):
    """A JSON file that cannot be used: unreadable, not JSON, or not of the shape asked."""


def read_json_file(path: Path, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The JSON value in ``path``. FileNotFoundError where there is no such file (not
    written yet, as a caller may expect); JsonFileError for anything else that keeps
    the file from being read: not a regular file, over ``max_bytes``, not UTF-8, not
    JSON, or nested too deep to parse."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise JsonFileError(f"{path} is not a regular file")
        if info.st_size > max_bytes:
            raise JsonFileError(f"{path} holds {info.st_size} bytes, over the {max_bytes} expected")
        text = path.read_bytes()[: max_bytes + 1].decode("utf-8")
        return json.loads(text)
    except FileNotFoundError:
        raise
    except JsonFileError:
        raise
    except RecursionError:
        raise JsonFileError(f"{path} nests its arrays or objects too deep to read") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise JsonFileError(f"{path} cannot be read: {exc}") from None


def read_json_object(path: Path, *, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """:func:`read_json_file` for a file that holds one JSON object (JsonFileError if
    it holds anything else)."""
    value = read_json_file(path, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise JsonFileError(f"{path} holds a JSON {type(value).__name__}, not an object")
    return value
