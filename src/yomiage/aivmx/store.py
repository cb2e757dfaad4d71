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
already has), the old file kept aside (``.replaced-<name>``) until the caller's
``check`` (a server loads the voice) has passed and the source is recorded. Any
failure on the way, of any type, puts the old file and record back (or removes
the new voice), so a failed, cut, too large, invalid or unloadable file leaves
the folder as it was. Where each voice came from is recorded in
``sources.json`` (written atomically); one that cannot be read is never
overwritten: changes that would rewrite it are refused until it is fixed.

One :class:`ModelStore` is safe to use from many threads (a server's workers);
two processes sharing one folder are not coordinated. The partial and kept-aside
files, and the clean-up after a change that was cut off, are in
:mod:`yomiage.aivmx.store_files`; what one file is, in
:mod:`yomiage.aivmx.installed_model`.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from yomiage.aivmx.fetch import Progress, fetch, recorded_source, shown
from yomiage.aivmx.installed_model import (
    InstalledModel,
    canonical_uuid,
    describe,
    file_sha256,
    unlisted,
    with_source,
)
from yomiage.aivmx.reader import AivmxError, read_aivmx
from yomiage.aivmx.sources_file import SOURCES_FILE, read_sources, record_source
from yomiage.aivmx.stop import FetchStop
from yomiage.aivmx.store_files import (
    PARTIAL_PREFIX,
    PARTIAL_SUFFIX,
    REMOVED,
    REPLACED_PREFIX,
    SUFFIX,
    keep_aside,
    put_back,
    remove_stale_partials,
    restore_cut_replacements,
)
from yomiage.aivmx.upload import (
    ModelNotInstalledError,
    ModelStoreError,
    NoUpdateError,
    Upload,
    UploadTooLargeError,
    too_large,
)
from yomiage.errors import ModelLoadError

__all__ = [
    "SOURCES_FILE",
    "InstalledModel",
    "ModelNotInstalledError",
    "ModelStore",
    "ModelStoreError",
    "NoUpdateError",
    "Upload",
    "UploadTooLargeError",
    "canonical_uuid",
]  # fmt: skip

log = logging.getLogger(__name__)
# What a caller checks of a new file once it is in place (a server loads it); raising
# anything undoes the install.
Check = Callable[["InstalledModel"], None]


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
        remove_stale_partials(self.root)
        restore_cut_replacements(self.root)

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
            model = self._seen[key] if key in self._seen else describe(path, stat.st_size)
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
            found[model.uuid] = with_source(model, sources.get(model.uuid))
        self._seen = seen
        return dict(sorted(found.items(), key=lambda kv: (kv[1].name.casefold(), kv[0])))

    def get(self, uuid: str) -> InstalledModel:
        """The installed voice ``uuid`` (any case); ModelNotInstalledError if none."""
        key = canonical_uuid(uuid)
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

    def install_upload(self, upload: Upload, check: Check | None = None) -> InstalledModel:
        """Check the received file and install it (replacing the voice of the same uuid);
        its source is recorded as none. AivmxError if it is not a usable AIVMX voice.
        ``check`` runs once the new file is in place; whatever it raises, the install is
        undone (the old file and record put back) and the error raised."""
        what = f"the uploaded file {shown(upload.filename)}" if upload.filename else None
        return self._install(upload, None, what or "the uploaded file", check=check)

    def install_from(
        self, source: str, progress: Progress | None = None, check: Check | None = None
    ) -> InstalledModel:
        """Fetch ``source`` and install it as :meth:`install_upload` does, recording the
        source for :meth:`update`. A web address is downloaded directly (an AivisHub
        model page from its download address); anything else goes through
        :func:`yomiage.sources.resolve`. Raises SourceError subclasses (OfflineError
        for a web address in offline mode), UploadTooLargeError and AivmxError."""
        with self.receive() as upload:
            recorded = self.fetch_into(source, upload, progress=progress)
            return self.install_fetched(upload, recorded, check=check)

    def fetch_into(
        self,
        source: str,
        upload: Upload,
        *,
        progress: Progress | None = None,
        stop: FetchStop | None = None,
    ) -> str:
        """The first half of :meth:`install_from`: fetch ``source`` into ``upload`` (from
        :meth:`receive`) taking no lock, so a slow source holds no other change back;
        ``stop`` bounds it in time and stops it from another thread. Returns the source
        as :meth:`install_fetched` records it."""
        recorded = recorded_source(source)
        self._fetch(recorded, upload, progress, stop)
        return recorded

    def install_fetched(
        self, upload: Upload, source: str, check: Check | None = None
    ) -> InstalledModel:
        """The second half of :meth:`install_from`: check and install what
        :meth:`fetch_into` fetched from ``source``."""
        return self._install(upload, source, f"the file from {shown(source)}", check=check)

    def update(
        self, uuid: str, progress: Progress | None = None, check: Check | None = None
    ) -> InstalledModel:
        """Fetch voice ``uuid`` again from its recorded source and install it in place.
        NoUpdateError if it has no source (an upload) or the source holds the same file."""
        with self.receive() as upload:
            model = self.fetch_update(uuid, upload, progress=progress)
            return self.install_update(upload, model, check=check)

    def fetch_update(
        self,
        uuid: str,
        upload: Upload,
        *,
        progress: Progress | None = None,
        stop: FetchStop | None = None,
    ) -> InstalledModel:
        """The first half of :meth:`update`, taking no lock (as :meth:`fetch_into`): the
        newest file of voice ``uuid`` into ``upload``; returns the voice as installed."""
        model = self.get(uuid)
        if model.source is None:
            raise NoUpdateError(
                f"model {model.uuid} ({shown(model.name)}) was uploaded or copied in by hand: "
                "there is no source to update it from; install the new file instead"
            )
        self._fetch(model.source, upload, progress, stop)
        if upload.sha256 == file_sha256(model.path):
            raise NoUpdateError(
                f"model {model.uuid} is up to date: {shown(model.source)} holds the same file"
            )
        return model

    def install_update(
        self, upload: Upload, model: InstalledModel, check: Check | None = None
    ) -> InstalledModel:
        """The second half of :meth:`update`: install what :meth:`fetch_update` fetched
        for ``model``, if it is still installed (ModelNotInstalledError otherwise)."""
        self.get(model.uuid)  # uninstalled while it was fetched: not brought back
        source = model.source or ""
        return self._install(upload, source, f"the file from {shown(source)}",
                             expect=model.uuid, check=check)  # fmt: skip

    def uninstall(self, uuid: str) -> InstalledModel:
        """Delete voice ``uuid``'s file and its recorded source; returns what was removed.
        A ``<uuid>.aivmx`` whose metadata cannot be read (so it is never listed) is
        removed too: whatever it holds, nothing else can take it out of the folder."""
        with self._lock:
            try:
                model = self.get(uuid)
            except ModelNotInstalledError:
                model = self._unlisted(uuid)
            self._sources(strict=True)  # a record that cannot be rewritten: refuse first
            # Moved aside, not deleted, until the record is rewritten: a failure puts it back.
            aside = model.path.with_name(f"{REPLACED_PREFIX}{model.path.name}{REMOVED}")
            try:
                os.replace(model.path, aside)
                kept: Path | None = aside
            except FileNotFoundError:
                kept = None
            except OSError as exc:
                raise ModelStoreError(f"cannot delete {model.path}: {exc.strerror or exc}") from exc
            try:
                self._record(model.uuid, None)
            except BaseException:
                if kept is not None:
                    os.replace(kept, model.path)
                raise
            if kept is not None:
                kept.unlink(missing_ok=True)
        log.info("uninstalled model %s (%s)", model.uuid, model.name)
        return model

    # -- inside ----------------------------------------------------------------

    def _fetch(
        self, source: str, upload: Upload, progress: Progress | None, stop: FetchStop | None = None
    ) -> None:
        fetch(source, upload, max_bytes=self.max_bytes,
              too_large=lambda size: too_large(self.max_bytes, size), progress=progress,
              cache_dir=self.cache_dir, offline=self.offline, token=self.token,
              stop=stop)  # fmt: skip

    def _install(
        self, upload: Upload, source: str | None, what: str, expect: str | None = None,
        check: Check | None = None,
    ) -> InstalledModel:  # fmt: skip
        upload.close()
        try:
            checked = read_aivmx(upload.path)
        except ModelLoadError as exc:  # its config's errors too: no message names the partial
            raise AivmxError(str(exc).replace(str(upload.path), what)) from exc
        key = canonical_uuid(checked.uuid)
        if key is None:
            raise AivmxError(f"{what}: its manifest's uuid {shown(checked.uuid)} is not a UUID")
        if expect is not None and key != expect:
            raise NoUpdateError(
                f"{what} is model {key}, not {expect}; install it as a model of its own"
            )
        with self._lock:
            target = self._target(key)
            self._sources(strict=True)  # a record that cannot be rewritten: refuse first
            kept = keep_aside(target)
            try:
                try:
                    os.chmod(upload.path, 0o644)  # mkstemp's partial is private; a voice is not
                    os.replace(upload.path, target)
                except OSError as exc:
                    raise ModelStoreError(
                        f"cannot install into {target}: {exc.strerror or exc}"
                    ) from exc
                upload.installed = True
                model = describe(target, target.stat().st_size)
                if model is None:  # read_aivmx accepted it, so the metadata is there
                    raise ModelStoreError(f"{target} was installed but cannot be read back")
                model = with_source(model, source)
                if check is not None:
                    check(model)
                self._record(key, source)
            except BaseException:
                put_back(target, kept)
                raise
            if kept is not None:
                kept.unlink(missing_ok=True)
        log.info("installed model %s (%s) as %s", key, model.name, target.name)
        return model

    def _unlisted(self, uuid: str) -> InstalledModel:
        """The unreadable file named ``<uuid>.aivmx``, as a model with no manifest."""
        key = canonical_uuid(uuid)
        path = self.root / f"{key}{SUFFIX}"
        if key is None or not path.is_file():
            raise ModelNotInstalledError(f"model {shown(uuid)} is not installed")
        return unlisted(path, key)

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

    def _sources(self, *, strict: bool = False) -> dict[str, str]:
        return read_sources(self.root, strict=strict)

    def _record(self, uuid: str, source: str | None) -> None:
        """Set (or with None remove) the recorded source of ``uuid``; under the lock."""
        record_source(self.root, uuid, source)
