"""The speech routes: OpenAI's ``/v1/audio/speech`` (and its listings) and native ``/tts``.

A request's options become one :class:`~yomiage.SynthesisOptions`, checked
for its voice, before it may wait for a slot; an invalid one is a 400 that
names the field (OpenAI's ``param``). Only yomiage's own error messages reach
a client; anything else is a 500 that names no internals.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage.errors import Cancelled, OptionError, TextError
from yomiage.options import SynthesisOptions
from yomiage.server.config import MODEL_IDS, OPENAI_VOICES
from yomiage.server.encoding import OutputFormat, output_format
from yomiage.server.engine.service import EngineRequest, VoiceCard
from yomiage.server.errors import APIError
from yomiage.server.failures import failure_response
from yomiage.server.limits import Rejected, Slot
from yomiage.server.schemas import SpeechRequest, SynthesisFields, TTSRequest
from yomiage.server.speech import ChunkPump, SpeechJob, SpeechResponse, client_left
from yomiage.server.state import ServerState

OPENAI_PCM_RATE = 24000  # what OpenAI clients assume for headerless pcm
_CREATED = 1735689600  # a fixed "created" time for /v1/models (2025-01-01)


def add_openai_routes(app: FastAPI, state: ServerState) -> None:
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
            return {"voices": list(state.voices)}
        return {"voices": [_voice_record(state, card) for card in state.voices.values()]}

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
                400, f"speed must be between 0.25 and 4, not {body.speed:g}",
                code="invalid_value", param="speed",
            )  # fmt: skip
        voice = body.voice.id if not isinstance(body.voice, str) else body.voice
        card = state.card(_voice_name(state, voice, openai=True))
        options = _options(card, body, speed=1.0 / body.speed)
        rate = body.sample_rate
        if rate is None and body.response_format.lower() == "pcm":
            rate = OPENAI_PCM_RATE
        fmt = output_format(
            body.response_format,
            card.sample_rate,
            sample_rate=rate,
            stream=body.stream,
            param="response_format",
        )
        return await _speak(
            state, request, card, body.input, options, fmt, "/v1/audio/speech", received,
            sse=body.stream_format == "sse", text_param="input",
        )  # fmt: skip


def add_native_routes(app: FastAPI, state: ServerState) -> None:
    @app.post("/tts", tags=["native"], response_class=Response)
    async def tts(body: TTSRequest, request: Request) -> Response:
        """Every option of the Python API; ``speed`` is its length scale (2 = half as fast)."""
        received = time.perf_counter()
        card = state.card(_voice_name(state, body.voice or state.default_voice, openai=False))
        options = _options(card, body, speed=body.speed)
        fmt = output_format(
            body.format,
            card.sample_rate,
            sample_rate=body.sample_rate,
            stream=body.stream,
            param="format",
        )
        return await _speak(
            state, request, card, body.text, options, fmt, "/tts", received, sse=False,
            text_param="text",
        )  # fmt: skip


def _voice_record(state: ServerState, card: VoiceCard) -> dict[str, Any]:
    aliases = sorted(a for a, t in state.config.voice_aliases.items() if t == card.name)
    return {
        "id": card.name,
        "name": card.name,
        "styles": list(card.styles),
        "speakers": dict(card.speaker_ids),
        "sample_rate": card.sample_rate,
        "runtime": card.runtime,
        "license": card.credits.license if card.credits else None,
        "credits": card.credits.as_dict() if card.credits else None,
        "default": card.name == state.default_voice,
        "aliases": aliases,
    }


def _voice_name(state: ServerState, voice: str | None, *, openai: bool) -> str:
    if voice is None or not state.voices:  # None: no default, since no voice is loaded
        raise state.no_voice()
    if voice in state.voices:
        return voice
    if voice in state.config.voice_aliases:
        return state.config.voice_aliases[voice]
    if openai and voice.lower() in OPENAI_VOICES and state.default_voice is not None:
        return state.default_voice
    raise APIError(
        400,
        f"unknown voice {voice[:100]!r}; voices: {', '.join(state.voices)}",
        code="voice_not_found",
        param="voice",
    )


def _options(card: VoiceCard, body: SynthesisFields, *, speed: float | None) -> SynthesisOptions:
    """The request's options, built once and checked for ``card`` (400 naming the field)."""
    fields: dict[str, Any] = body.fields()
    if speed is not None:
        fields["speed"] = speed
    if body.speaker_id is not None:
        value = body.speaker_id
        if isinstance(value, str) and value in card.speaker_ids:
            value = card.speaker_ids[value]
        if not isinstance(value, int):
            known = ", ".join(f"{n}={i}" for n, i in card.speaker_ids.items())
            raise APIError(
                400, f"unknown speaker {value[:100]!r}; speakers: {known}", code="invalid_value",
                param="speaker_id",
            )  # fmt: skip
        fields["speaker_id"] = value
    try:
        options = SynthesisOptions.from_fields(fields)
        return options.check_voice(card.name, card.styles, card.speaker_ids)
    except OptionError as exc:
        raise APIError(400, str(exc), code="invalid_value", param=exc.field) from None


async def _speak(
    state: ServerState,
    request: Request,
    card: VoiceCard,
    text: str,
    options: SynthesisOptions,
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
    if not state.accepting:  # a worker restarting is waited for, like a queue
        state.metrics.turn_away(request.scope, "not_ready")
        raise state.not_ready()
    slot = await admit(state, request)
    heard_as_made = fmt.stream or sse  # else the client waits for the whole body
    source = state.service.open(EngineRequest(card.name, text, options, early_audio=heard_as_made))
    pump = ChunkPump(state.executor, source)
    try:
        first = await _first_chunk(state, request, pump)
    except BaseException as exc:
        pump.cancel()
        await pump.aclose()
        slot.release()
        raise failure_response(exc, state.metrics, text_param) from None
    job = SpeechJob(
        pump, first, slot, fmt, card.name, route, received, state.metrics, state.service,
        state.executor, sse=sse, input_chars=len(text), text_param=text_param,
    )  # fmt: skip
    return SpeechResponse(job)


async def _first_chunk(state: ServerState, request: Request, pump: ChunkPump) -> Any:
    """The first chunk; the work stops at once if the client leaves before it comes."""
    making = asyncio.ensure_future(pump.next())
    left = asyncio.ensure_future(client_left(request.receive))
    try:
        await asyncio.wait({making, left}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        left.cancel()
    if not making.done():
        pump.cancel()
        await asyncio.gather(making, return_exceptions=True)
        state.metrics.disconnects.inc()
        raise Cancelled("the client left before the first audio")
    first = making.result()
    if first is None:
        raise TextError("nothing to read in the text")
    return first


async def admit(state: ServerState, request: Request) -> Slot:
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
        state.metrics.turn_away(request.scope, exc.reason)
        if exc.reason == "queue_full":
            raise APIError(
                429, str(exc), code="server_busy", headers={"Retry-After": "1"}
            ) from None
        if exc.reason == "shutting_down":
            raise state.not_ready() from None
        raise APIError(503, str(exc), code="queue_timeout", headers={"Retry-After": "5"}) from None
