"""What the routes of one app share: the engine service, settings, gate, metrics, threads."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from yomiage.server.config import ServerConfig
from yomiage.server.engine.service import SpeechService, VoiceCard
from yomiage.server.errors import APIError
from yomiage.server.limits import AdmissionGate
from yomiage.server.metrics import ServerMetrics


@dataclass
class ServerState:
    """One per app. ``ready`` turns true once the voices are warmed. ``default_voice``
    is None while no voice is loaded (a server of installed voices with none yet)."""

    service: SpeechService
    config: ServerConfig
    gate: AdmissionGate
    metrics: ServerMetrics
    executor: ThreadPoolExecutor
    default_voice: str | None
    ready: bool = False
    ready_error: str | None = None
    shutting_down: bool = False
    loop: asyncio.AbstractEventLoop | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    cache_dir: Path | None = None  # the engine's cache (None: the default one)
    # The largest body each route reads, where it is not config.max_body_bytes (the
    # routes that take a VOICEVOX AudioQuery add theirs; GuardMiddleware reads it).
    body_limits: dict[str, int] = field(default_factory=dict)

    @property
    def voices(self) -> Mapping[str, VoiceCard]:
        return self.service.voices

    def card(self, name: str) -> VoiceCard:
        """The loaded voice ``name``, for a request that looked it up already: a 404 if it
        was unloaded in between (never a KeyError's 500)."""
        card = self.voices.get(name)
        if card is None:
            raise APIError(404, f"voice {name!r} is not loaded (it was just unloaded); "
                                "list the voices again", code="voice_not_found")  # fmt: skip
        return card

    def no_voice(self) -> APIError:
        """The 404 for a request while no voice is loaded at all: it names only what this
        server lets a client do about it (a route it has closed is no advice)."""
        config = self.config
        routes = config.models_dir is not None and "voicevox" in config.apis
        if routes and config.model_api == "write":
            how = ("install one (POST /aivm_models/install) or load an installed one (POST "
                   "/aivm_models/{uuid}/load)")  # fmt: skip
        elif routes and config.model_api == "read":
            how = ("load an installed one (POST /aivm_models/{uuid}/load; GET /aivm_models "
                   "lists them)")  # fmt: skip
        else:
            how = "start the server with --voice or --model"
        return APIError(404, f"no voice is loaded; {how}", code="voice_not_found")

    @property
    def accepting(self) -> bool:
        """Warmed and not shutting down: requests are taken (during a worker restart
        they wait for the new worker, as in a queue)."""
        return self.ready and not self.shutting_down

    @property
    def serving(self) -> bool:
        """Accepting, with an engine running right now (what ``/ready`` reports, so a
        load balancer sends new work elsewhere while a worker restarts)."""
        return self.accepting and self.service.available

    def not_ready(self) -> APIError:
        """The 503 for a request that came too early, too late, or during a restart."""
        if self.shutting_down:
            return APIError(
                503, "the server is shutting down; retry shortly", code="shutting_down",
                headers={"Retry-After": "5"},
            )  # fmt: skip
        if self.ready_error:
            return APIError(503, self.ready_error, code="warmup_failed")
        if self.ready and not getattr(self.service, "answering", True):
            return APIError(
                503, "the synthesis worker is not answering (stopped or hung); it is restarted "
                "once a call passes its deadline", code="worker_not_answering",
                headers={"Retry-After": "5"},
            )  # fmt: skip
        if self.ready and not self.service.available:
            return APIError(
                503, "the synthesis worker is restarting; retry shortly", code="worker_restarting",
                headers={"Retry-After": "2"},
            )  # fmt: skip
        return APIError(
            503,
            f"warming up {len(self.voices)} voice(s); retry shortly",
            code="not_ready",
            headers={"Retry-After": "2"},
        )

    def begin_shutdown(self) -> None:
        """On SIGTERM or Ctrl-C: queued requests get 503 now, new ones too (event loop only)."""
        self.shutting_down = True
        self.gate.close("the server is shutting down; retry shortly")
