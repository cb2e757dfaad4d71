"""Which loaded voice is which AIVM model, and the model manager's changes, all-or-nothing.

A server's voices are of two kinds. Those it started with (``--voice`` and
``--model``, or loaded by the program that made the app) are *fixed*: the
model manager (``/aivm_models``) lists the AIVMX ones, but never unloads,
replaces or removes them. The others are the voices of the models folder:
a loaded voice is an installed one when its source is a file of that folder,
and it is loaded under the name :func:`~yomiage.aivmx.installed.installed_voice_names`
gives, the rule the start-up scan uses too, so names never depend on the order
of installs. Where a fixed voice and an installed file are the same model (one
uuid), the fixed one serves it and the installed copy waits in the folder.

Every change runs in one thread, one at a time (the routes hold their change
lock), and either completes or leaves the folder, the recorded sources and the
loaded voices as they were: each engine step is undone, in reverse order, on
any exception, after the store put the files back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yomiage.aivmx.installed import installed_voice_names
from yomiage.aivmx.metadata import read_metadata, strict_json
from yomiage.aivmx.store import Check, InstalledModel, ModelNotInstalledError, ModelStore
from yomiage.errors import CacheError, ModelLoadError, NoSpaceError
from yomiage.runtime.voice import VoiceCredits
from yomiage.server.engine.service import VoiceCard
from yomiage.server.engine.worker_calls import WorkerCrashed, WorkerUnavailable
from yomiage.server.voicevox.http import VoxError
from yomiage.server.voicevox.synthesis import VoxCatalog
from yomiage.voicevox.aivm_info import aivm_info

if TYPE_CHECKING:
    from yomiage.server.state import ServerState

log = logging.getLogger(__name__)


class _Undo:
    """The inverse of each engine step taken so far, run last first on a failure."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[[], object]]] = []

    def add(self, what: str, step: Callable[[], object]) -> None:
        self._steps.append((what, step))

    def run(self) -> None:
        for what, step in reversed(self._steps):
            try:
                step()
            except Exception as exc:  # the first error is the one raised; this one is logged
                log.error("could not undo a voice change (%s): %s", what, exc)
        self._steps.clear()


class ModelVoices:
    """The model manager's view of a server's voices and its changes of them (blocking:
    call from a worker thread, one change at a time)."""

    def __init__(self, state: ServerState, store: ModelStore) -> None:
        self.state = state
        self.store = store
        self._root = os.path.abspath(store.root)
        # A fixed voice's manifest by its file, with that file's (mtime, size) when read:
        # a listing parses no unchanged file again (the store does so for its own).
        self._manifests: dict[str, tuple[int, int, Mapping[str, Any] | None]] = {}

    # -- which voice is which ----------------------------------------------------

    def is_installed(self, card: VoiceCard) -> bool:
        """Whether a loaded voice is one of the models folder's."""
        return card.source is not None and os.path.dirname(_absolute(card.source)) == self._root

    def fixed(self) -> dict[str, VoiceCard]:
        """The voices the server started with, by name."""
        return {n: c for n, c in self.state.voices.items() if not self.is_installed(c)}

    def fixed_holder(self, uuid: str) -> VoiceCard | None:
        """The fixed voice that is AIVM model ``uuid``, if one is."""
        for card in self.fixed().values():
            if card.credits is not None and card.credits.uuid.lower() == uuid:
                return card
        return None

    def loaded_as(self, model: InstalledModel) -> str | None:
        """The name the installed file of ``model`` is loaded under, if it is."""
        path = _absolute(model.path)
        for name, card in self.state.voices.items():
            if card.source is not None and _absolute(card.source) == path:
                return name
        return None

    def names(self, models: Mapping[str, InstalledModel]) -> dict[str, str]:
        """The name each of ``models`` is loaded under, by uuid (the one naming rule)."""
        return installed_voice_names(((m.uuid, m.name) for m in models.values()), self.fixed())

    # -- listing -----------------------------------------------------------------

    def listing(self) -> dict[str, dict[str, Any]]:
        """``GET /aivm_models``: the installed models, then the fixed AIVMX voices that
        are not installed, by uuid."""
        out = {uuid: self._info(model) for uuid, model in self.store.installed().items()}
        for card in self.fixed().values():
            uuid = card.credits.uuid.lower() if card.credits is not None else ""
            if uuid and uuid not in out:
                out[uuid] = _fixed_info(card, self._manifests)
        return out

    def info(self, uuid: str) -> dict[str, Any]:
        try:
            return self._info(self.store.get(uuid))
        except ModelNotInstalledError:
            card = self.fixed_holder(uuid)
            if card is None:
                raise
            return _fixed_info(card, self._manifests)

    def _info(self, model: InstalledModel) -> dict[str, Any]:
        licence = model.manifest.get("license")
        loaded = self.loaded_as(model) is not None or self.fixed_holder(model.uuid) is not None
        return aivm_info(model.manifest, path=str(model.path), size=model.size, loaded=loaded,
                         licence=licence if isinstance(licence, str) else None)  # fmt: skip

    # -- changes -----------------------------------------------------------------

    def install(self, put: Callable[[Check], InstalledModel]) -> InstalledModel:
        """Install a file and load it: ``put(check)`` is one of the store's installs,
        which calls ``check`` once the new file is in place. The voice it replaces (if
        loaded) is unloaded and the new one loaded, under the naming rule's name, with
        the voices the rule renames; anything failing undoes all of it."""
        undo = _Undo()
        try:
            return put(lambda model: self._swap_in(model, undo))
        except BaseException:
            undo.run()
            raise

    def load(self, uuid: str) -> None:
        """Load an installed model (nothing to do if it, or a fixed voice of its uuid, is)."""
        model = self.store.get(uuid)
        if self.loaded_as(model) is not None or self.fixed_holder(model.uuid) is not None:
            return
        name = self.names(self.store.installed()).get(model.uuid)
        if name is None:
            raise VoxError(409, f"model {model.uuid} has no name to load under: every name it "
                                "could have is a command-line voice's")  # fmt: skip
        undo = _Undo()
        try:
            self._load(name, model.path, undo)
            self._check_styles()
        except BaseException:
            undo.run()
            raise
        finally:
            self._voices_changed()

    def unload(self, uuid: str) -> None:
        """Unload an installed model's voice (a fixed voice is refused: 400)."""
        model = self._installed_or_refused(uuid, "unloaded")
        name = self.loaded_as(model)
        if name is None:
            holder = self.fixed_holder(model.uuid)
            if holder is not None:  # an installed copy of it is never loaded
                raise _fixed_refusal(model.uuid, holder, "unloaded")
            return
        self._check_not_pinned({name}, 400, "cannot be unloaded")
        self._service("unload_voice", name)
        self._voices_changed()

    def uninstall(self, uuid: str, remove: Callable[[], object]) -> None:
        """Unload an installed model's voice, then ``remove()`` its file (the store's
        uninstall); the voices whose names the rule gives back are renamed. A failure
        before the file is gone loads everything back."""
        try:
            model: InstalledModel | None = self._installed_or_refused(uuid, "uninstalled")
        except ModelNotInstalledError:
            model = None  # an unreadable <uuid>.aivmx: the store removes it all the same
        undo = _Undo()
        try:
            if model is not None:
                others = {u: m for u, m in self.store.installed().items() if u != model.uuid}
                name = self.loaded_as(model)
                if name is not None:
                    self._check_not_pinned({name}, 400, "cannot be uninstalled")
                self._rename(others, undo, dropping={name} if name is not None else set())
                if name is not None:
                    self._unload(name, model.path, undo)
            remove()
        except BaseException:
            undo.run()
            raise
        finally:
            self._voices_changed()

    def refuse_fixed(self, uuid: str, what: str) -> None:
        """400 if ``uuid`` is only a fixed voice (nothing installed to ``what``)."""
        self._installed_or_refused(uuid, what)

    # -- inside ------------------------------------------------------------------

    def _installed_or_refused(self, uuid: str, what: str) -> InstalledModel:
        try:
            return self.store.get(uuid)
        except ModelNotInstalledError:
            card = self.fixed_holder(uuid)
            if card is None:
                raise
            raise _fixed_refusal(uuid, card, what) from None

    def _swap_in(self, model: InstalledModel, undo: _Undo) -> None:
        """The check of an install: the new file (in place) loaded, the old one unloaded."""
        try:
            holder = self.fixed_holder(model.uuid)
            if holder is not None:
                log.info("model %s is installed; voice %r, given on the command line, "
                         "serves it", model.uuid, holder.name)  # fmt: skip
                return
            models = self.store.installed()  # the new file included
            name = self.names(models).get(model.uuid)
            if name is None:
                raise VoxError(409, f"model {model.uuid} has no name to load under: every name "
                                    "it could have is a command-line voice's")  # fmt: skip
            old = self.loaded_as(model)  # the file it replaces, loaded from the same path
            self._rename(models, undo, dropping={old} if old is not None else set(),
                         keeping={name} if old == name else set())  # fmt: skip
            if old is not None:
                self._unload(old, model.path, undo)
            self._load(name, model.path, undo)
            self._check_styles()
        finally:
            self._voices_changed()

    def _rename(
        self, models: Mapping[str, InstalledModel], undo: _Undo, *,
        dropping: AbstractSet[str], keeping: AbstractSet[str] = frozenset(),
    ) -> None:  # fmt: skip
        """Reload under the rule's names the loaded installed voices of ``models`` whose
        names it changes (a voice installed or removed frees or shares a name); refused
        (409) if a name the server's settings use would go (``dropping``: names going
        anyway, ``keeping``: names that come back)."""
        names = self.names(models)
        moves: list[tuple[str, str, Path]] = []
        for model in models.values():
            now = self.loaded_as(model)
            if now is not None and now not in dropping and names.get(model.uuid) != now:
                moves.append((now, names[model.uuid], model.path))
        self._check_not_pinned({old for old, _, _ in moves} | (dropping - keeping), 409,
                               "this change would rename or unload it")  # fmt: skip
        for old, _, path in moves:
            self._unload(old, path, undo)
        for _, new, path in moves:
            log.info("installed voice %s is now called %r (the naming rule)", path.name, new)
            self._load(new, path, undo)

    def _check_not_pinned(self, names: AbstractSet[str], status: int, doing: str) -> None:
        """Refuse (``status``) a change ``doing`` something to a voice the settings name."""
        config = self.state.config
        pinned = sorted(n for n in {config.default_voice, *config.voice_aliases.values()}
                        if n and n in names)  # fmt: skip
        if pinned:
            raise VoxError(
                status, f"voice {', '.join(map(repr, pinned))} is this server's --default-voice "
                f"or the target of a --voice-alias, and {doing}; it stays loaded under its name",
            )  # fmt: skip

    def _load(self, name: str, path: Path, undo: _Undo) -> None:
        try:
            self._service("load_voice", name, str(path))
        except (WorkerCrashed, WorkerUnavailable, VoxError, NoSpaceError, CacheError):
            raise  # the worker's, the disk's or the cache's fault: not the file's
        except Exception as exc:  # any failure to load or warm up: the file is the cause
            raise VoxError(422, f"the voice was not loaded: {exc}") from None
        undo.add(f"unload {name!r}", lambda: self._service("unload_voice", name))

    def _unload(self, name: str, path: Path, undo: _Undo) -> None:
        self._service("unload_voice", name)
        undo.add(f"load {name!r} again", lambda: self._service("load_voice", name, str(path)))

    def _service(self, op: str, *args: str) -> None:
        getattr(self.state.service, op)(*args)
        self._voices_changed()

    def _check_styles(self) -> None:
        """Two loaded voices whose styles would share a VOICEVOX id: refused."""
        try:
            VoxCatalog.of(self.state.voices.values())
        except ModelLoadError as exc:
            raise VoxError(422, f"the voice was not loaded: {exc}") from None

    def _voices_changed(self) -> None:
        state = self.state
        if state.default_voice not in state.voices:
            state.default_voice = next(iter(state.voices), None)
        state.metrics.voices.set(len(state.voices))


def _fixed_refusal(uuid: str, card: VoiceCard, what: str) -> VoxError:
    return VoxError(
        400, f"model {uuid} is voice {card.name!r}, which this server was started with "
        f"(--voice or --model): it cannot be {what} while serving; restart without it",
    )  # fmt: skip


def _absolute(path: str | Path) -> str:
    return os.path.abspath(os.path.expanduser(str(path)))


def _fixed_info(
    card: VoiceCard, seen: dict[str, tuple[int, int, Mapping[str, Any] | None]]
) -> dict[str, Any]:
    """``AivmInfo`` of a fixed AIVMX voice: from its file's manifest where the source is a
    local file, else from what the loaded voice says (its speakers, styles and uuids)."""
    path = card.source or ""
    if path.startswith("file://"):
        path = path[len("file://") :]
    manifest = _file_manifest(path, seen)
    size = Path(path).stat().st_size if manifest is not None else 0
    if manifest is None and card.credits is not None:
        manifest = _card_manifest(card, card.credits)
    licence = (manifest or {}).get("license")
    return aivm_info(manifest or {}, path=path, size=size, loaded=True,
                     licence=licence if isinstance(licence, str) else None)  # fmt: skip


def _file_manifest(
    path: str, seen: dict[str, tuple[int, int, Mapping[str, Any] | None]]
) -> Mapping[str, Any] | None:
    """The manifest of the AIVMX file at ``path``, read once per (mtime, size) of it."""
    if not path.lower().endswith(".aivmx") or not os.path.isfile(path):
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    known = seen.get(path)
    if known is not None and known[:2] == (stat.st_mtime_ns, stat.st_size):
        return known[2]
    try:
        parsed = strict_json(read_metadata(Path(path)).get("aivm_manifest", "null"))
    except (OSError, ValueError, RecursionError):
        parsed = None
    manifest = parsed if isinstance(parsed, dict) else None
    seen[path] = (stat.st_mtime_ns, stat.st_size, manifest)
    return manifest


def _card_manifest(card: VoiceCard, credits: VoiceCredits) -> dict[str, Any]:
    styles = card.style_ids or {s: i for i, s in enumerate(card.styles)}
    return {
        "name": credits.name, "description": credits.description, "version": credits.version,
        "uuid": credits.uuid, "license": credits.license,
        "speakers": [
            {"name": speaker, "uuid": credits.speaker_uuids.get(speaker, ""),
             "styles": [{"name": style, "local_id": local} for style, local in styles.items()]}
            for speaker in card.speaker_ids
        ],
    }  # fmt: skip
