"""Worker processes on this machine, each holding one engine for the whole job."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from yomiage.batch.items import BatchItem
from yomiage.batch.outputs import Made
from yomiage.batch.worker import BatchSpec, ItemSynthesizer, WorkerStartError

# The engine of this worker process (set by the pool's initializer; each process
# has its own, and the driver process never sets it).
_synthesizer: ItemSynthesizer | None = None


def _start(spec: BatchSpec) -> None:
    global _synthesizer
    _synthesizer = ItemSynthesizer(spec)


def _make(item: BatchItem) -> Made:
    if _synthesizer is None:  # the pool's initializer builds it before any item
        raise WorkerStartError("this worker process has no engine (its start was skipped)")
    return _synthesizer.make(item)


class ProcessItemPool:
    """``workers`` processes started fresh ("spawn": no ONNX Runtime or OpenMP state
    copied from the driver); a dead one is replaced by :meth:`restart`."""

    broken: tuple[type[BaseException], ...] = (BrokenProcessPool,)

    def __init__(self, spec: BatchSpec, workers: int) -> None:
        if workers < 1:
            raise ValueError("a batch needs at least one worker")
        self.spec = spec
        self.workers = workers
        self._executor = self._new()

    def _new(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start,
            initargs=(self.spec,),
        )

    def submit(self, item: BatchItem) -> Future[Made]:
        return self._executor.submit(_make, item)

    def restart(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = self._new()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
