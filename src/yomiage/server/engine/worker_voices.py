"""The voices loaded and unloaded in a running worker, kept so that a restarted one has them too.

A worker that crashes is restarted from its factory, which knows only the
voices it started with. Without this record, a crash silently brought back a
voice an operator had unloaded and lost one loaded since. :class:`VoiceChanges`
keeps the net effect of the changes made so far (a voice loaded, unloaded, loaded
again from elsewhere is one unload and one load, however often it happened), and
replays it on the new worker before that is reported ready.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from yomiage.errors import VoiceNotLoadedError
from yomiage.server.engine.service import VoiceCard
from yomiage.server.engine.worker_calls import WorkerCrashed, WorkerUnavailable

log = logging.getLogger(__name__)

Voices = Mapping[str, VoiceCard]


@dataclass(frozen=True)
class VoiceLoad:
    source: str
    warm: bool


class VoiceChanges:
    """The runtime loads and unloads of one :class:`~yomiage.server.engine.worker.WorkerService`.

    Replaying first unloads every voice unloaded since the start (one of them
    may be back under the same name: it is in the loads too), then loads, in the
    order they were last loaded, the voices loaded since. Not thread-safe: the
    worker calls it under its lock for voice changes.
    """

    def __init__(self) -> None:
        self._unloaded: dict[str, None] = {}  # an ordered set
        self._loaded: dict[str, VoiceLoad] = {}

    def __bool__(self) -> bool:
        return bool(self._unloaded or self._loaded)

    def loaded(self, name: str, source: str, warm: bool) -> None:
        self._loaded.pop(name, None)
        self._loaded[name] = VoiceLoad(source, warm)

    def unloaded(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._unloaded[name] = None

    def replay(self, change: Callable[..., Voices]) -> Voices | None:
        """Apply the changes to a new worker through ``change("unload_voice", name)`` and
        ``change("load_voice", name, source, warm)``; the voices it has after the last one
        that worked (None if none did).

        An unload of a voice the worker does not have, or a load that fails now, is
        logged and dropped from the record. If the worker dies on a change (a
        WorkerCrashed or WorkerUnavailable), that change is dropped too, so it cannot
        crash every restart, and the error is raised: the worker is being restarted.
        """
        voices: Voices | None = None
        for name in list(self._unloaded):
            try:
                voices = change("unload_voice", name)
            except VoiceNotLoadedError:
                del self._unloaded[name]  # loaded and unloaded since the start: nothing to do
            except (WorkerCrashed, WorkerUnavailable):
                del self._unloaded[name]
                raise
            except Exception as exc:
                del self._unloaded[name]
                log.error("the restarted worker could not unload voice %r: %s", name, exc)
        for name, load in list(self._loaded.items()):
            try:
                voices = change("load_voice", name, load.source, load.warm)
            except (WorkerCrashed, WorkerUnavailable):
                del self._loaded[name]
                log.error("the worker died loading voice %r again; dropped", name)
                raise
            except Exception as exc:
                del self._loaded[name]
                log.error("the restarted worker could not load voice %r again (%s); dropped",
                          name, exc)  # fmt: skip
        return voices
