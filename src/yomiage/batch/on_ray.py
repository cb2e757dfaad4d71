"""Batch workers on a Ray cluster: one actor per worker, each holding one engine.

The job loop (:func:`yomiage.batch.run_job`) is the same as on this machine;
only the pool differs. Each actor asks Ray for as many CPUs as its engine has
threads, so Ray places as many engines on a node as it has cores for. An actor
whose process dies is restarted by Ray (its item fails and is retried by the
job). Every node needs yomiage installed and the voices' sources readable
(``hf://``, ``s3://``, or a path every node has); each node downloads them
once into its own cache.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from yomiage.batch.items import BatchItem
from yomiage.batch.outputs import Made
from yomiage.batch.worker import BatchSpec, ItemSynthesizer
from yomiage.errors import MissingExtraError

ACTOR_RESTARTS = 3  # per actor: a voice that kills its process every time stops the job
RESTART_WAIT_S = 300.0  # for a restarted actor to load its voices again


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingExtraError("running a batch on Ray", "ray", "ray") from None
    return ray


class RayItemPool:
    """``workers`` actors on the cluster at ``address`` (None: Ray's default, a new
    local cluster unless ``RAY_ADDRESS`` names one; ``"auto"``: the cluster started
    on this machine with ``ray start``)."""

    def __init__(self, spec: BatchSpec, workers: int, address: str | None = None) -> None:
        if workers < 1:
            raise ValueError("a batch needs at least one worker")
        ray = import_ray()
        self._ray = ray
        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.workers = workers
        self.broken: tuple[type[BaseException], ...] = (
            ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
        )  # fmt: skip
        actor = ray.remote(
            num_cpus=spec.engine.threads or 1, max_restarts=ACTOR_RESTARTS, max_task_retries=0
        )(ItemSynthesizer)
        self._actors = [actor.remote(spec) for _ in range(workers)]
        self._free = list(self._actors)
        self._running: dict[int, Future[Made]] = {}  # id(actor) -> its latest item
        self._lock = threading.Lock()

    def submit(self, item: BatchItem, into: Path) -> Future[Made]:
        """``item``'s audio as bytes (``into`` is the driver's folder, which an actor
        on another machine cannot write to)."""
        with self._lock:
            if not self._free:
                raise RuntimeError("more items in flight than workers")
            actor = self._free.pop()
        future: Future[Made] = actor.make.remote(item).future()
        self._running[id(actor)] = future

        def release(_: Future[Made]) -> None:
            with self._lock:
                self._free.append(actor)

        future.add_done_callback(release)
        return future

    def restart(self) -> None:
        """Wait until every actor answers again. Ray restarts an actor whose process
        died, but a call that reaches it while it restarts fails at once
        (``ActorUnavailableError``), which spent the retry of the item that had been
        on it: the item then failed though its worker came back (seen in CI)."""
        errors = self._ray.exceptions
        deadline = time.monotonic() + RESTART_WAIT_S
        for actor in self._actors:
            running = self._running.get(id(actor))
            if running is not None and not running.done():
                continue  # busy with an item, so alive: a ping would wait for the item
            while True:
                left = deadline - time.monotonic()
                try:
                    self._ray.get(actor.ready.remote(), timeout=max(0.1, left))
                    break
                except errors.ActorUnavailableError:  # restarting: ask again
                    if left <= 0:
                        break
                    time.sleep(0.2)
                except (errors.RayActorError, errors.GetTimeoutError):
                    break  # gone for good, or not back in time: its items fail as before

    def close(self, *, now: bool = False) -> None:
        """Kill the actors (Ray stops their items at once either way)."""
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors, self._free = [], []
        if self._started_ray:
            self._ray.shutdown()
