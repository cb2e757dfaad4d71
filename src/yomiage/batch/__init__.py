"""Batch jobs: many texts to one audio file each, resumable, over a pool of workers
(processes on this machine; ``yomiage batch`` is the command)."""

from yomiage.batch.items import BatchInputError, BatchItem, read_items
from yomiage.batch.job import BatchSummary, Event, ItemPool, run_job
from yomiage.batch.local import ProcessItemPool
from yomiage.batch.outputs import Made, OutputFolder
from yomiage.batch.worker import BatchSpec, ItemProgress, ItemSynthesizer, WorkerStartError

__all__ = [
    "BatchInputError",
    "BatchItem",
    "BatchSpec",
    "BatchSummary",
    "Event",
    "ItemPool",
    "ItemProgress",
    "ItemSynthesizer",
    "Made",
    "OutputFolder",
    "ProcessItemPool",
    "WorkerStartError",
    "read_items",
    "run_job",
]  # fmt: skip
