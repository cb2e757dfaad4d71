"""The folder of AIVMX voices a server installs and uninstalls while it runs.

This is AivisSpeech Engine's ``/aivm_models`` feature without its routes: a voice
is one ``*.aivmx`` file in ``root``, uploaded (:meth:`ModelStore.receive` then
:meth:`~ModelStore.install_upload`) or fetched from a source
(:meth:`~ModelStore.install_from`: a web address, ``hf://``, ``s3://``,
``file://`` or a path), updated from where it came from and uninstalled. Files
copied into ``root`` by hand, under any name, are voices too.

Nothing is lost or corrupted: new bytes go to a hidden partial file in ``root``,
are checked as a whole AIVMX file (:func:`~yomiage.aivmx.reader.read_aivmx`), and
only then renamed over ``<uuid>.aivmx`` (or over the file a voice of that uuid
already has). A failed, cut, too large or invalid transfer leaves the installed
file as it was and no partial behind. Where each voice came from is recorded in
``sources.json`` (written atomically).

One :class:`ModelStore` is safe to use from many threads (a server's workers);
two processes sharing one folder are not coordinated.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
import uuid as uuidlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from yomiage.aivmx.fetch import Progress, fetch, recorded_source, shown
from yomiage.aivmx.metadata import read_metadata, strict_json
from yomiage.aivmx.reader import AivmxError, read_aivmx
from yomiage.aivmx.upload import (
    ModelNotInstalledError,
    ModelStoreError,
    NoUpdateError,
    Upload,
    UploadTooLargeError,
    too_large,
)
from yomiage.atomic import write_atomic

__all__ = [
    "InstalledModel", "ModelNotInstalledError", "ModelStore", "ModelStoreError",
    "NoUpdateError", "Upload", "UploadTooLargeError",
]  # fmt: skip

SUFFIX = ".aivmx"
SOURCES_FILE = "sources.json"
PARTIAL_PREFIX, PARTIAL_SUFFIX = ".upload-", ".partial"
STALE_PARTIAL_S = 3600.0  # a partial untouched this long was left by a server that died
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


class ModelStore:
    """The AIVMX voices in ``root`` (created if missing); ``max_bytes`` caps one voice.

    ``cache_dir``, ``offline`` and ``token`` go to :func:`yomiage.sources.resolve`
    for ``hf://`` and ``s3://`` sources (which are kept in that cache too); offline
    mode also refuses web addresses. Thread-safe. Local paths and ``file://`` read
    the server's disk: a route taking sources from clients may want to refuse them
    (``isinstance(yomiage.sources.parse(s), LocalSource)``).
    """

    def __init__(
        self,
        root: Path | str,
        *,
        max_bytes: int = 2 << 30,
        cache_dir: Path | str | None = None,
        offline: bool | None = None,
        token: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.cache_dir = cache_dir
        self.offline = offline
        self.token = token
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, int, int, int], InstalledModel | None] = {}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ModelStoreError(
                f"cannot create the model folder {self.root}: {exc.strerror or exc}"
            ) from exc
        self._remove_stale_partials()

    # -- listing ---------------------------------------------------------------

    def installed(self) -> dict[str, InstalledModel]:
        """Installed voices by uuid, sorted by name. Reads only the files' metadata, and
        only of files that changed since the last call; a file that cannot be read is
        skipped with a warning."""
        sources = self._sources()
        seen: dict[tuple[str, int, int, int], InstalledModel | None] = {}
        found: dict[str, InstalledModel] = {}
        for path in sorted(self._files()):
            try:
                stat = path.stat()
            except OSError:
                continue  # removed meanwhile
            key = (path.name, stat.st_mtime_ns, stat.st_size, stat.st_ino)
            model = self._seen[key] if key in self._seen else _describe(path, stat.st_size)
            seen[key] = model
            if model is None:
                continue
            other = found.get(model.uuid)
            if other is not None:
                keep = other if other.path.name == f"{model.uuid}{SUFFIX}" else model
                if key not in self._seen:  # once, not at every listing
                    log.warning("%s and %s hold the same model %s; using %s",
                                other.path, model.path, model.uuid, keep.path)  # fmt: skip
                model = keep
            found[model.uuid] = _with_source(model, sources.get(model.uuid))
        self._seen = seen
        return dict(sorted(found.items(), key=lambda kv: (kv[1].name.casefold(), kv[0])))

    def get(self, uuid: str) -> InstalledModel:
        """The installed voice ``uuid`` (any case); ModelNotInstalledError if none."""
        key = _canonical_uuid(uuid)
        model = self.installed().get(key) if key else None
        if model is None:
            raise ModelNotInstalledError(f"model {shown(uuid)} is not installed")
        return model

    # -- installing ------------------------------------------------------------

    @contextmanager
    def receive(self) -> Iterator[Upload]:
        """A partial file in ``root`` to write an upload into; install it with
        :meth:`install_upload` inside the block. Otherwise, or on an exception, the
        partial is deleted on leaving."""
        try:
            fd, name = tempfile.mkstemp(prefix=PARTIAL_PREFIX, suffix=PARTIAL_SUFFIX, dir=self.root)
        except OSError as exc:
            raise ModelStoreError(
                f"cannot write to the model folder {self.root}: {exc.strerror or exc}"
            ) from exc
        upload = Upload(Path(name), os.fdopen(fd, "wb"), self.max_bytes)
        try:
            yield upload
        finally:
            with suppress(ModelStoreError):
                upload.close()
            if not upload.installed:
                upload.path.unlink(missing_ok=True)

    def install_upload(self, upload: Upload) -> InstalledModel:
        """Check the received file and install it (replacing the voice of the same uuid);
        its source is recorded as none. AivmxError if it is not a usable AIVMX voice."""
        return self._install(upload, None, "the uploaded file")

    def install_from(self, source: str, progress: Progress | None = None) -> InstalledModel:
        """Fetch ``source`` and install it as :meth:`install_upload` does, recording the
        source for :meth:`update`. A web address is downloaded directly (an AivisHub
        model page from its download address); anything else goes through
        :func:`yomiage.sources.resolve`. Raises SourceError subclasses (OfflineError
        for a web address in offline mode), UploadTooLargeError and AivmxError."""
        recorded = recorded_source(source)
        with self.receive() as upload:
            self._fetch(recorded, upload, progress)
            return self._install(upload, recorded, f"the file from {shown(source)}")

    def update(self, uuid: str, progress: Progress | None = None) -> InstalledModel:
        """Fetch voice ``uuid`` again from its recorded source and install it in place.
        NoUpdateError if it has no source (an upload) or the source holds the same file."""
        model = self.get(uuid)
        if model.source is None:
            raise NoUpdateError(
                f"model {model.uuid} ({shown(model.name)}) was uploaded or copied in by hand: "
                "there is no source to update it from; install the new file instead"
            )
        with self.receive() as upload:
            self._fetch(model.source, upload, progress)
            if upload.sha256 == _file_sha256(model.path):
                raise NoUpdateError(
                    f"model {model.uuid} is up to date: {shown(model.source)} holds the same file"
                )
            return self._install(
                upload, model.source, f"the file from {shown(model.source)}", expect=model.uuid
            )

    def uninstall(self, uuid: str) -> InstalledModel:
        """Delete voice ``uuid``'s file and its recorded source; returns what was removed."""
        with self._lock:
            model = self.get(uuid)
            try:
                model.path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise ModelStoreError(f"cannot delete {model.path}: {exc.strerror or exc}") from exc
            self._record(model.uuid, None)
        log.info("uninstalled model %s (%s)", model.uuid, model.name)
        return model

    # -- inside ----------------------------------------------------------------

    def _fetch(self, source: str, upload: Upload, progress: Progress | None) -> None:
        fetch(source, upload, max_bytes=self.max_bytes,
              too_large=lambda size: too_large(self.max_bytes, size), progress=progress,
              cache_dir=self.cache_dir, offline=self.offline, token=self.token)  # fmt: skip

    def _install(
        self, upload: Upload, source: str | None, what: str, expect: str | None = None
    ) -> InstalledModel:
        upload.close()
        try:
            checked = read_aivmx(upload.path)
        except AivmxError as exc:
            raise AivmxError(str(exc).replace(str(upload.path), what, 1)) from exc
        key = _canonical_uuid(checked.uuid)
        if key is None:
            raise AivmxError(f"{what}: its manifest's uuid {shown(checked.uuid)} is not a UUID")
        if expect is not None and key != expect:
            raise NoUpdateError(
                f"{what} is model {key}, not {expect}; install it as a model of its own"
            )
        with self._lock:
            target = self._target(key)
            try:
                os.chmod(upload.path, 0o644)  # mkstemp's partial is private; a voice is not
                os.replace(upload.path, target)
            except OSError as exc:
                raise ModelStoreError(
                    f"cannot install into {target}: {exc.strerror or exc}"
                ) from exc
            upload.installed = True
            self._record(key, source)
            model = _describe(target, target.stat().st_size)
        if model is None:  # read_aivmx accepted it, so the metadata is there
            raise ModelStoreError(f"{target} was installed but cannot be read back")
        log.info("installed model %s (%s) as %s", key, model.name, target.name)
        return _with_source(model, source)

    def _target(self, uuid: str) -> Path:
        """Where voice ``uuid`` goes: over its file if installed, else ``<uuid>.aivmx``
        unless that name holds another voice (copied in by hand)."""
        installed = self.installed()
        if uuid in installed:
            return installed[uuid].path
        target = self.root / f"{uuid}{SUFFIX}"
        if any(m.path == target for m in installed.values()):
            raise ModelStoreError(
                f"{target.name} holds another model; rename it to install model {uuid}"
            )
        return target

    def _files(self) -> Iterator[Path]:
        try:
            entries = list(self.root.iterdir())
        except OSError as exc:
            log.warning("cannot list the model folder %s: %s", self.root, exc)
            return
        for path in entries:
            if path.suffix.lower() == SUFFIX and not path.name.startswith(".") and path.is_file():
                yield path

    def _sources(self) -> dict[str, str]:
        path = self.root / SOURCES_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("%s cannot be read (%s); the models' sources are unknown", path, exc)
            return {}
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, dict):
            return {}
        return {
            key: entry["source"]
            for key, entry in models.items()
            if isinstance(entry, dict) and isinstance(entry.get("source"), str)
        }

    def _record(self, uuid: str, source: str | None) -> None:
        """Set (or with None remove) the recorded source of ``uuid``; under the lock."""
        sources = self._sources()
        if sources.get(uuid) == source:
            return
        if source is None:
            sources.pop(uuid, None)
        else:
            sources[uuid] = source
        data = {"version": 1, "models": {k: {"source": v} for k, v in sorted(sources.items())}}
        try:
            write_atomic(self.root / SOURCES_FILE, json.dumps(data, indent=2) + "\n", sync=True)
        except OSError as exc:
            raise ModelStoreError(
                f"model {uuid}: the file is in place but its source could not be recorded "
                f"in {self.root / SOURCES_FILE}: {exc.strerror or exc}"
            ) from exc

    def _remove_stale_partials(self) -> None:
        cutoff = time.time() - STALE_PARTIAL_S
        for path in self.root.glob(f"{PARTIAL_PREFIX}*{PARTIAL_SUFFIX}"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except OSError:
                pass


def _describe(path: Path, size: int) -> InstalledModel | None:
    """The voice in ``path`` from its metadata only; None (and a warning) if unreadable."""
    try:
        manifest = strict_json(read_metadata(path).get("aivm_manifest", "null"))
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("skipping %s: not a readable AIVMX file (%s)", path, exc)
        return None
    if not isinstance(manifest, dict):
        log.warning("skipping %s: no AIVM manifest in its metadata", path)
        return None
    key = _canonical_uuid(manifest.get("uuid"))
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


def _with_source(model: InstalledModel, source: str | None) -> InstalledModel:
    return model if model.source == source else replace(model, source=source)


def _canonical_uuid(value: object) -> str | None:
    """``value`` as a lowercase hyphenated UUID; None if it is not one. File names are
    made from it, so nothing else may pass."""
    if not isinstance(value, str) or len(value) != 36:
        return None
    try:
        parsed = uuidlib.UUID(value)
    except ValueError:
        return None
    return str(parsed) if str(parsed) == value.lower() else None


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while block := stream.read(HASH_CHUNK):
                digest.update(block)
    except OSError:
        return ""  # gone or unreadable: anything fetched differs
    return digest.hexdigest()
