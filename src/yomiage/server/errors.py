"""Errors as OpenAI sends them: ``{"error": {"message", "type", "param", "code"}}``.

Every 4xx and 5xx the server answers has this body, whatever raised it: our
own :class:`APIError`, a request FastAPI could not parse or validate, an
unknown route, or a bug (a 500 that names no internals).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from yomiage.server.threads import ServerStopping

log = logging.getLogger(__name__)

# HTTP status -> OpenAI error type
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_type(status: int) -> str:
    return _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


class APIError(Exception):
    """An error response; ``code`` is a stable machine-readable name (docs/server.md)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = dict(headers or {})


def error_body(status: int, message: str, code: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    code: str,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(status, message, code, param), status, headers=dict(headers or {})
    )


# pydantic error type -> what the value must be (our words, not the library's).
_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "literal_error": "one of the documented values",
    "string_too_long": "shorter",
}


def _validation_response(exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    first = errors[0] if errors else {}
    kind = str(first.get("type", "invalid"))
    if kind == "json_invalid":
        return error_response(400, "the body is not valid JSON", "invalid_json")
    # loc is ("body", "field", ...) or ("query", ...); the param is the rest.
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    param = ".".join(loc) or None
    if kind == "missing" and param is None:
        return error_response(
            400,
            "the request has no body: send a JSON object with 'Content-Type: application/json'",
            "missing_required_parameter",
        )
    if kind == "missing":
        return error_response(
            400, f"missing required parameter {param!r}", "missing_required_parameter", param
        )
    if kind == "extra_forbidden":
        return error_response(400, f"unknown parameter {param!r}", "unknown_parameter", param)
    if kind == "model_attributes_type" or (not loc and kind.endswith("_type")):
        return error_response(400, "the body must be a JSON object", "invalid_json")
    expected = _EXPECTED.get(kind, "of another kind")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    what = param or "a value"
    return error_response(400, f"{what} must be {expected}{more}", "invalid_value", param)


def install(app: FastAPI, on_error: Any = None) -> None:
    """Register the handlers that give every error the OpenAI shape."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.code, exc.param, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code
        codes = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large",
                 415: "unsupported_media_type"}  # fmt: skip
        code = codes.get(status, "internal_error" if status >= 500 else "invalid_request")
        detail = f"no route {request.method} {request.url.path}" if status == 404 else None
        if status == 405:
            detail = f"{request.method} is not allowed on {request.url.path}"
        return error_response(status, detail or code.replace("_", " "), code, headers=exc.headers)

    @app.exception_handler(ServerStopping)
    async def _stopping(request: Request, exc: ServerStopping) -> JSONResponse:
        return error_response(503, str(exc), "shutting_down", headers={"Retry-After": "5"})

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error in %s %s", request.method, request.url.path)
        return error_response(500, "internal server error; see the server log", "internal_error")
