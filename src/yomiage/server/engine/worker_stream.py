"""One request's stream in the worker process, stepped from the server's threads."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from yomiage.audio import AudioChunk
from yomiage.errors import Cancelled
from yomiage.server.engine.worker_calls import Generation, WorkerCrashed

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

    def next(self) -> AudioChunk | None:
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
        for attempt in range(2):
            generation = service._current()
            stream_id = next(service._ids)
            try:
                service._call(generation, "open", stream_id, self._request)
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
