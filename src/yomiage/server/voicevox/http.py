"""How the VOICEVOX routes talk HTTP: the responses strict clients expect.

VOICEVOX clients are strict in ways FastAPI's defaults are not, so responses
are built by hand: JSON is sent as exactly ``application/json`` (clients
compare the string), a 204 carries no body and no content type, and errors are
``{"detail": ...}`` (VOICEVOX's shape; its clients read ``detail``). Query
parameters are read here too, so a bad one is a 422 naming it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage.errors import MissingExtraError
from yomiage.server.errors import APIError
from yomiage.server.failures import failure_response
from yomiage.voicevox.model import QueryError

if TYPE_CHECKING:
    from yomiage.server.state import ServerState

Handler = Callable[[Request], Awaitable[Response]]
Route = Callable[[str, str], Callable[[Handler], Handler]]


class VoxError(Exception):
    """A VOICEVOX route's answer other than success: ``{"detail": detail}`` with ``status``."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


def json_response(value: Any, status: int = 200) -> Response:
    body = json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    return Response(body, status, media_type="application/json")


def no_content() -> Response:
    return Response(status_code=204)  # no body, no content type


def int_param(request: Request, name: str, *, required: bool = True) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        if required:
            raise VoxError(422, f"query parameter {name!r} is required")
        return None
    try:
        return int(raw)
    except ValueError:
        raise VoxError(
            422, f"query parameter {name!r} must be an integer, not {raw[:40]!r}"
        ) from None


def flag_param(request: Request, name: str, default: bool | None) -> bool:
    """A boolean query parameter (``default`` None: required)."""
    raw = request.query_params.get(name)
    if raw is None:
        if default is None:
            raise VoxError(422, f"query parameter {name!r} is required")
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise VoxError(422, f"query parameter {name!r} must be true or false")


async def json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise VoxError(422, f"the body is not JSON: {exc}") from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise VoxError(422, "the body is JSON nested too deep") from None


def vox_router(app: FastAPI, state: ServerState) -> Route:
    """``route(method, path)``: a decorator adding a handler that answers VOICEVOX's
    way, failures included (mapped as the speech routes map them)."""

    def route(method: str, path: str) -> Callable[[Handler], Handler]:
        def wrap(handler: Handler) -> Handler:
            async def endpoint(request: Request) -> Response:
                try:
                    return await handler(request)
                except VoxError as exc:
                    return json_response({"detail": exc.detail}, exc.status)
                except QueryError as exc:
                    return json_response({"detail": str(exc)}, 422)
                except MissingExtraError as exc:
                    return json_response({"detail": str(exc)}, 400)
                except Exception as exc:
                    mapped = failure_response(exc, state.metrics, "text")
                    if isinstance(mapped, APIError):
                        response = json_response({"detail": mapped.message}, mapped.status)
                        response.headers.update(mapped.headers)
                        return response
                    raise

            name = "".join(c if c.isalnum() else "_" for c in path.strip("/"))
            endpoint.__name__ = f"voicevox_{method.lower()}_{name}"
            app.add_api_route(path, endpoint, methods=[method], tags=["voicevox"],
                              response_class=Response)  # fmt: skip
            return handler

        return wrap

    return route
