"""The HTTP server: an OpenAI-compatible speech endpoint, a native one, and operations.

:func:`create_app` builds the FastAPI app around a prepared :class:`TTS`; the
caller owns the engine (and closes it). Inference runs in the app's own
worker threads, never on the event loop; a fixed number of requests
synthesize at once behind a bounded queue (:mod:`yomiage.server.limits`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage import __version__
from yomiage.engine import TTS, WARMUP_TEXT
from yomiage.errors import MissingExtraError, TextError
from yomiage.server import errors
from yomiage.server.config import MODEL_IDS, OPENAI_VOICES, ServerConfig
from yomiage.server.dictionary_routes import add_dictionary_routes
from yomiage.server.encoding import OutputFormat, output_format
from yomiage.server.errors import APIError
from yomiage.server.limits import AdmissionGate, Rejected, Slot
from yomiage.server.metrics import CONTENT_TYPE, ServerMetrics
from yomiage.server.middleware import GuardMiddleware, MetricsMiddleware
from yomiage.server.playground import add_playground_routes
from yomiage.server.schemas import SpeechRequest, SynthesisFields, TTSRequest
from yomiage.server.speech import ChunkPump, SpeechJob, SpeechResponse, client_left
from yomiage.speaker import Speaker

log = logging.getLogger(__name__)

OPENAI_PCM_RATE = 24000  # what OpenAI clients assume for headerless pcm
_CREATED = 1735689600  # a fixed "created" time for /v1/models (2025-01-01)


@dataclass
class ServerState:
    """What the routes share; one per app."""

    tts: TTS
    speakers: Mapping[str, Speaker]
    config: ServerConfig
    gate: AdmissionGate
    metrics: ServerMetrics
    executor: ThreadPoolExecutor
    default_voice: str
    ready: bool = False
    ready_error: str | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


def create_app(tts: TTS, config: ServerConfig | None = None) -> FastAPI:
    """The app for a prepared engine (``TTS(...).load(...).prepare()``).

    Starting it (its lifespan) warms every voice in the background unless
    ``config.warmup`` is false; ``/ready`` answers 200 once that is done.
    """
    config = config or ServerConfig()
    speakers = tts.speakers  # NotPreparedError if prepare() was not called
    if not speakers:
        raise ValueError("the engine has no voices; load() and prepare() at least one")
    default = config.default_voice or next(iter(speakers))
    for alias, target in {"default_voice": default, **config.voice_aliases}.items():
        if target not in speakers:
            raise ValueError(
                f"{alias} names voice {target!r}, which is not loaded "
                f"(loaded: {', '.join(speakers)})"
            )
    gate = AdmissionGate(config.max_concurrency, config.max_queue, config.queue_timeout)
    metrics = ServerMetrics(
        in_flight=lambda: gate.active, queued=lambda: gate.waiting, version=__version__
    )
    metrics.concurrency_limit.set(config.max_concurrency)
    metrics.queue_limit.set(config.max_queue)
    metrics.voices.set(len(speakers))
    # Each request in flight needs a thread for its next window and one to close it.
    executor = ThreadPoolExecutor(2 * config.max_concurrency + 1, thread_name_prefix="yomiage")
    state = ServerState(tts, speakers, config, gate, metrics, executor, default)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if config.warmup:
            task = asyncio.create_task(_warm_up(state))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)
        else:
            _set_ready(state)
        try:
            yield
        finally:
            for task in list(state.tasks):
                task.cancel()
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="yomiage",
        version=__version__,
        summary="Japanese text to speech with Style-Bert-VITS2 voices; OpenAI-compatible.",
        docs_url=None,  # Swagger and ReDoc load from a CDN; /openapi.json stays
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.yomiage = state
    errors.install(app)
    app.add_middleware(GuardMiddleware, config=config)
    if config.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["X-Sample-Rate", "Retry-After"],
        )
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    _add_operations(app, state)
    _add_openai(app, state)
    _add_native(app, state)
    add_dictionary_routes(app, state)
    if config.playground:
        add_playground_routes(app)
    return app


def _set_ready(state: ServerState) -> None:
    state.ready = True
    state.metrics.ready.set(1)


async def _warm_up(state: ServerState) -> None:
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    try:
        for speaker in state.speakers.values():
            await loop.run_in_executor(state.executor, _warm, speaker)
    except Exception as exc:
        state.ready_error = f"warm-up failed: {exc}"
        log.exception("warm-up failed; /ready stays 503")
        return
    log.info("warmed %d voice(s) in %.1f s", len(state.speakers), time.perf_counter() - started)
    _set_ready(state)


def _warm(speaker: Speaker) -> None:
    speaker.generate(WARMUP_TEXT, seed=0)


# -- routes ------------------------------------------------------------------


def _add_operations(app: FastAPI, state: ServerState) -> None:
    @app.get("/health", tags=["operations"])
    async def health() -> dict[str, str]:
        """Alive (answers while voices warm up)."""
        return {"status": "healthy"}

    @app.get("/ready", tags=["operations"])
    async def ready() -> dict[str, Any]:
        """200 once every voice is loaded and warmed; 503 before (or if warm-up failed)."""
        if not state.ready:
            raise _not_ready(state)
        limit = state.config.max_input_chars
        return {"status": "ready", "voices": list(state.speakers), "max_input_chars": limit}

    @app.get("/metrics", tags=["operations"])
    async def metrics() -> Response:
        """Prometheus text exposition format."""
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)


def _not_ready(state: ServerState) -> APIError:
    if state.ready_error:
        return APIError(503, state.ready_error, code="warmup_failed")
    return APIError(
        503,
        f"warming up {len(state.speakers)} voice(s); retry shortly",
        code="not_ready",
        headers={"Retry-After": "2"},
    )


def _add_openai(app: FastAPI, state: ServerState) -> None:
    def model_record(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": _CREATED, "owned_by": "yomiage"}

    @app.get("/v1/models", tags=["openai"])
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_record(m) for m in MODEL_IDS]}

    @app.get("/v1/models/{model}", tags=["openai"])
    async def model(model: str) -> dict[str, Any]:
        if model not in MODEL_IDS:
            raise APIError(
                404, f"no model {model!r}; models: {', '.join(MODEL_IDS)}", code="model_not_found"
            )
        return model_record(model)

    @app.get("/v1/audio/voices", tags=["openai"])
    async def voices(legacy: bool = False) -> dict[str, Any]:
        """The loaded voices (``legacy=true``: names only), with their styles and speakers."""
        if legacy:
            return {"voices": list(state.speakers)}
        return {"voices": [_voice_record(state, n, s) for n, s in state.speakers.items()]}

    @app.post("/v1/audio/speech", tags=["openai"], response_class=Response)
    async def speech(body: SpeechRequest, request: Request) -> Response:
        """OpenAI's text to speech. The engine's options may be sent as extra fields."""
        received = time.perf_counter()
        if body.model not in MODEL_IDS:
            raise APIError(
                400,
                f"unknown model {body.model!r}; models: {', '.join(MODEL_IDS)}",
                code="model_not_found",
                param="model",
            )
        if not 0.25 <= body.speed <= 4.0:
            raise APIError(
                400, f"speed must be between 0.25 and 4, not {body.speed}", code="invalid_value",
                param="speed",
            )  # fmt: skip
        voice = body.voice.id if not isinstance(body.voice, str) else body.voice
        name = _voice_name(state, voice, openai=True)
        speaker = state.speakers[name]
        fields = _fields(speaker, body, speed=1.0 / body.speed)
        rate = body.sample_rate
        if rate is None and body.response_format.lower() == "pcm":
            rate = OPENAI_PCM_RATE
        fmt = output_format(
            body.response_format,
            speaker.sample_rate,
            sample_rate=rate,
            stream=body.stream,
            param="response_format",
        )
        return await _speak(
            state, request, speaker, body.input, fields, fmt, "/v1/audio/speech", received,
            sse=body.stream_format == "sse", text_param="input",
        )  # fmt: skip


def _add_native(app: FastAPI, state: ServerState) -> None:
    @app.post("/tts", tags=["native"], response_class=Response)
    async def tts(body: TTSRequest, request: Request) -> Response:
        """Every option of the Python API; ``speed`` is its length scale (2 = half as fast)."""
        received = time.perf_counter()
        name = _voice_name(state, body.voice or state.default_voice, openai=False)
        speaker = state.speakers[name]
        fields = _fields(speaker, body, speed=body.speed)
        fmt = output_format(
            body.format,
            speaker.sample_rate,
            sample_rate=body.sample_rate,
            stream=body.stream,
            param="format",
        )
        return await _speak(
            state, request, speaker, body.text, fields, fmt, "/tts", received, sse=False,
            text_param="text",
        )  # fmt: skip


# -- helpers -----------------------------------------------------------------


def _voice_record(state: ServerState, name: str, speaker: Speaker) -> dict[str, Any]:
    aliases = sorted(a for a, t in state.config.voice_aliases.items() if t == name)
    return {
        "id": name,
        "name": name,
        "styles": list(speaker.styles),
        "speakers": dict(speaker.speaker_ids),
        "sample_rate": speaker.sample_rate,
        "default": name == state.default_voice,
        "aliases": aliases,
    }


def _voice_name(state: ServerState, voice: str, *, openai: bool) -> str:
    if voice in state.speakers:
        return voice
    if voice in state.config.voice_aliases:
        return state.config.voice_aliases[voice]
    if openai and voice.lower() in OPENAI_VOICES:
        return state.default_voice
    raise APIError(
        400,
        f"unknown voice {voice!r}; voices: {', '.join(state.speakers)}",
        code="voice_not_found",
        param="voice",
    )


def _fields(speaker: Speaker, body: SynthesisFields, *, speed: float | None) -> dict[str, Any]:
    """The engine options of a request, checked for ``speaker`` (APIError 400 naming the field)."""
    fields = body.fields()
    if speed is not None:
        fields["speed"] = speed
    if body.speaker_id is not None:
        value = body.speaker_id
        if isinstance(value, str) and value in speaker.speaker_ids:
            value = speaker.speaker_ids[value]
        if not isinstance(value, int):
            known = ", ".join(f"{n}={i}" for n, i in speaker.speaker_ids.items())
            raise APIError(
                400, f"unknown speaker {value!r}; speakers: {known}", code="invalid_value",
                param="speaker_id",
            )  # fmt: skip
        fields["speaker_id"] = value
    try:
        speaker.options(**fields)
    except ValueError as exc:
        message = str(exc)
        param = next((n for n in sorted(fields, key=len, reverse=True) if n in message), None)
        raise APIError(400, message, code="invalid_value", param=param) from None
    return fields


async def _speak(
    state: ServerState,
    request: Request,
    speaker: Speaker,
    text: str,
    fields: dict[str, Any],
    fmt: OutputFormat,
    route: str,
    received: float,
    *,
    sse: bool,
    text_param: str,
) -> Response:
    """Admit the request, start its synthesis (errors in the text show here) and respond."""
    limit = state.config.max_input_chars
    if not text.strip():
        raise APIError(400, f"{text_param} is empty", code="empty_input", param=text_param)
    if len(text) > limit:
        raise APIError(
            413,
            f"{text_param} has {len(text)} characters; this server reads at most {limit}",
            code="input_too_long",
            param=text_param,
        )
    if not state.ready:
        state.metrics.rejected.inc("not_ready")
        raise _not_ready(state)
    slot = await _admit(state, request)
    pump = ChunkPump(state.executor, speaker, text, fields)
    try:
        first = await pump.next()
        if first is None:
            raise TextError("nothing to read in the text")
    except BaseException as exc:
        await pump.aclose()
        slot.release()
        raise _synthesis_error(exc, text_param) from None
    job = SpeechJob(
        pump, first, slot, fmt, speaker.name, route, received, state.metrics, state.executor,
        sse=sse, input_chars=len(text),
    )  # fmt: skip
    return SpeechResponse(job)


async def _admit(state: ServerState, request: Request) -> Slot:
    """A slot, waiting in the queue if need be; gives up if the client leaves meanwhile."""
    gate = state.gate
    try:
        if gate.active < gate.limit:
            return await gate.acquire()
        waiting = asyncio.ensure_future(gate.acquire())
        left = asyncio.ensure_future(client_left(request.receive))
        try:
            await asyncio.wait({waiting, left}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiting, left):
                task.cancel()
            await asyncio.gather(waiting, left, return_exceptions=True)
        if not waiting.cancelled():
            slot = waiting.result()  # raises Rejected if the wait timed out
            if left.cancelled():
                return slot
            slot.release()  # got one just as the client left
        state.metrics.disconnects.inc()
        raise APIError(499, "the client left while queued", code="client_closed_request")
    except Rejected as exc:
        state.metrics.rejected.inc(exc.reason)
        if exc.reason == "queue_full":
            raise APIError(
                429, str(exc), code="server_busy", headers={"Retry-After": "1"}
            ) from None
        raise APIError(503, str(exc), code="queue_timeout", headers={"Retry-After": "5"}) from None


def _synthesis_error(exc: BaseException, text_param: str) -> BaseException:
    """What a failure before the first chunk becomes (anything unknown stays as it is)."""
    if isinstance(exc, TextError):
        return APIError(400, str(exc), code="invalid_input", param=text_param)
    if isinstance(exc, MissingExtraError):
        return APIError(501, str(exc), code="not_available")
    if isinstance(exc, ValueError):
        return APIError(400, str(exc), code="invalid_value")
    return exc
