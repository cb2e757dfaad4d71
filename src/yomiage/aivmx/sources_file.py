"""``sources.json``: where each installed AIVMX voice came from, kept beside them.

One job: read the record (an unreadable one is logged and taken as empty, or refused
when it is about to be rewritten, since writing it would drop every other voice's
record) and change one entry, atomically and synced, as a user's data is.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from yomiage.aivmx.upload import ModelStoreError
from yomiage.atomic import write_atomic

SOURCES_FILE = "sources.json"

log = logging.getLogger(__name__)


def read_sources(root: Path, *, strict: bool = False) -> dict[str, str]:
    """The recorded sources by uuid in ``root``. A file that cannot be read is logged and
    taken as none, unless ``strict``: then ModelStoreError."""
    path = root / SOURCES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, dict):
            raise ValueError('no "models" object')
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        if strict:
            raise ModelStoreError(
                f"{path} cannot be read ({exc}), and changing the models would overwrite "
                "the sources it records; fix or move it, then try again"
            ) from None
        log.warning("%s cannot be read (%s); the models' sources are unknown", path, exc)
        return {}
    return {
        key: entry["source"]
        for key, entry in models.items()
        if isinstance(entry, dict) and isinstance(entry.get("source"), str)
    }


def record_source(root: Path, uuid: str, source: str | None) -> None:
    """Set (or with None remove) the recorded source of ``uuid`` in ``root``."""
    sources = read_sources(root, strict=True)
    if sources.get(uuid) == source:
        return
    if source is None:
        sources.pop(uuid, None)
    else:
        sources[uuid] = source
    data = {"version": 1, "models": {k: {"source": v} for k, v in sorted(sources.items())}}
    try:
        write_atomic(root / SOURCES_FILE, json.dumps(data, indent=2) + "\n", sync=True)
    except OSError as exc:
        raise ModelStoreError(
            f"model {uuid}: the file is in place but its source could not be recorded "
            f"in {root / SOURCES_FILE}: {exc.strerror or exc}"
        ) from exc
