"""The worker process's side of :mod:`.worker_supervisor`: build the engine, then
answer the parent's calls over the pipe until it closes.

Each call runs in a thread of its own (a slow stream must not hold the others);
``cancel`` and ``ping`` are handled at once, not queued behind the steps in
flight (a ping that is not answered means the process is stopped or hung).
Results and errors travel pickled; an error that cannot be pickled comes back
as a :class:`WorkerError` naming it. Before any work on a call, its thread
says so (``(call_id, None, None)``): a call this process dies in without having
begun it is sent again to the next one (:mod:`yomiage.server.engine.worker_retry`).
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from yomiage.errors import YomiageError
from yomiage.lifeline import die_with_parent
from yomiage.progress import progress_to
from yomiage.server.engine.idle_measuring import IDLE_BEFORE_MEASURING_S, IdleMeasuring
from yomiage.server.engine.service import ChunkSource, SpeechService
from yomiage.server.engine.worker_logging import LogLevels

log = logging.getLogger(__name__)

ServiceFactory = Callable[[], SpeechService]
_CHILD_THREADS = 64  # steps in flight at once in the child; far above any sane concurrency


class WorkerError(YomiageError):
    """An error in the worker that could not be sent back as itself (a bug: see its log)."""


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (our errors do), else a WorkerError naming it."""
    try:
        restored = pickle.loads(pickle.dumps(exc))
        if isinstance(restored, BaseException):
            return restored
    except Exception:
        pass
    return WorkerError(f"{type(exc).__name__}: {exc}")


def worker_main(conn: Connection, factory: ServiceFactory, log_levels: LogLevels) -> None:
    """The child: build the service, then answer the parent's calls until the pipe closes."""
    # The parent owns the terminal's Ctrl-C and the service manager's SIGTERM
    # (both reach the whole process group): the child stops when its pipe closes,
    # or, while it loads and reads no pipe, when the parent is gone (a SIGTERM before
    # the server was up left the worker, and the plan it was measuring, running).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid is not None:
        die_with_parent(parent.pid, kernel=False)  # restarted from a thread that ends
    log_levels.apply()
    try:
        # Each step of a long load (a plan measured) moves the parent's deadline.
        with progress_to(lambda message: conn.send(("progress", message))):
            service = factory()
        voices = dict(service.voices)
    except BaseException as exc:
        # The parent reports the error in one line; its traceback is for -v.
        log.info("the synthesis worker could not start", exc_info=True)
        conn.send(("failed", _portable(exc)))
        return
    conn.send(("ready", voices))
    send_lock = threading.Lock()
    idle = _idle_measuring(service, conn, send_lock)
    _serve(conn, service, idle, send_lock)
    idle.close()
    os._exit(0)  # skip the interpreter's teardown: native libraries may hold threads


def _idle_measuring(
    service: SpeechService, conn: Connection, send_lock: threading.Lock
) -> IdleMeasuring:
    """This machine's voice plans measured while the worker is idle, and taken at once:
    the voices the new plans change are loaded anew, and the parent is sent the voices
    as they are then (``(0, None, ("voices", cards))``). Nothing to do for a service
    that measures none."""
    measure = getattr(service, "measure_plans", None)
    take = getattr(service, "take_measured_plans", None)

    def adopt(names: list[str]) -> None:
        cards = take(names) if take is not None else None
        if cards is not None:
            with send_lock:
                conn.send((0, None, ("voices", dict(cards))))

    quiet = getattr(service, "idle_before_measuring_s", IDLE_BEFORE_MEASURING_S)
    measuring = IdleMeasuring(measure if measure is not None else lambda stop: [],
                              adopt=adopt if take is not None else None, idle_s=quiet)  # fmt: skip
    return measuring.start()


def _serve(
    conn: Connection, service: SpeechService, idle: IdleMeasuring, send_lock: threading.Lock
) -> None:
    streams: dict[int, ChunkSource] = {}
    lock = threading.Lock()

    def reply(call_id: int, ok: bool | None, value: Any) -> None:
        with send_lock:
            try:
                conn.send((call_id, ok, value))
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                conn.send((call_id, False, WorkerError(f"cannot send the result: {exc}")))

    def handle(call_id: int, op: str, args: tuple[Any, ...]) -> None:
        idle.begin()  # a measuring in the idle time stops for it
        try:
            run(call_id, op, args)
        finally:
            idle.end()

    def run(call_id: int, op: str, args: tuple[Any, ...]) -> None:
        reply(call_id, None, None)  # begun: from here on, this call may be what kills us
        try:
            value: Any = None
            if op == "open":
                stream_id, request = args
                source = service.open(request)
                with lock:
                    streams[stream_id] = source
                idle.begin()  # an open stream is work until it is closed
            elif op == "next":
                with lock:
                    source = streams[args[0]]
                value = source.next()
            elif op == "close":
                with lock:
                    closing = streams.pop(args[0], None)
                if closing is not None:
                    closing.close()
                    idle.end()
            elif op == "load_voice":  # (name, source, warm): the voices now loaded
                name, voice_source, warm = args
                # Each step of a long load (a plan measured) moves the call's deadline.
                with progress_to(functools.partial(reply, call_id, None)):
                    value = dict(service.load_voice(name, voice_source, warm=warm))
            elif op == "unload_voice":
                value = dict(service.unload_voice(*args))
            elif op in (
                "encode",
                "warm",
                "words",
                "remove_word",
                "update_words",
                "read",
                "generate",
            ):
                value = getattr(service, op)(*args)
            else:
                raise WorkerError(f"unknown worker call {op!r}")
        except BaseException as exc:
            if not isinstance(exc, YomiageError | ValueError):
                log.exception("worker call %s failed", op)
            reply(call_id, False, _portable(exc))
        else:
            reply(call_id, True, value)

    pool = ThreadPoolExecutor(_CHILD_THREADS, thread_name_prefix="yomiage-worker")
    while True:
        try:
            call_id, op, args = conn.recv()
        except (EOFError, OSError):
            break
        if op == "stop":
            break
        if op == "ping":  # at once: the parent's liveness check (server/engine/liveness.py)
            reply(call_id, True, None)
            continue
        if op == "cancel":  # at once: not behind the step it should stop
            with lock:
                source = streams.get(args[0])
            if source is not None:
                source.cancel()
            continue
        pool.submit(handle, call_id, op, args)
    # The parent is gone or closing: nobody waits for what is in flight, and the
    # caller exits the process at once (os._exit), so nothing is joined here.
    with lock:
        for source in streams.values():
            source.cancel()
    pool.shutdown(wait=False, cancel_futures=True)
