"""The worker process's supervisor: the one owner of the child, its pipe and the calls on it.

OpenJTalk, libsndfile and ONNX Runtime are C and C++; an input that reaches a
bug in them kills the process it runs in (SIGSEGV), with no exception and no
log line. So the engine runs in a child process, and :class:`Supervisor` is all
the parent knows of it: it starts the child (:mod:`.worker_spawn`), sends each
call over the pipe and routes the answer back to its caller, and, when the
child dies, fails every call it was working on at once (:class:`WorkerCrashed`;
:class:`CallNotStarted` for those it had not begun, which a caller may send
again: :mod:`.worker_retry`), counts the crash and starts and readies a new
child; calls that arrive meanwhile wait for it (:class:`WorkerUnavailable` past
``ready_timeout``).

A child that hangs instead (stopped, deadlocked) is found by deadlines
(:mod:`.liveness`): a watchdog thread pings it, reports it unavailable while it
does not answer, and kills it (so it is restarted) once a call or ping is
overdue; the calls on it fail with :class:`WorkerHung`.

What a new child must have before it is ready (the voices loaded and unloaded
while serving) is the ``prepare`` callback's business (:mod:`.worker`), run by
the supervisor on each child it starts.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from yomiage.server.engine.liveness import Liveness, work_size
from yomiage.server.engine.service import VoiceCard
from yomiage.server.engine.worker_calls import (
    Call,
    CallNotStarted,
    Generation,
    WorkerCrashed,
    WorkerHung,
    WorkerUnavailable,
    describe_exit,
)
from yomiage.server.engine.worker_child import ServiceFactory
from yomiage.server.engine.worker_logging import LogLevels
from yomiage.server.engine.worker_spawn import spawn_worker

log = logging.getLogger(__name__)

# Readies a child just started, given the voices it started with: raises WorkerCrashed
# or WorkerUnavailable if the child dies meanwhile.
Prepare = Callable[[Generation, Mapping[str, VoiceCard]], None]
# Told the voices the child has now, where it changed them on its own (a voice loaded
# anew by this machine's measured plan: server/engine/idle_measuring.py).
VoicesChanged = Callable[[Mapping[str, VoiceCard]], None]


class Supervisor:
    """One worker process at a time, restarted when it dies or hangs (see the module docstring).

    ``factory`` builds the engine in the child; it must be picklable (a module-level
    function or a ``functools.partial`` of one). Nothing runs until :meth:`start`.
    ``start_timeout`` bounds a start, and a voice load, while neither reports progress.
    """

    def __init__(
        self,
        factory: ServiceFactory,
        prepare: Prepare,
        *,
        start_timeout: float = 900.0,
        ready_timeout: float = 120.0,
        log_level: int | None = None,
        liveness: Liveness | None = None,
        voices_changed: VoicesChanged | None = None,
    ) -> None:
        self._factory = factory
        self._prepare = prepare
        self._voices_changed = voices_changed
        self._start_timeout = start_timeout
        self._ready_timeout = ready_timeout
        self._log_levels = LogLevels.of_this_process(root=log_level)
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)  # the calls' ids and the streams' ids
        self._ready = threading.Event()
        self._closing = False
        self._stopped = threading.Event()
        self._generation: Generation | None = None
        self._liveness = liveness or Liveness()
        self._last_pong = time.monotonic()
        self._ping_pending = False
        self.crashes = 0
        self.hangs = 0
        self.restarts = 0
        self.last_restart_seconds: float | None = None
        self.failure: str | None = None  # why the last start failed, while none runs

    def start(self) -> None:
        """Start the first child and the watchdog; returns once the child is ready, or
        raises WorkerStartError (or the child's own YomiageError)."""
        self._start(0)
        threading.Thread(target=self._watch, name="yomiage-worker-watchdog", daemon=True).start()

    @property
    def available(self) -> bool:
        return self._ready.is_set() and self.answering

    @property
    def answering(self) -> bool:
        """Whether the worker answered a ping lately (False while it is stopped or hung)."""
        live = self._liveness
        age = time.monotonic() - self._last_pong
        return age <= live.heartbeat_interval + live.heartbeat_timeout

    @property
    def pid(self) -> int | None:
        """The current child's process id (None while none runs)."""
        generation = self._generation
        return generation.process.pid if generation is not None and generation.alive else None

    @property
    def load_timeout(self) -> float:
        """Seconds a voice load may go without progress: as long as a start (a big voice
        takes a minute)."""
        return max(self._start_timeout, self._liveness.call_timeout)

    # -- calls ------------------------------------------------------------------
    def current(self) -> Generation:
        """The running child, waiting for one that is starting."""
        if not self._ready.wait(self._ready_timeout):
            reason = f" ({self.failure})" if self.failure else ""
            raise WorkerUnavailable(f"the synthesis worker is restarting{reason}; retry shortly")
        generation = self._generation
        if generation is None or self._closing:
            raise WorkerUnavailable("the server is shutting down")
        return generation

    def next_after(self, dead: Generation) -> Generation:
        """The child started after ``dead``, which a call just found dead: first wait until
        the reader has seen it die (until then ``dead`` is still the one handed out), then
        as :meth:`current` (WorkerUnavailable when none is ready in time)."""
        dead.gone.wait(self._ready_timeout)
        if self._closing:
            raise WorkerUnavailable("the server is shutting down")
        return self.current()

    def call(
        self,
        generation: Generation,
        op: str,
        *args: Any,
        size: float | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send one call and wait for its answer; the watchdog fails it once it is overdue
        (``size``: its units of work, by default :func:`work_size`; ``timeout``: seconds
        instead of the deadline of its size). CallNotStarted: the child died before it
        began the call."""
        units = work_size(op, args) if size is None else size
        seconds = self._liveness.deadline(units) if timeout is None else timeout
        call = Call(deadline=time.monotonic() + seconds)
        with self._lock:
            if not generation.alive:
                raise CallNotStarted("the synthesis worker died; it is being restarted")
            call_id = next(self._ids)
            generation.calls[call_id] = call
        try:
            with self._send_lock:
                generation.conn.send((call_id, op, args))
        except (OSError, ValueError):
            with self._lock:
                generation.calls.pop(call_id, None)
            if generation.hung:
                raise WorkerHung(generation.hung) from None
            raise CallNotStarted("the synthesis worker died; it is being restarted") from None
        call.done.wait()
        if call.ok:
            return call.value
        raise call.value

    def notify(self, generation: Generation, op: str, *args: Any) -> None:
        """A message that needs no answer (cancel); lost if the child is gone."""
        with contextlib.suppress(OSError, ValueError), self._send_lock:
            generation.conn.send((0, op, args))

    def new_stream_id(self) -> int:
        """A number no call or stream in flight has (the child keys its streams by it)."""
        return next(self._ids)

    def close(self) -> None:
        """Stop the child and start no other; calls still waiting fail with WorkerCrashed.

        The child is asked to exit (its work in flight is dropped) and killed if it
        does not within 10 s; the pipe is closed only once the reader is done with it.
        """
        with self._lock:
            self._closing = True
            generation = self._generation
        self._stopped.set()
        self._ready.clear()
        if generation is None:
            return
        self.notify(generation, "stop")
        generation.process.join(timeout=10)
        if generation.process.is_alive():
            generation.process.kill()
            generation.process.join(timeout=5)
        if generation.reader is not None:
            generation.reader.join(timeout=10)
        with contextlib.suppress(OSError):
            generation.conn.close()

    # -- the child's life -------------------------------------------------------
    def _start(self, number: int) -> bool:
        """Start a child and prepare it; whether it is ready (False: it died while being
        prepared, and its reader is starting the next one)."""
        conn, process, voices = spawn_worker(
            self._context, self._factory, self._log_levels, number, self._start_timeout
        )
        generation = Generation(number, conn, process)
        generation.reader = threading.Thread(
            target=self._read, args=(generation,), name="yomiage-worker-reader", daemon=True
        )
        with self._lock:
            self._generation = generation
        generation.reader.start()
        try:
            self._prepare(generation, voices)
        except (WorkerCrashed, WorkerUnavailable):
            return False
        self.failure = None
        self._last_pong = time.monotonic()
        self._ping_pending = False
        self._ready.set()
        return True

    def _read(self, generation: Generation) -> None:
        """Route the child's answers to their callers until it dies, then restart it."""
        try:
            while True:
                call_id, ok, value = generation.conn.recv()
                if call_id == 0 and ok is None:  # a message of the child's own
                    self._child_says(value)
                    continue
                with self._lock:
                    if ok is None:  # not an answer: the child began the call, or (a
                        # value) a voice it loads moved on a step: the load's deadline too
                        began = generation.calls.get(call_id)
                        if began is not None:
                            began.started = True
                            if value is not None:
                                began.deadline = time.monotonic() + self._start_timeout
                        continue
                    call = generation.calls.pop(call_id, None)
                if call is not None:
                    call.finish(ok, value)
        except Exception as exc:  # EOF when the child is gone; anything else breaks the pipe too
            if not isinstance(exc, EOFError | OSError):
                log.error("the pipe to the synthesis worker broke: %s", exc)
        finally:
            self._lost(generation)

    def _child_says(self, message: Any) -> None:
        """A message the child sent on its own: its voices changed (``("voices", cards)``)."""
        if isinstance(message, tuple) and message[:1] == ("voices",) and self._voices_changed:
            self._voices_changed(message[1])

    def _lost(self, generation: Generation) -> None:
        """The child is gone: fail what waited on it and, unless closing, start another."""
        self._ready.clear()
        generation.process.join(timeout=5)
        with self._lock:
            generation.alive = False
            pending = list(generation.calls.values())
            generation.calls.clear()
            closing = self._closing
        generation.gone.set()
        how = describe_exit(generation.process.exitcode)
        for call in pending:
            call.finish(False, generation.failure(call, how))
        if closing:
            return
        if generation.hung:
            log.error("%s (%d call(s) in flight)", generation.hung, len(pending))
        else:
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
                if not self._start(number):
                    return  # it died while being prepared: its reader restarts it
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

    # -- the watchdog -----------------------------------------------------------
    def _watch(self) -> None:
        """Ping the worker between calls; kill it once a call or a ping is overdue."""
        while not self._stopped.wait(self._liveness.heartbeat_interval):
            generation = self._generation
            if generation is None or not generation.alive:
                continue
            now = time.monotonic()
            with self._lock:  # also while not ready: a voice replayed on a restart may hang
                overdue = any(call.deadline < now for call in generation.calls.values())
            if overdue:
                self._kill_hung(generation)
            elif self._ready.is_set() and not self._ping_pending:
                self._ping(generation)

    def _ping(self, generation: Generation) -> None:
        def pong() -> None:
            self._last_pong = time.monotonic()
            self._ping_pending = False

        call = Call(deadline=time.monotonic() + self._liveness.ping_deadline, on_ok=pong)
        with self._lock:
            if not generation.alive:
                return
            call_id = next(self._ids)
            generation.calls[call_id] = call
        self._ping_pending = True
        with contextlib.suppress(OSError, ValueError), self._send_lock:
            generation.conn.send((call_id, "ping", ()))

    def _kill_hung(self, generation: Generation) -> None:
        """Kill a worker that stopped answering; the reader sees it go and restarts it."""
        with self._lock:
            if not generation.alive or generation.hung:
                return
            generation.hung = (
                "the synthesis worker stopped answering (a call passed its deadline); "
                "it was killed and is being restarted; retry shortly"
            )
        self.hangs += 1
        self._ready.clear()
        generation.process.kill()
