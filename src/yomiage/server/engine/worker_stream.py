"""One request's stream in the worker process, stepped from the server's threads.

A stream whose opening or first step meets a worker that died without beginning
it starts over on the next worker (:mod:`yomiage.server.engine.worker_retry`);
once a step began, or a chunk came back, a crash fails it with WorkerCrashed.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from yomiage.audio import AudioChunk
from yomiage.errors import Cancelled
from yomiage.server.engine.worker_calls import CallNotStarted, Generation, WorkerCrashed
from yomiage.server.engine.worker_retry import next_worker

if TYPE_CHECKING:
    from yomiage.server.engine.service import EngineRequest
    from yomiage.server.engine.worker import WorkerService


class WorkerChunkSource:
    """One request's stream in the child, stepped from the parent's threads."""

    def __init__(self, service: WorkerService, request: EngineRequest) -> None:
        self._service = service
        self._request = request
        self._size = float(len(request.text))  # each step's deadline scales with the whole text
        self._generation: Generation | None = None
        self._stream_id = 0
        self._cancelled = False
        self._stepped = False  # a chunk came back: the stream cannot start over

    def next(self) -> AudioChunk | None:
        try:
            chunk = self._step()
        except CallNotStarted:
            dead = self._generation
            if self._stepped or dead is None:
                raise
            self._generation = None  # its stream died with it: open one on the next worker
            next_worker(self._service, dead)
            chunk = self._step()
        self._stepped = True
        return chunk

    def _step(self) -> AudioChunk | None:
        service = self._service
        if self._generation is None:
            if self._cancelled:
                raise Cancelled("the synthesis was cancelled")
            generation, stream_id = self._open()
            self._generation, self._stream_id = generation, stream_id
            if self._cancelled:  # cancelled while the stream was being opened
                service._notify(generation, "cancel", stream_id)
        chunk: AudioChunk | None = service._call(
            self._generation, "next", self._stream_id, size=self._size
        )
        return chunk

    def _open(self) -> tuple[Generation, int]:
        """Open the stream in the child. Opening does no work, so a request that meets a
        child just dying (killed by another request) opens again in the next one."""
        service = self._service
        generation = service._current()
        for attempt in range(2):
            stream_id = next(service._ids)
            try:
                service._call(generation, "open", stream_id, self._request)
            except WorkerCrashed:
                if attempt:
                    raise
                generation = next_worker(service, generation)
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
