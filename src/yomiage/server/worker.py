"""The engine in a supervised child process: a native crash costs a restart, not the server.

OpenJTalk, libsndfile and ONNX Runtime are C and C++; an input that reaches a
bug in them kills the process it runs in (SIGSEGV), with no exception and no
log line. :class:`WorkerService` runs the engine (any :class:`SpeechService`,
made by a picklable factory) in a child process and talks to it over a pipe;
the HTTP server stays in the parent. When the child dies, every request it
was working on fails at once with :class:`WorkerCrashed` (the routes answer
500 ``worker_crashed`` when nothing was sent yet), the crash is counted, and a
new child is started and warmed; requests that arrive meanwhile wait for it
(:class:`WorkerUnavailable` past ``ready_timeout``).

The protocol is pull-based, like the in-process stream: the parent asks for
each chunk, so a slow client never makes the child run ahead, and a cancel
reaches the child at once (it does not queue behind the step in progress).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from yomiage.audio import Audio, AudioChunk
from yomiage.errors import Cancelled, YomiageError
from yomiage.options import SynthesisOptions
from yomiage.server.encoding import OutputFormat
from yomiage.server.service import VoiceCard
from yomiage.server.worker_child import ServiceFactory, worker_main
from yomiage.text.g2p import Phonemes
from yomiage.text.user_dict import SkippedEntry, UserWord
from yomiage.voicevox.query import SentenceReading

log = logging.getLogger(__name__)


class WorkerCrashed(YomiageError):
    """The worker process died while it worked on this request (it is being restarted)."""


class WorkerUnavailable(YomiageError):
    """No worker process is ready (one is starting); retry shortly."""


class WorkerStartError(YomiageError):
    """The worker process could not start its engine (its message says why)."""


@dataclass
class _Call:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    value: Any = None

    def finish(self, ok: bool, value: Any) -> None:
        self.ok, self.value = ok, value
        self.done.set()


@dataclass
class _Generation:
    """One child process and the calls waiting on it."""

    number: int
    conn: Connection
    process: Any  # multiprocessing's SpawnProcess
    calls: dict[int, _Call] = field(default_factory=dict)
    alive: bool = True
    reader: threading.Thread | None = None


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class WorkerService:
    """A :class:`SpeechService` in a supervised child process (see the module docstring).

    ``factory`` builds the service in the child; it must be picklable (a
    module-level function or a ``functools.partial`` of one). The constructor
    returns once the first child is ready, or raises :class:`WorkerStartError`.
    """

    def __init__(
        self,
        factory: ServiceFactory,
        *,
        start_timeout: float = 900.0,
        ready_timeout: float = 120.0,
        log_level: int | None = None,
    ) -> None:
        self._factory = factory
        self._start_timeout = start_timeout
        self._ready_timeout = ready_timeout
        self._log_level = (
            logging.getLogger().getEffectiveLevel() if log_level is None else log_level
        )
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._ready = threading.Event()
        self._closing = False
        self._generation: _Generation | None = None
        self.crashes = 0
        self.restarts = 0
        self.last_restart_seconds: float | None = None
        self.failure: str | None = None  # why the last start failed, while none runs
        self._voices = self._start(0)

    # -- the SpeechService face ---------------------------------------------
    @property
    def voices(self) -> Mapping[str, VoiceCard]:
        return self._voices

    @property
    def available(self) -> bool:
        return self._ready.is_set()

    @property
    def pid(self) -> int | None:
        """The current child's process id (None while none runs)."""
        generation = self._generation
        return generation.process.pid if generation is not None and generation.alive else None

    def open(
        self, voice: str, text: str, options: SynthesisOptions, early_audio: bool = True
    ) -> WorkerChunkSource:
        return WorkerChunkSource(self, voice, text, options, early_audio)

    def encode(self, audio: Audio, fmt: OutputFormat) -> bytes:
        data: bytes = self._call(self._current(), "encode", audio, fmt)
        return data

    def warm(self, voice: str) -> None:
        self._call(self._current(), "warm", voice)

    def read(self, voice: str, text: str, options: SynthesisOptions) -> list[SentenceReading]:
        readings: list[SentenceReading] = self._call(self._current(), "read", voice, text, options)
        return readings

    def generate(self, voice: str, reading: Sequence[Phonemes], options: SynthesisOptions) -> Audio:
        audio: Audio = self._call(self._current(), "generate", voice, list(reading), options)
        return audio

    def words(self) -> tuple[UserWord, ...]:
        words: tuple[UserWord, ...] = self._call(self._current(), "words")
        return words

    def add_word(
        self, surface: str, reading: str, accent: int | None, priority: int, word_type: str
    ) -> UserWord:
        word: UserWord = self._call(
            self._current(), "add_word", surface, reading, accent, priority, word_type
        )
        return word

    def remove_word(self, surface: str) -> UserWord | SkippedEntry:
        removed: UserWord | SkippedEntry = self._call(self._current(), "remove_word", surface)
        return removed

    def update_words(
        self, add: Sequence[UserWord], remove: Sequence[str], keep_existing: bool
    ) -> tuple[UserWord, ...]:
        added: tuple[UserWord, ...] = self._call(
            self._current(), "update_words", list(add), list(remove), keep_existing
        )
        return added

    def close(self) -> None:
        """Stop the child and start no other; calls still waiting fail with WorkerCrashed.

        The child is asked to exit (its work in flight is dropped) and killed if it
        does not within 10 s; the pipe is closed only once the reader is done with it.
        """
        with self._lock:
            self._closing = True
            generation = self._generation
        self._ready.clear()
        if generation is None:
            return
        self._notify(generation, "stop")
        generation.process.join(timeout=10)
        if generation.process.is_alive():
            generation.process.kill()
            generation.process.join(timeout=5)
        if generation.reader is not None:
            generation.reader.join(timeout=10)
        with contextlib.suppress(OSError):
            generation.conn.close()

    # -- calls ------------------------------------------------------------------
    def _current(self) -> _Generation:
        """The running child, waiting for one that is starting."""
        if not self._ready.wait(self._ready_timeout):
            reason = f" ({self.failure})" if self.failure else ""
            raise WorkerUnavailable(f"the synthesis worker is restarting{reason}; retry shortly")
        generation = self._generation
        if generation is None or self._closing:
            raise WorkerUnavailable("the server is shutting down")
        return generation

    def _call(self, generation: _Generation, op: str, *args: Any) -> Any:
        call = _Call()
        with self._lock:
            if not generation.alive:
                raise WorkerCrashed("the synthesis worker died; it is being restarted")
            call_id = next(self._ids)
            generation.calls[call_id] = call
        try:
            with self._send_lock:
                generation.conn.send((call_id, op, args))
        except (OSError, ValueError):
            with self._lock:
                generation.calls.pop(call_id, None)
            raise WorkerCrashed("the synthesis worker died; it is being restarted") from None
        call.done.wait()
        if call.ok:
            return call.value
        raise call.value

    def _notify(self, generation: _Generation, op: str, *args: Any) -> None:
        """A message that needs no answer (cancel); lost if the child is gone."""
        with contextlib.suppress(OSError, ValueError), self._send_lock:
            generation.conn.send((0, op, args))

    # -- the child's life -------------------------------------------------------
    def _start(self, number: int) -> Mapping[str, VoiceCard]:
        parent, child = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=worker_main,
            args=(child, self._factory, self._log_level),
            name=f"yomiage-worker-{number}",
            daemon=True,
        )
        process.start()
        child.close()
        deadline = time.monotonic() + self._start_timeout
        try:
            while not parent.poll(0.2):
                if not process.is_alive():
                    raise WorkerStartError(
                        "the synthesis worker died while loading the voices "
                        f"({describe_exit(process.exitcode)})"
                    )
                if time.monotonic() > deadline:
                    process.kill()
                    raise WorkerStartError(
                        f"the synthesis worker did not load within {self._start_timeout:g} s"
                    )
            kind, payload = parent.recv()
        except (EOFError, OSError):
            process.join(timeout=5)
            raise WorkerStartError(
                f"the synthesis worker died while loading ({describe_exit(process.exitcode)})"
            ) from None
        except BaseException:
            parent.close()
            raise
        if kind != "ready":
            parent.close()
            process.join(timeout=10)
            if isinstance(payload, YomiageError):
                raise payload
            raise WorkerStartError(f"the synthesis worker could not start: {payload}")
        generation = _Generation(number, parent, process)
        generation.reader = threading.Thread(
            target=self._read, args=(generation,), name="yomiage-worker-reader", daemon=True
        )
        with self._lock:
            self._generation = generation
        generation.reader.start()
        self.failure = None
        self._ready.set()
        voices: Mapping[str, VoiceCard] = payload
        return voices

    def _read(self, generation: _Generation) -> None:
        """Route the child's answers to their callers until it dies, then restart it."""
        try:
            while True:
                call_id, ok, value = generation.conn.recv()
                with self._lock:
                    call = generation.calls.pop(call_id, None)
                if call is not None:
                    call.finish(ok, value)
        except Exception as exc:  # EOF when the child is gone; anything else breaks the pipe too
            if not isinstance(exc, EOFError | OSError):
                log.error("the pipe to the synthesis worker broke: %s", exc)
        finally:
            self._lost(generation)

    def _lost(self, generation: _Generation) -> None:
        """The child is gone: fail what waited on it and, unless closing, start another."""
        self._ready.clear()
        generation.process.join(timeout=5)
        with self._lock:
            generation.alive = False
            pending = list(generation.calls.values())
            generation.calls.clear()
            closing = self._closing
        how = describe_exit(generation.process.exitcode)
        for call in pending:
            call.finish(False, WorkerCrashed(f"the synthesis worker died ({how}); retry shortly"))
        if closing:
            return
        self.crashes += 1
        log.error(
            "the synthesis worker died (%s) with %d call(s) in flight; restarting it",
            how,
            len(pending),
        )
        self._restart(generation.number + 1)

    def _restart(self, number: int) -> None:
        delay = 0.5
        while not self._closing:
            started = time.perf_counter()
            try:
                self._start(number)
            except Exception as exc:  # keep trying: the cause may pass (memory, disk)
                self.failure = str(exc)
                log.error("the synthesis worker did not restart: %s; again in %.1f s", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            self.restarts += 1
            self.last_restart_seconds = time.perf_counter() - started
            log.warning("synthesis worker restarted in %.2f s", self.last_restart_seconds)
            return


class WorkerChunkSource:
    """One request's stream in the child, stepped from the parent's threads."""

    def __init__(
        self,
        service: WorkerService,
        voice: str,
        text: str,
        options: SynthesisOptions,
        early_audio: bool = True,
    ) -> None:
        self._service = service
        self._request = (voice, text, options, early_audio)
        self._generation: _Generation | None = None
        self._stream_id = 0
        self._cancelled = False

    def next(self) -> AudioChunk | None:
        service = self._service
        if self._generation is None:
            if self._cancelled:
                raise Cancelled("the synthesis was cancelled")
            generation, stream_id = self._open()
            self._generation, self._stream_id = generation, stream_id
            if self._cancelled:  # cancelled while the stream was being opened
                service._notify(generation, "cancel", stream_id)
        chunk: AudioChunk | None = service._call(self._generation, "next", self._stream_id)
        return chunk

    def _open(self) -> tuple[_Generation, int]:
        """Open the stream in the child. Opening does no work, so a request that meets a
        child just dying (killed by another request) opens again in the next one."""
        service = self._service
        for attempt in range(2):
            generation = service._current()
            stream_id = next(service._ids)
            try:
                service._call(generation, "open", stream_id, *self._request)
            except WorkerCrashed:
                if attempt:
                    raise
                continue
            return generation, stream_id
        raise AssertionError("unreachable")

    def cancel(self) -> None:
        self._cancelled = True
        if self._generation is not None:
            self._service._notify(self._generation, "cancel", self._stream_id)

    def close(self) -> None:
        self._cancelled = True
        generation, self._generation = self._generation, None
        if generation is not None:
            self._service._notify(generation, "cancel", self._stream_id)
            with contextlib.suppress(WorkerCrashed):
                self._service._call(generation, "close", self._stream_id)
