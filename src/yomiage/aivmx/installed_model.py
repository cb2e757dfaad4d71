"""What one installed AIVMX file is to the store: its manifest, read from the metadata
alone, and the uuid the store names it by."""

from __future__ import annotations

import hashlib
import logging
import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from yomiage.aivmx.metadata import read_metadata, strict_json

HASH_CHUNK = 1 << 20

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InstalledModel:
    """One voice in the store. ``manifest`` is the AIVM manifest JSON as in the file;
    ``source`` is where it was installed from (None for an upload or a hand copy)."""

    uuid: str
    name: str
    version: str
    path: Path
    size: int
    manifest: Mapping[str, Any]
    source: str | None


def describe(path: Path, size: int) -> InstalledModel | None:
    """The voice in ``path`` from its metadata only; None (and a warning) if unreadable."""
    try:
        manifest = strict_json(read_metadata(path).get("aivm_manifest", "null"))
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("skipping %s: not a readable AIVMX file (%s)", path, exc)
        return None
    if not isinstance(manifest, dict):
        log.warning("skipping %s: no AIVM manifest in its metadata", path)
        return None
    key = canonical_uuid(manifest.get("uuid"))
    name, version = manifest.get("name"), manifest.get("version")
    if key is None or not isinstance(name, str) or not name:
        log.warning("skipping %s: its manifest lacks a UUID or a name", path)
        return None
    return InstalledModel(
        uuid=key,
        name=name,
        version=version if isinstance(version, str) else "",
        path=path,
        size=size,
        manifest=MappingProxyType(manifest),
        source=None,
    )


def unlisted(path: Path, uuid: str) -> InstalledModel:
    """The file at ``path``, unreadable, as a model of ``uuid`` with no manifest."""
    return InstalledModel(uuid, "", "", path, path.stat().st_size, MappingProxyType({}), None)


def with_source(model: InstalledModel, source: str | None) -> InstalledModel:
    return model if model.source == source else replace(model, source=source)


def canonical_uuid(value: object) -> str | None:
    """``value`` as the lowercase hyphenated UUID the store names voices by (any case
    given); None if it is not one. File names are made from it, so nothing else may
    pass."""
    if not isinstance(value, str) or len(value) != 36:
        return None
    try:
        parsed = uuidlib.UUID(value)
    except ValueError:
        return None
    return str(parsed) if str(parsed) == value.lower() else None


def file_sha256(path: Path) -> str:
    """The file's sha256; "" if it is gone or unreadable (anything fetched then differs)."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while block := stream.read(HASH_CHUNK):
                digest.update(block)
    except OSError:
        return ""
    return digest.hexdigest()
