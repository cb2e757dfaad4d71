"""Worker processes on this machine, each holding one engine for the whole job.

Each worker dies with the driver (:mod:`yomiage.batch.lifeline`), ignores
Ctrl-C (the driver stops it), writes an item's audio straight into the
output folder as it is made, and reports how far into its item it is.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from yomiage.batch.items import BatchItem
from yomiage.batch.lifeline import die_with_parent
from yomiage.batch.outputs import Made
from yomiage.batch.worker import BatchSpec, ItemProgress, ItemSynthesizer, WorkerStartError

# The engine of this worker process and where it reports progress (set by the
# pool's initializer; each process has its own, and the driver never sets them).
_synthesizer: ItemSynthesizer | None = None
_progress: Any = None  # a multiprocessing queue, or None
RELAY_POLL_SECONDS = 0.2  # how soon the driver's progress reader notices it should stop


def _start(spec: BatchSpec, parent_pid: int, progress: Any) -> None:
    global _synthesizer, _progress
    die_with_parent(parent_pid)
    # Ctrl-C reaches the whole process group; the driver stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _progress = progress
    _synthesizer = ItemSynthesizer(spec)


def _make(item: BatchItem, into: str) -> Made:
    if _synthesizer is None:  # the pool's initializer builds it before any item
        raise WorkerStartError("this worker process has no engine (its start was skipped)")
    report = _progress.put if _progress is not None else None
    return _synthesizer.write(item, Path(into), report)


class ProcessItemPool:
    """``workers`` processes started fresh ("spawn": no ONNX Runtime or OpenMP state
    copied from the driver); a dead one is replaced by :meth:`restart`.
    ``on_progress`` is called (from a thread of its own) as workers get through
    their items."""

    broken: tuple[type[BaseException], ...] = (BrokenProcessPool,)

    def __init__(
        self,
        spec: BatchSpec,
        workers: int,
        on_progress: Callable[[ItemProgress], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("a batch needs at least one worker")
        self.spec = spec
        self.workers = workers
        self._context = multiprocessing.get_context("spawn")
        self._on_progress = on_progress
        self._queue: Any = None
        self._reader: threading.Thread | None = None
        self._reader_stop = threading.Event()
        self._executor = self._new()

    def _new(self) -> ProcessPoolExecutor:
        # A queue per set of workers: one killed while writing to it may leave it locked.
        if self._on_progress is not None:
            self._queue = self._context.Queue()
            self._reader_stop = threading.Event()
            self._reader = threading.Thread(
                target=_relay, args=(self._queue, self._on_progress, self._reader_stop),
                name="yomiage-batch-progress", daemon=True,
            )  # fmt: skip
            self._reader.start()
        return ProcessPoolExecutor(
            self.workers,
            mp_context=self._context,
            initializer=_start,
            initargs=(self.spec, os.getpid(), self._queue),
        )

    def submit(self, item: BatchItem, into: Path) -> Future[Made]:
        return self._executor.submit(_make, item, str(into))

    def restart(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._stop_reader()
        self._executor = self._new()

    def close(self, *, now: bool = False) -> None:
        """Stop the workers: after their items (``now``: at once, killing them)."""
        if now:
            processes = getattr(self._executor, "_processes", None) or {}
            for process in list(processes.values()):
                process.kill()
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._stop_reader()

    def _stop_reader(self) -> None:
        # The driver never writes to the queue: a worker killed while writing holds its
        # lock forever, and a write of ours would then block the driver's exit.
        if self._queue is not None and self._reader is not None:
            self._reader_stop.set()
            self._reader.join(timeout=5)
            self._queue.close()
        self._queue, self._reader = None, None


def _relay(queue: Any, on_progress: Callable[[ItemProgress], None], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            message = queue.get(timeout=RELAY_POLL_SECONDS)
        except queue_module.Empty:
            continue
        except (EOFError, OSError, ValueError):  # closed under us
            return
        try:
            on_progress(message)
        except Exception:  # a display that fails must not stop the job's progress
            continue
