"""One request's stream in the worker process, stepped from the server's threads.

The protocol is pull-based, like the in-process stream: the parent asks for each
chunk, so a slow client never makes the child run ahead, and a cancel reaches the
child at once (it does not queue behind the step in progress).

A stream whose opening or first step meets a worker that died without beginning
it starts over on the next worker (:mod:`yomiage.server.engine.worker_retry`);
once a step began, or a chunk came back, a crash fails it with WorkerCrashed.
"""

from __future__ import annotations

import contextlib

from yomiage.audio import AudioChunk
from yomiage.errors import Cancelled
from yomiage.server.engine.service import EngineRequest
from yomiage.server.engine.worker_calls import CallNotStarted, Generation, WorkerCrashed
from yomiage.server.engine.worker_supervisor import Supervisor


class WorkerChunkSource:
    """One request's stream in the child, stepped from the parent's threads."""

    def __init__(self, supervisor: Supervisor, request: EngineRequest) -> None:
        self._supervisor = supervisor
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
            self._supervisor.next_after(dead)
            chunk = self._step()
        self._stepped = True
        return chunk

    def _step(self) -> AudioChunk | None:
        supervisor = self._supervisor
        if self._generation is None:
            if self._cancelled:
                raise Cancelled("the synthesis was cancelled")
            generation, stream_id = self._open()
            self._generation, self._stream_id = generation, stream_id
            if self._cancelled:  # cancelled while the stream was being opened
                supervisor.notify(generation, "cancel", stream_id)
        chunk: AudioChunk | None = supervisor.call(
            self._generation, "next", self._stream_id, size=self._size
        )
        return chunk

    def _open(self) -> tuple[Generation, int]:
        """Open the stream in the child. Opening does no work, so a request that meets a
        child just dying (killed by another request) opens again in the next one."""
        supervisor = self._supervisor
        generation = supervisor.current()
        for attempt in range(2):
            stream_id = supervisor.new_stream_id()
            try:
                supervisor.call(generation, "open", stream_id, self._request)
            except WorkerCrashed:
                if attempt:
                    raise
                generation = supervisor.next_after(generation)
                continue
            return generation, stream_id
        raise AssertionError("unreachable")

    def cancel(self) -> None:
        self._cancelled = True
        if self._generation is not None:
            self._supervisor.notify(self._generation, "cancel", self._stream_id)

    def close(self) -> None:
        self._cancelled = True
        generation, self._generation = self._generation, None
        if generation is not None:
            self._supervisor.notify(generation, "cancel", self._stream_id)
            with contextlib.suppress(WorkerCrashed):
                self._supervisor.call(generation, "close", self._stream_id)
