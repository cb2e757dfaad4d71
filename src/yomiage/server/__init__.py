"""``yomiage serve``: the HTTP server (needs the ``[server]`` extra: FastAPI and uvicorn).

``create_app(tts, ServerConfig(...))`` builds the app for a prepared engine,
so it can also be mounted or tested without the command line. The settings
(:mod:`.config`) import no FastAPI: the command line reads them to build its
flags, so the app is imported only when ``create_app`` is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yomiage.server.config import ServerConfig

if TYPE_CHECKING:
    from yomiage.server.app import create_app

__all__ = ["ServerConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from yomiage.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
