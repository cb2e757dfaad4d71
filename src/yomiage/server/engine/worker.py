"""The engine in a supervised child process: a native crash costs a restart, not the server.

:class:`WorkerService` is the :class:`SpeechService` that ``yomiage serve`` hands the
routes. It runs the engine (any :class:`SpeechService`, made by a picklable factory)
in a child process that its :class:`~.worker_supervisor.Supervisor` starts, calls,
and restarts when it crashes or hangs; the HTTP server stays in the parent. Each
call that stands alone is sent once more to a restarted child if the dead one never
began it (:mod:`.worker_retry`); a request's stream is stepped chunk by chunk
(:mod:`.worker_stream`).
What this class adds is the voices: those loaded and unloaded while serving are
replayed on a restarted child before it is ready (:mod:`.worker_voices`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from yomiage.audio import Audio
from yomiage.audio.spool import SpooledAudio
from yomiage.options import SynthesisOptions
from yomiage.server.encoding import OutputFormat
from yomiage.server.engine.liveness import Liveness
from yomiage.server.engine.service import EngineRequest, VoiceCard
from yomiage.server.engine.worker_calls import (
    Generation,
    WorkerCrashed,
    WorkerHung,
    WorkerStartError,
    WorkerUnavailable,
    describe_exit,
)
from yomiage.server.engine.worker_child import ServiceFactory
from yomiage.server.engine.worker_retry import call_retrying
from yomiage.server.engine.worker_stream import WorkerChunkSource
from yomiage.server.engine.worker_supervisor import Supervisor
from yomiage.server.engine.worker_voices import VoiceChanges
from yomiage.text.g2p import Phonemes
from yomiage.text.user_dict import SkippedEntry
from yomiage.text.user_word import UserWord
from yomiage.voicevox.query import SentenceReading

__all__ = ["WorkerChunkSource", "WorkerCrashed", "WorkerHung", "WorkerService",
           "WorkerStartError", "WorkerUnavailable", "describe_exit"]  # fmt: skip


class WorkerService:
    """A :class:`SpeechService` in a supervised child process (see the module docstring).

    ``factory`` builds the service in the child; it must be picklable (a
    module-level function or a ``functools.partial`` of one). The constructor
    returns once the first child is ready, or raises :class:`WorkerStartError`.
    ``start_timeout`` also bounds one :meth:`load_voice` while it reports no progress.
    """

    def __init__(
        self,
        factory: ServiceFactory,
        *,
        start_timeout: float = 900.0,
        ready_timeout: float = 120.0,
        log_level: int | None = None,
        liveness: Liveness | None = None,
    ) -> None:
        self._voices: Mapping[str, VoiceCard] = MappingProxyType({})
        self._changes = VoiceChanges()
        self._changing = threading.Lock()  # one voice change (or its replay) at a time
        self._supervisor = Supervisor(
            factory,
            self._restore_voices,
            start_timeout=start_timeout,
            ready_timeout=ready_timeout,
            log_level=log_level,
            liveness=liveness,
            voices_changed=self._voices_changed,
        )
        self._supervisor.start()

    @property
    def supervisor(self) -> Supervisor:
        """The owner of the child process and the calls on it."""
        return self._supervisor

    # -- the SpeechService face ---------------------------------------------
    @property
    def voices(self) -> Mapping[str, VoiceCard]:
        return self._voices

    @property
    def available(self) -> bool:
        return self.supervisor.available

    @property
    def answering(self) -> bool:
        """Whether the worker answered a ping lately (False while it is stopped or hung)."""
        return self.supervisor.answering

    @property
    def pid(self) -> int | None:
        """The current child's process id (None while none runs)."""
        return self.supervisor.pid

    @property
    def crashes(self) -> int:
        """Children that died on their own (a hang killed by the watchdog is not one)."""
        return self.supervisor.crashes

    @property
    def hangs(self) -> int:
        """Children killed because a call or a ping passed its deadline."""
        return self.supervisor.hangs

    @property
    def restarts(self) -> int:
        return self.supervisor.restarts

    @property
    def last_restart_seconds(self) -> float | None:
        return self.supervisor.last_restart_seconds

    def open(self, request: EngineRequest) -> WorkerChunkSource:
        return WorkerChunkSource(self.supervisor, request)

    def encode(self, audio: SpooledAudio, fmt: OutputFormat, out: str) -> int:
        size: int = call_retrying(self.supervisor, "encode", audio, fmt, out)
        return size

    def warm(self, voice: str) -> None:
        call_retrying(self.supervisor, "warm", voice)

    def read(self, voice: str, text: str, options: SynthesisOptions) -> list[SentenceReading]:
        readings: list[SentenceReading] = call_retrying(
            self.supervisor, "read", voice, text, options
        )
        return readings

    def generate(self, voice: str, reading: Sequence[Phonemes], options: SynthesisOptions) -> Audio:
        audio: Audio = call_retrying(self.supervisor, "generate", voice, list(reading), options)
        return audio

    def load_voice(self, name: str, source: str, *, warm: bool = True) -> Mapping[str, VoiceCard]:
        """Load a voice in the child (see SpeechService); waits for a change in progress."""
        generation = self.supervisor.current()  # before the lock: a restart's replay takes it
        with self._changing:
            self._voices = self._change(generation, "load_voice", name, source, warm)
            self._changes.loaded(name, source, warm)
            return self._voices

    def unload_voice(self, name: str) -> Mapping[str, VoiceCard]:
        generation = self.supervisor.current()
        with self._changing:
            self._voices = self._change(generation, "unload_voice", name)
            self._changes.unloaded(name)
            return self._voices

    def words(self) -> tuple[UserWord, ...]:
        words: tuple[UserWord, ...] = call_retrying(self.supervisor, "words")
        return words

    def remove_word(self, surface: str) -> UserWord | SkippedEntry:
        removed: UserWord | SkippedEntry = call_retrying(self.supervisor, "remove_word", surface)
        return removed

    def update_words(
        self, add: Sequence[UserWord], remove: Sequence[str], keep_existing: bool
    ) -> tuple[UserWord, ...]:
        added: tuple[UserWord, ...] = call_retrying(
            self.supervisor, "update_words", list(add), list(remove), keep_existing
        )
        return added

    def close(self) -> None:
        """Stop the child and start no other (see :meth:`Supervisor.close`)."""
        self.supervisor.close()

    # -- the voices -------------------------------------------------------------
    def _voices_changed(self, voices: Mapping[str, VoiceCard]) -> None:
        """The child loaded voices anew on its own (by this machine's measured plans):
        the same names, their cards (plan, runtime) as they are now. Called by the pipe's
        reader, so never under ``_changing`` (a load holding it waits for that reader):
        the child sends this before it answers any call it held back meanwhile, so a
        change's answer, read after it, is assigned after it too."""
        self._voices = MappingProxyType(dict(voices))

    def _change(self, generation: Generation, op: str, *args: Any) -> Mapping[str, VoiceCard]:
        """A voice loaded or unloaded in the child: the voices it has now. A load may take
        as long as a start (a big voice takes a minute; its progress moves the deadline)."""
        timeout = self.supervisor.load_timeout if op == "load_voice" else None
        voices = self.supervisor.call(generation, op, *args, timeout=timeout)
        return MappingProxyType(dict(voices))

    def _restore_voices(self, generation: Generation, voices: Mapping[str, VoiceCard]) -> None:
        """Make a child just started (``voices``: those it started with) have the voices
        loaded and unloaded since the first one: the supervisor's ``prepare``. Raises
        WorkerCrashed or WorkerUnavailable when the child dies meanwhile."""
        with self._changing:
            replayed = self._changes.replay(functools.partial(self._change, generation))
            self._voices = MappingProxyType(dict(replayed or voices))
