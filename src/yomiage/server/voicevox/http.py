"""How the VOICEVOX routes talk HTTP: the responses strict clients expect.

VOICEVOX clients are strict in ways FastAPI's defaults are not, so responses
are built by hand: JSON is sent as exactly ``application/json`` (clients
compare the string), a 204 carries no body and no content type, and errors are
``{"detail": ...}`` (VOICEVOX's shape; its clients read ``detail``). A request
that is malformed (a query parameter or a body of the wrong shape) is a 422 in
the shape VOICEVOX's FastAPI gives it and its API document declares,
``{"detail": [{"loc", "msg", "type"}]}`` (:func:`invalid`); other refusals carry
a message, as VOICEVOX's own ``HTTPException``s do. Query parameters are read
here too, so a bad one is a 422 naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
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


def invalid(loc: Sequence[str | int], msg: str, kind: str = "value_error") -> VoxError:
    """A 422 for a malformed request, as FastAPI words one: ``loc`` says where (``"query",
    name`` or ``"body", key, index...``), ``kind`` is pydantic's name for the fault."""
    return VoxError(422, [{"type": kind, "loc": list(loc), "msg": msg}])


_STEP = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def body_loc(field: str) -> list[str | int]:
    """``["body", ...]`` for the JSON path a :class:`QueryError` names
    (``accent_phrases[0].moras`` is ``["body", "accent_phrases", 0, "moras"]``)."""
    if field == "body":
        return ["body"]
    return ["body", *(int(index) if index else key for index, key in _STEP.findall(field))]


def json_response(value: Any, status: int = 200) -> Response:
    return encoded_json(json_bytes(value), status)


def json_bytes(value: Any) -> bytes:
    """``value`` as the JSON these routes send (UTF-8 as is, no NaN); a large one is
    encoded on a worker thread, never on the event loop."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode()


def encoded_json(body: bytes, status: int = 200) -> Response:
    """A JSON answer encoded already (:func:`json_bytes`)."""
    return Response(body, status, media_type="application/json")


def no_content() -> Response:
    return Response(status_code=204)  # no body, no content type


def missing(name: str) -> VoxError:
    return invalid(("query", name), f"query parameter {name!r} is required", "missing")


def text_param(request: Request, name: str) -> str:
    """A required string query parameter (an empty one is the route's to judge)."""
    raw = request.query_params.get(name)
    if raw is None:
        raise missing(name)
    return raw


def int_param(request: Request, name: str, *, required: bool = True) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        if required:
            raise missing(name)
        return None
    try:
        return int(raw)
    except ValueError:
        raise invalid(
            ("query", name),
            f"query parameter {name!r} must be an integer, not {raw[:40]!r}",
            "int_parsing",
        ) from None


def flag_param(request: Request, name: str, default: bool | None) -> bool:
    """A boolean query parameter (``default`` None: required)."""
    raw = request.query_params.get(name)
    if raw is None:
        if default is None:
            raise missing(name)
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise invalid(("query", name), f"query parameter {name!r} must be true or false",
                  "bool_parsing")  # fmt: skip


async def json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        raise invalid(("body",), "the body is required: send it as JSON", "missing")
    try:
        return json.loads(raw)
    except ValueError as exc:  # the place, as FastAPI gives it: the character at fault
        at = getattr(exc, "pos", 0)
        raise invalid(("body", at), f"the body is not JSON: {exc}", "json_invalid") from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise invalid(("body",), "the body is JSON nested too deep", "json_invalid") from None


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
                except QueryError as exc:  # a body of the wrong shape
                    error = invalid(body_loc(exc.field), str(exc))
                    return json_response({"detail": error.detail}, error.status)
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
