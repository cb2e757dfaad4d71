"""One synthesis request from admission to the last byte, off the event loop.

:class:`ChunkPump` steps a request's :class:`~yomiage.server.engine.service.ChunkSource`
in the server's worker threads; :class:`SpeechResponse` sends its audio
(streamed or whole, raw or as server-sent events) while watching for the
client to leave, and on every way out cancels and closes the source (waiting
for the window in progress) before it frees the request's slot, so the
in-flight count means compute still running. A whole response goes through
files, never whole in memory (:mod:`yomiage.server.spool`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from yomiage.audio import AudioChunk
from yomiage.audio.spool import AudioSpool
from yomiage.server.encoding import OutputFormat, StreamEncoder
from yomiage.server.engine.service import ChunkSource, SpeechService
from yomiage.server.errors import APIError
from yomiage.server.failures import failure_response
from yomiage.server.limits import Slot
from yomiage.server.metrics import ServerMetrics
from yomiage.server.middleware import send_error
from yomiage.server.spool import ResponseSpool, TempFileBody, remove, temp_file

log = logging.getLogger(__name__)


class ChunkPump:
    """A chunk source advanced one chunk at a time in ``executor``'s threads.

    The first :meth:`next` starts the synthesis, so text, option and limit
    errors surface there. :meth:`cancel` stops the work at its next step;
    :meth:`aclose` is safe to call at any time and returns once no thread
    works on this request any more.
    """

    def __init__(self, executor: Executor, source: ChunkSource) -> None:
        self._executor = executor
        self._source = source
        self.started: float | None = None
        self.finished: float | None = None
        self.samples = 0

    async def next(self) -> AudioChunk | None:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._step)

    async def next_into(self, spool: AudioSpool) -> bool:
        """The next chunk written to ``spool`` in the same thread (it never reaches the
        event loop); False at the end."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._step_into, spool)

    def _step_into(self, spool: AudioSpool) -> bool:
        chunk = self._step()
        if chunk is None:
            return False
        spool.add(chunk.samples)
        return True

    def _step(self) -> AudioChunk | None:
        if self.started is None:
            self.started = time.perf_counter()
        chunk = self._source.next()
        if chunk is None:
            self.finished = time.perf_counter()
        else:
            self.samples += len(chunk.samples)
        return chunk

    def cancel(self) -> None:
        self._source.cancel()

    async def aclose(self) -> None:
        self._source.cancel()
        loop = asyncio.get_running_loop()
        try:
            closing = loop.run_in_executor(self._executor, self._source.close)
        except RuntimeError:
            # A forced stop: the server's threads were shut down before this request
            # was cancelled (the order depends on the event loop; uvloop does it so).
            closing = asyncio.ensure_future(asyncio.to_thread(self._source.close))
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await closing  # still wait: the caller frees the slot next
            raise


@dataclass
class SpeechJob:
    """Everything a response needs to finish a request and account for it."""

    pump: ChunkPump
    first: AudioChunk
    slot: Slot
    fmt: OutputFormat
    voice: str
    route: str
    received: float  # perf_counter() when the request arrived
    metrics: ServerMetrics
    service: SpeechService
    executor: Executor
    sse: bool = False
    input_chars: int = 0
    text_param: str = "input"
    headers: dict[str, str] = field(default_factory=dict)
    _done: bool = False

    async def finish(self, *, complete: bool) -> None:
        """Stop the synthesis, free the slot, count the audio; idempotent."""
        if self._done:
            return
        self._done = True
        try:
            await self.pump.aclose()
        finally:
            self.slot.release()
        if complete and self.pump.started is not None and self.pump.finished is not None:
            seconds = self.pump.samples / self.first.sample_rate
            wall = self.pump.finished - self.pump.started
            self.metrics.audio_seconds.inc(self.voice, amount=seconds)
            self.metrics.synthesis_seconds.inc(self.voice, amount=wall)
            if seconds > 0:
                self.metrics.rtf.observe(wall / seconds, self.voice)


async def client_left(receive: Receive) -> None:
    """Returns when the client disconnects (the request body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class SpeechResponse(Response):
    """Sends a :class:`SpeechJob`'s audio; stops the synthesis if the client goes away."""

    def __init__(self, job: SpeechJob) -> None:
        self.job = job
        self._started = False
        self.status_code = 200
        self.background = None
        media = "text/event-stream" if job.sse else job.fmt.media_type
        headers = {
            "Cache-Control": "no-cache",
            "X-Sample-Rate": str(job.fmt.sample_rate),
            **job.headers,
        }
        if job.fmt.stream or job.sse:
            headers["X-Accel-Buffering"] = "no"  # nginx: pass chunks on at once
        if not job.sse:
            headers["Content-Disposition"] = f"attachment; filename=speech.{job.fmt.name}"
        self.media_type = media
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        job = self.job
        produce = asyncio.ensure_future(self._produce(send))
        watch = asyncio.ensure_future(client_left(receive))
        complete = failed = False
        try:
            await asyncio.wait({produce, watch}, return_when=asyncio.FIRST_COMPLETED)
            if produce.done():
                produce.result()  # a synthesis error mid-stream propagates from here
                complete = True
        except OSError:  # the server could not send: the client is gone
            pass
        except Exception as exc:
            failed = True
            if not self._started:  # a whole-file response: nothing sent, so say what failed
                error = failure_response(exc, job.metrics, job.text_param)
                if isinstance(error, APIError):
                    await send_error(send, error.status, error.message, error.code, error.headers,
                                     error.param)  # fmt: skip
                    return
                raise
            job.metrics.errors.inc("stream")
            log.exception("synthesis failed after the response began (voice %s)", job.voice)
            raise
        finally:
            for task in (produce, watch):
                task.cancel()
            await asyncio.gather(produce, watch, return_exceptions=True)
            await job.finish(complete=complete)
            if not complete and not failed:
                job.metrics.disconnects.inc()
                log.info("client left; stopped %s after %d samples", job.voice, job.pump.samples)

    async def _produce(self, send: Send) -> None:
        job = self.job
        if job.fmt.stream:
            await self._stream(send)
        else:
            await self._whole(send)

    async def _start(self, send: Send, length: int | None = None) -> None:
        self._started = True
        if length is not None:
            self.raw_headers.append((b"content-length", str(length).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})

    async def _body(self, send: Send, data: bytes, *, more: bool = True) -> None:
        if self.job.sse and data:
            event = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}
            data = f"data: {json.dumps(event)}\n\n".encode()
        if data or not more:
            await send({"type": "http.response.body", "body": data, "more_body": more})

    async def _done_event(self, send: Send) -> None:
        if self.job.sse:
            chars = self.job.input_chars
            usage = {"input_tokens": chars, "output_tokens": 0, "total_tokens": chars}
            event = {"type": "speech.audio.done", "usage": usage}
            data = f"data: {json.dumps(event)}\n\n".encode()
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream(self, send: Send) -> None:
        job = self.job
        encoder = StreamEncoder(job.fmt)
        await self._start(send)
        await self._body(send, encoder.start() + encoder.chunk(job.first))
        job.metrics.first_audio.observe(time.perf_counter() - job.received, job.route)
        while (chunk := await job.pump.next()) is not None:
            await self._body(send, encoder.chunk(chunk))
        # Free the slot before the client can see the end, so its next request
        # never finds its own finished one still counted.
        await job.finish(complete=True)
        await self._body(send, encoder.finish())
        await self._done_event(send)

    async def _whole(self, send: Send) -> None:
        """Made into a file chunk by chunk, encoded by the engine into another, sent from
        there as the client takes it (:mod:`yomiage.server.spool`): the process never
        holds the whole audio nor the whole body."""
        job = self.job
        loop = asyncio.get_running_loop()
        # The files are made here, not in the steps, so that they are removed whatever way
        # a step ends (a client that leaves as a step returns leaves it running).
        with ResponseSpool(job.first.sample_rate) as spool:
            await loop.run_in_executor(job.executor, spool.add, job.first.samples)
            while await job.pump.next_into(spool):
                pass
            audio = spool.finish()
            out = temp_file(f".{job.fmt.name}")
            try:
                await loop.run_in_executor(job.executor, job.service.encode, audio, job.fmt, out)
            except BaseException:
                remove(out)
                raise
        try:
            body = await loop.run_in_executor(job.executor, TempFileBody, out)  # removes out
        except BaseException:
            remove(out)
            raise
        async with contextlib.aclosing(body.blocks()) as blocks:
            await job.finish(complete=True)
            await self._start(send, None if job.sse else body.size)
            job.metrics.first_audio.observe(time.perf_counter() - job.received, job.route)
            async for data in blocks:
                await self._body(send, data)
            await self._done_event(send)
