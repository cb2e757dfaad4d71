"""A batch job: skip what is done, hand the rest to a pool of workers, write what
comes back, retry what failed, and say what happened.

The pool is anything that turns an item into a future of its audio
(:class:`ItemPool`): worker processes on this machine, or a Ray cluster. Only
as many items are in flight as the pool has workers, so a worker that dies
takes down only the items it was making, and each of those is retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from yomiage.batch.items import BatchInputError, BatchItem
from yomiage.batch.outputs import Made, OutputFolder
from yomiage.batch.worker import BatchSpec, WorkerStartError


class ItemPool(Protocol):
    workers: int

    def submit(self, item: BatchItem, into: Path) -> Future[Made]:
        """Make ``item``'s audio: as bytes, or into a temporary file in the folder ``into``."""

    def restart(self) -> None:
        """Replace workers that died (their futures failed with ``broken``)."""

    def close(self, *, now: bool = False) -> None:
        """Stop the workers: after their items, or (``now``) at once."""

    broken: tuple[type[BaseException], ...]


@dataclass
class BatchSummary:
    items: int = 0
    made: int = 0
    skipped: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # id -> why, after its retries
    audio_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def finished(self) -> int:
        return self.made + self.skipped + len(self.failed)


@dataclass(frozen=True)
class Event:
    """One item's outcome, for a progress display: ``status`` is made, skipped,
    retrying or failed."""

    item_id: str
    status: str
    seconds: float
    summary: BatchSummary
    detail: str = ""


def run_job(
    items: Sequence[BatchItem],
    outputs: OutputFolder,
    spec: BatchSpec,
    pool: ItemPool,
    *,
    retries: int = 1,
    on_event: Callable[[Event], None] | None = None,
) -> BatchSummary:
    """Make every item's audio not already made; a failed item is tried ``retries``
    more times, then listed in the summary's ``failed``."""
    started = time.perf_counter()
    summary = BatchSummary(items=len(items))
    emit = on_event or (lambda event: None)
    unknown = [i for i in items if i.voice is not None and i.voice not in spec.voice_names]
    if unknown:
        raise BatchInputError(
            f"item {unknown[0].id!r} asks for voice {unknown[0].voice!r}; "
            f"this job loads {', '.join(spec.voice_names)}"
        )
    digests = {item.id: item.digest(spec.fmt, spec.options) for item in items}
    queue: list[BatchItem] = []
    for item in items:
        seconds = outputs.done_seconds(item, digests[item.id])
        if seconds is None:
            queue.append(item)
            continue
        summary.skipped += 1
        summary.audio_seconds += seconds
        emit(Event(item.id, "skipped", seconds, summary))
    queue.reverse()  # popped from the end: in input order
    attempts: dict[str, int] = {}
    in_flight: dict[Future[Made], tuple[BatchItem, int]] = {}
    generation = 0  # of the pool's workers; bumped on each restart

    def fill() -> None:
        while queue and len(in_flight) < pool.workers:
            item = queue.pop()
            attempts[item.id] = attempts.get(item.id, 0) + 1
            in_flight[pool.submit(item, outputs.root)] = (item, generation)

    try:
        fill()
        while in_flight:
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                item, born = in_flight.pop(future)
                try:
                    made = future.result()
                    outputs.write(made, digests[item.id])
                except WorkerStartError:
                    raise
                except Exception as exc:
                    if isinstance(exc, pool.broken):
                        if born == generation:  # the first to see this breakage restarts
                            pool.restart()
                            generation += 1
                        why = f"its worker process died ({type(exc).__name__})"
                    else:
                        why = f"{type(exc).__name__}: {exc}"
                    if attempts[item.id] <= retries:
                        queue.append(item)
                        emit(Event(item.id, "retrying", 0.0, summary, why))
                    else:
                        summary.failed[item.id] = why
                        emit(Event(item.id, "failed", 0.0, summary, why))
                    continue
                summary.made += 1
                summary.audio_seconds += made.seconds
                emit(Event(item.id, "made", made.seconds, summary))
            fill()
    finally:
        for future in in_flight:
            future.cancel()
        summary.wall_seconds = time.perf_counter() - started
    return summary


__all__ = ["BatchSummary", "Event", "ItemPool", "run_job"]
