"""The HTTP server: an OpenAI-compatible speech endpoint, a native one, and operations.

:func:`create_app` builds the FastAPI app around an engine: a prepared
:class:`~yomiage.TTS` (run in this process) or any
:class:`~yomiage.server.engine.service.SpeechService`, such as the supervised worker
process ``yomiage serve`` uses. The caller owns the engine (and closes it).
Inference runs in the app's own worker threads, never on the event loop; a
fixed number of requests synthesize at once behind a bounded queue
(:mod:`yomiage.server.limits`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response

from yomiage._version import __version__
from yomiage.engine import TTS
from yomiage.server.config import LOCAL_APP_ORIGINS, ServerConfig
from yomiage.server.dictionary_routes import add_dictionary_routes
from yomiage.server.engine.service import LocalService, SpeechService
from yomiage.server.errors import install as install_error_handlers
from yomiage.server.idle_memory import IdleTrim
from yomiage.server.limits import AdmissionGate
from yomiage.server.metrics import CONTENT_TYPE, ServerMetrics
from yomiage.server.middleware import GuardMiddleware, MetricsMiddleware, ShieldMiddleware
from yomiage.server.playground import add_playground_routes
from yomiage.server.speech_routes import add_native_routes, add_openai_routes
from yomiage.server.state import ServerState
from yomiage.server.threads import ServerThreads

log = logging.getLogger(__name__)


def create_app(
    engine: TTS | SpeechService,
    config: ServerConfig | None = None,
    *,
    cache_dir: Path | str | None = None,
) -> FastAPI:
    """The app for a prepared engine (``TTS(...).load(...).prepare()``) or a service.

    Starting it (its lifespan) warms every voice in the background unless
    ``config.warmup`` is false; ``/ready`` answers 200 once that is done. An engine
    with no voice serves only where voices can be installed or loaded while it runs
    (``config.models_dir`` with the model API on): synthesis answers 404 until then.
    """
    config = config or ServerConfig()
    service = LocalService(engine) if isinstance(engine, TTS) else engine
    voices = service.voices
    can_install = config.models_dir is not None and config.model_api != "off"
    if not voices and not can_install:
        raise ValueError("the engine has no voices; load() and prepare() at least one")
    default = config.default_voice or next(iter(voices), None)
    for alias, target in {"default_voice": default, **config.voice_aliases}.items():
        if target is not None and target not in voices:
            raise ValueError(
                f"{alias} names voice {target!r}, which is not loaded (loaded: {', '.join(voices)})"
            )
    gate = AdmissionGate(config.max_concurrency, config.max_queue, config.queue_timeout)
    metrics = ServerMetrics(
        in_flight=lambda: gate.active,
        queued=lambda: gate.waiting,
        version=__version__,
        worker_crashes=lambda: float(getattr(service, "crashes", 0)),
        worker_restarts=lambda: float(getattr(service, "restarts", 0)),
        ready=lambda: float(state.serving),  # what /ready says, when scraped
    )
    metrics.concurrency_limit.set(config.max_concurrency)
    metrics.queue_limit.set(config.max_queue)
    metrics.voices.set(len(voices))
    # Each request in flight needs a thread for its next window and one to close it.
    executor = ServerThreads(2 * config.max_concurrency + 1)
    # The engine's cache, where its AIVMX voices are converted (the model manager removes
    # the bundle of a voice it uninstalls): the TTS's own, else the caller's (serve passes
    # its --cache-dir), else the default one, which the engine uses then too.
    if cache_dir is None and isinstance(engine, TTS):
        cache_dir = engine.cache_dir
    state = ServerState(service, config, gate, metrics, executor, default,
                        cache_dir=Path(cache_dir) if cache_dir is not None else None)  # fmt: skip

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.loop = asyncio.get_running_loop()
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
    install_error_handlers(app)
    app.add_middleware(GuardMiddleware, config=config, body_limits=state.body_limits)
    origins = [*config.cors_origins, *(["app://."] if config.cors_local_apps else [])]
    if origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_origin_regex=LOCAL_APP_ORIGINS if config.cors_local_apps else None,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["X-Sample-Rate", "Retry-After"],
        )
    app.add_middleware(MetricsMiddleware, metrics=metrics, idle=IdleTrim())
    app.add_middleware(ShieldMiddleware, state=state)
    _add_operations(app, state)
    if "openai" in config.apis:
        add_openai_routes(app, state)
    add_native_routes(app, state)
    if "voicevox" in config.apis:
        from yomiage.server.voicevox.dictionary_routes import add_voicevox_dictionary_routes
        from yomiage.server.voicevox.routes import add_voicevox_routes

        add_voicevox_routes(app, state)
        add_voicevox_dictionary_routes(app, state)
        if config.models_dir is not None and config.model_api != "off":
            from yomiage.server.voicevox.aivm_routes import add_aivm_routes

            add_aivm_routes(app, state)
    add_dictionary_routes(app, state)
    if config.playground:
        add_playground_routes(app)
    return app


def _set_ready(state: ServerState) -> None:
    state.ready = True


async def _warm_up(state: ServerState) -> None:
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    try:
        for voice in state.voices:
            await loop.run_in_executor(state.executor, state.service.warm, voice)
    except Exception as exc:
        state.ready_error = f"warm-up failed: {exc}"
        log.exception("warm-up failed; /ready stays 503")
        return
    log.info("warmed %d voice(s) in %.1f s", len(state.voices), time.perf_counter() - started)
    _set_ready(state)


def _add_operations(app: FastAPI, state: ServerState) -> None:
    @app.get("/health", tags=["operations"])
    async def health() -> dict[str, str]:
        """Alive (answers while voices warm up and while a worker restarts)."""
        return {"status": "healthy"}

    @app.get("/ready", tags=["operations"])
    async def ready() -> dict[str, Any]:
        """200 once every voice is loaded and warmed; 503 before, during a worker restart,
        while shutting down, or if warm-up failed. Says each voice's plan, and warns of
        one that no plan was predicted to fit the memory budget for."""
        if not state.serving:
            raise state.not_ready()
        limit = state.config.max_input_chars
        voices = state.voices
        body = {"status": "ready", "voices": list(voices), "max_input_chars": limit}
        plans = {name: card.plan for name, card in voices.items() if card.plan}
        warnings = [
            f"voice {name!r}: no plan was predicted to fit the memory budget; the lightest "
            f"was taken: {card.plan}"
            for name, card in voices.items() if not card.fits_budget
        ]  # fmt: skip
        return {**body, **({"plans": plans} if plans else {}),
                **({"warnings": warnings} if warnings else {})}  # fmt: skip

    @app.get("/metrics", tags=["operations"])
    async def metrics() -> Response:
        """Prometheus text exposition format."""
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)
