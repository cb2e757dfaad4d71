"""The bundles installed voices run from, and removing the one a change leaves unused.

An installed AIVMX voice runs from the bundle cut from it into the engine's
cache (``converted/aivmx-<sha256>-v<format>-cut<n>``, :func:`yomiage.converted.aivmx_once`),
keyed by the file's content. Uninstalling the voice, or replacing its file (an
update, a re-install), left that bundle in the cache for good: as large as the
voice, every time. :class:`ConvertedBundles` removes it once the change is done,
and only where nothing still needs it: no installed file has that content and no
loaded voice (an installed one, or one the server was started with) came from
it. By then the voice is unloaded; requests still running on it hold their
sessions (an open file outlives its name on POSIX; where a file cannot go, the
bundle is moved aside and the next start's sweep removes it).
"""

from __future__ import annotations

import logging
import uuid as uuidlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from yomiage.aivmx.metadata import read_metadata, strict_json
from yomiage.aivmx.store import ModelStore
from yomiage.converted import remove_aivmx_cuts
from yomiage.runtime.integrity import file_sha256
from yomiage.server.engine.service import VoiceCard
from yomiage.sources.cache import Cache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Content:
    """What an AIVMX file holds, as far as its bundle goes: its sha256 and size."""

    sha256: str
    size: int


class ConvertedBundles:
    """Which bundle a voice file has, and removing one no voice needs (blocking: call
    from a worker thread, inside the routes' change lock)."""

    def __init__(
        self, cache: Cache, store: ModelStore, voices: Callable[[], Mapping[str, VoiceCard]]
    ) -> None:
        self.cache = cache
        self.store = store
        self.voices = voices

    def content(self, path: Path) -> Content | None:
        """The content of the file at ``path`` (hashed once: the loader's memo is shared)."""
        try:
            size = path.stat().st_size
            return Content(file_sha256(path, self.cache.root / "verified"), size)
        except OSError:
            return None

    def installed(self, uuid: str) -> Content | None:
        """The content of installed voice ``uuid``'s file, if one is installed."""
        model = self.store.installed().get(uuid)
        return self.content(model.path) if model is not None else None

    def replaced_by(self, partial: Path) -> Content | None:
        """The content of the installed file that the received file at ``partial`` would
        replace (the voice of its manifest's uuid), if any; read from its metadata only."""
        try:
            manifest = strict_json(read_metadata(partial).get("aivm_manifest", "null"))
        except (OSError, ValueError, RecursionError):
            return None  # the install refuses it, and replaces nothing
        try:
            uuid = uuidlib.UUID(str(manifest.get("uuid"))) if isinstance(manifest, dict) else None
        except ValueError:
            return None  # no uuid: the install refuses it
        return self.installed(str(uuid)) if uuid is not None else None

    def forget(self, content: Content | None) -> bool:
        """Remove the bundle of ``content`` unless a loaded voice or an installed file
        still has it; True if one was removed. Never raises: the change it follows is
        done, and a bundle left behind costs disk, not correctness."""
        if content is None or self._in_use(content):
            return False
        removed = remove_aivmx_cuts(content.sha256, self.cache)  # earlier versions' too
        if removed:
            log.info("removed the converted bundle of %s: no voice uses it now", content.sha256)
        return removed

    def _in_use(self, content: Content) -> bool:
        if any(c.credits is not None and c.credits.sha256 == content.sha256
               for c in self.voices().values()):  # fmt: skip
            return True
        for model in self.store.installed().values():  # only a file of that size can match
            if model.size == content.size and self.content(model.path) == content:
                return True
        return False
