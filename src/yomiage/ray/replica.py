"""One Serve replica: one engine, warmed before Serve sends it anything, behind the server's app.

The routes are the very app ``yomiage serve`` runs
(:func:`yomiage.server.create_app`), built on the replica after its engine
is ready. Loading and warming happen in the constructor, so a replica whose
voices cannot load or whose warm-up fails raises there: Serve never marks it
running, never routes to it, and retries it (then reports the deployment
failed with the error). The engine runs in the replica's own process, with
no supervising worker as ``yomiage serve`` has: Serve itself replaces a
replica whose process dies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ray import serve
from ray.serve import Deployment
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yomiage.engine_spec import EngineSpec
from yomiage.server.config import ServerConfig
from yomiage.server.engine.service import LocalService, warmed_service

if TYPE_CHECKING:
    from fastapi import FastAPI

# Serve's own logger: its lines land in the replica's log file (`serve status` points there).
log = logging.getLogger("ray.serve")


class ReplicaHeader:
    """Names the replica that answered (``X-Yomiage-Replica``, Serve's replica id), so a
    slow or failing response can be traced to its replica's logs."""

    def __init__(self, app: ASGIApp, replica: str) -> None:
        self.app = app
        self.header = (b"x-yomiage-replica", replica.encode("latin-1"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), self.header]
            await send(message)

        await self.app(scope, receive, named)


class SpeechReplica:
    """What each replica runs (:data:`SPEECH_DEPLOYMENT` wraps it for Serve)."""

    async def __init__(self, spec: EngineSpec, config: ServerConfig) -> None:  # type: ignore[misc]
        started = time.perf_counter()
        # Off the replica's event loop, which keeps answering Serve while voices load.
        self._service: LocalService = await asyncio.to_thread(warmed_service, spec)
        self._config = config
        log.info(
            "replica ready: %s loaded and warmed in %.1f s",
            ", ".join(self._service.voices),
            time.perf_counter() - started,
        )

    def __serve_build_asgi_app__(self) -> FastAPI:
        from yomiage.server.app import create_app

        app = create_app(self._service, self._config)
        replica = serve.get_replica_context().replica_id.unique_id
        app.add_middleware(ReplicaHeader, replica=replica)
        return app

    def check_health(self) -> None:
        """Serve calls this every few seconds; raising makes it replace the replica."""
        if self._service.tts.closed:
            raise RuntimeError("the replica's engine was closed")

    def __del__(self) -> None:
        service = getattr(self, "_service", None)
        if service is not None:
            service.tts.close()


# The deployment, named "yomiage" (a config file's `deployments:` section uses that name);
# yomiage.ray.app sets its options from the arguments.
SPEECH_DEPLOYMENT: Deployment = serve.deployment(name="yomiage")(serve.ingress()(SpeechReplica))
