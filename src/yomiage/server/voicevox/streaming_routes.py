"""VOICEVOX's ``/streaming_synthesis`` and ``/cancellable_synthesis`` on the same server.

``/streaming_synthesis`` sends a query's WAV while the voice reads it: the
header and the first audio leave as soon as the first ``segment_length``
seconds are made. The request holds its admission slot, meets the same
limits as ``/synthesis``, and stops the synthesis when its client leaves.
How its audio differs from ``/synthesis``'s (no peak normalization; a header
of unknown length) is in ``docs/voicevox.md`` and :mod:`yomiage.voicevox.streaming`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterator
from types import TracebackType

import numpy as np
import numpy.typing as npt
from fastapi import Request
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from yomiage.server.engine.service import EngineRequest
from yomiage.server.state import ServerState
from yomiage.server.voicevox.http import (
    Handler,
    Route,
    VoxError,
    flag_param,
    invalid,
    json_body,
)
from yomiage.server.voicevox.synthesis import VoxSynthesis
from yomiage.server.voicevox.work import VoxWork
from yomiage.voicevox.model import AudioQuery, parse_audio_query
from yomiage.voicevox.streaming import DEFAULT_SEGMENT_SECONDS, StartPastEnd, wav_stream
from yomiage.voicevox.synthesis import output_seconds

log = logging.getLogger(__name__)
ROUTE = "/streaming_synthesis"


def add_streaming_routes(
    route: Route, state: ServerState, vox: VoxSynthesis, synthesis: Handler
) -> None:
    """``/streaming_synthesis``, and ``/cancellable_synthesis`` as ``synthesis`` (the
    ``/synthesis`` handler): every yomiage synthesis already stops when its client
    leaves, which is all VOICEVOX's cancellable route adds."""
    route("POST", "/cancellable_synthesis")(synthesis)

    @route("POST", ROUTE)
    async def streaming_synthesis(request: Request) -> Response:
        received = time.perf_counter()
        style = vox.style_of(request)
        # Questions are read as questions whatever this says; the flag is checked only.
        flag_param(request, "enable_interrogative_upspeak", True)
        start_offset = _seconds(request, "start_offset", 0.0, zero_ok=True)
        if start_offset > vox.max_seconds:  # past any audio this server makes
            raise invalid(
                ("query", "start_offset"), f"query parameter 'start_offset' must be at most "
                f"{vox.max_seconds:g} seconds (the most audio this server makes a request)",
                "less_than_equal",
            )  # fmt: skip
        # A segment as long as the longest audio holds it all: what any longer one means
        # (1e308 overflowed the sample count it became, a 500).
        segment_length = min(
            _seconds(request, "segment_length", DEFAULT_SEGMENT_SECONDS), vox.max_seconds
        )
        query = vox.query_in(parse_audio_query(await json_body(request)))
        vox.check_cost([query])
        work = VoxWork(state, request)
        await work.__aenter__()
        stream: _WavPieces | None = None
        try:
            engine = await vox.engine_request(work, style, query, early_audio=True)
            # Opening starts nothing (the first next does), so it may run on the loop.
            stream = _WavPieces(state, vox, work, engine, query, start_offset, segment_length)
            first = await work.run(stream.next)
        except BaseException as exc:
            if stream is not None:
                await stream.aclose(state)
            await work.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        state.metrics.first_audio.observe(time.perf_counter() - received, ROUTE)
        return _StreamedWav(state, vox, work, stream, first or b"")


def _seconds(request: Request, name: str, default: float, *, zero_ok: bool = False) -> float:
    """A query parameter in seconds: finite, positive (or zero if ``zero_ok``); else a
    422 shaped as the other malformed parameters."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise invalid(("query", name), f"query parameter {name!r} must be a number, "
                                       f"not {raw[:40]!r}", "float_parsing") from None  # fmt: skip
    if not math.isfinite(value):  # nan, inf, and 1e400, which float() makes inf
        raise invalid(("query", name), f"query parameter {name!r} must be a finite number of "
                                       f"seconds, not {raw[:40]!r}", "finite_number")  # fmt: skip
    if value < 0 or (value == 0 and not zero_ok):
        least = "0 or more" if zero_ok else "more than 0"
        kind = "greater_than_equal" if zero_ok else "greater_than"
        raise invalid(("query", name), f"query parameter {name!r} must be {least} seconds, "
                                       f"not {raw[:40]!r}", kind)  # fmt: skip
    return value


class _WavPieces:
    """One request's WAV, a piece per :meth:`next`, made in the server's threads.

    Not thread-safe: one step at a time (``VoxWork.run`` runs them in turn).
    """

    def __init__(
        self,
        state: ServerState,
        vox: VoxSynthesis,
        work: VoxWork,
        request: EngineRequest,
        query: AudioQuery,
        start_offset: float,
        segment_length: float,
    ) -> None:
        self._vox = vox
        self._query = query
        self.voice = request.voice
        self.rate = state.card(request.voice).sample_rate
        self.made = 0  # the voice's samples so far
        self.wall = 0.0  # seconds spent making them
        self._source = state.service.open(request)
        work.when_cancelled(self._source.cancel)
        self._pieces = wav_stream(
            self._audio(), self.rate, query,
            start_offset=start_offset, segment_length=segment_length,
        )  # fmt: skip

    def _audio(self) -> Iterator[npt.NDArray[np.float32]]:
        for chunk in iter(self._source.next, None):
            self.made += len(chunk.samples)
            # The voice may read a query longer than it said: stop at the limit.
            self._vox.check_made(output_seconds(self.made, self.rate, self._query))
            yield chunk.samples

    def next(self) -> bytes | None:
        """The next piece of the WAV, None at its end (blocking). The first raises 400
        when ``start_offset`` is not before the end of the audio."""
        started = time.perf_counter()
        try:
            return next(self._pieces, None)
        except StartPastEnd as exc:
            raise VoxError(400, f"{exc}; give a start_offset before its end") from None
        finally:
            self.wall += time.perf_counter() - started

    async def aclose(self, state: ServerState) -> None:
        """Stop the synthesis and wait until no thread works on it."""
        self._source.cancel()
        loop = asyncio.get_running_loop()
        try:
            closing = loop.run_in_executor(state.executor, self._source.close)
        except RuntimeError:  # the server's threads were shut down first (a forced stop)
            closing = asyncio.ensure_future(asyncio.to_thread(self._source.close))
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await closing  # still wait: the slot is freed next
            raise


class _StreamedWav(Response):
    """Sends the pieces as they are made; frees the slot once the synthesis has stopped,
    whether the audio ended, failed or its client left."""

    media_type = "audio/wav"

    def __init__(
        self, state: ServerState, vox: VoxSynthesis, work: VoxWork, stream: _WavPieces, first: bytes
    ) -> None:
        self._state = state
        self._vox = vox
        self._work = work
        self._stream = stream
        self._first = first
        self._closed = False
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        error: BaseException | None = None
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await self._body(send, self._first)
            while (data := await self._work.run(self._stream.next)) is not None:
                await self._body(send, data)
            # Free the slot before the client can see the end, so that its next
            # request never finds this one still counted.
            await self._close(None)
            stream = self._stream
            self._vox.count(stream.voice, stream.made / stream.rate, stream.wall)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except VoxError as exc:
            error = exc
            if exc.status != 499:  # a limit reached mid-stream: the client sees it cut
                self._state.metrics.errors.inc("stream")
                log.warning("%s stopped after the response began: %s", ROUTE, exc.detail)
                raise
        except OSError as exc:  # the server could not send: the client is gone
            error = VoxError(499, "the client left")
            error.__cause__ = exc
        except asyncio.CancelledError as exc:  # the server is stopping
            error = exc
            raise
        except Exception as exc:
            error = exc
            self._state.metrics.errors.inc("stream")
            log.exception(
                "%s failed after the response began (voice %s)", ROUTE, self._stream.voice
            )
            raise
        finally:
            await self._close(error)

    async def _body(self, send: Send, data: bytes) -> None:
        if data:
            await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _close(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        tb: TracebackType | None = error.__traceback__ if error is not None else None
        try:
            await self._stream.aclose(self._state)
        finally:
            await self._work.__aexit__(type(error) if error else None, error, tb)
