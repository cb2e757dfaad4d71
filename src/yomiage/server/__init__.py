"""``yomiage serve``: the HTTP server (needs the ``[server]`` extra: FastAPI and uvicorn).

``create_app(tts, ServerConfig(...))`` builds the app for a prepared engine,
so it can also be mounted or tested without the command line.
"""

from __future__ import annotations

from yomiage.server.app import create_app
from yomiage.server.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]
