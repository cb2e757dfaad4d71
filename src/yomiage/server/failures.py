"""What a failed synthesis becomes for the client, before any of its audio was sent.

Only yomiage's own errors carry their message to the client; anything else
stays as it is, so the app's handler answers a 500 that names no internals
(and logs it in full).
"""

from __future__ import annotations

from yomiage.errors import (
    Cancelled,
    LimitError,
    MissingExtraError,
    OptionError,
    TextError,
    VoiceNotLoadedError,
    YomiageError,
)
from yomiage.server.engine.worker import WorkerCrashed, WorkerHung, WorkerUnavailable
from yomiage.server.errors import APIError
from yomiage.server.metrics import ServerMetrics
from yomiage.server.threads import ServerStopping


def failure_response(exc: BaseException, metrics: ServerMetrics, text_param: str) -> BaseException:
    """The APIError for ``exc`` (``text_param``: the request's text field), or ``exc``."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, Cancelled):
        return APIError(499, "the client left before the first audio", code="client_closed_request")
    if isinstance(exc, TextError):
        return APIError(400, str(exc), code="invalid_input", param=text_param)
    if isinstance(exc, OptionError):
        return APIError(400, str(exc), code="invalid_value", param=exc.field)
    if isinstance(exc, LimitError):
        return APIError(413, str(exc), code="audio_too_long", param=text_param)
    if isinstance(exc, VoiceNotLoadedError):  # unloaded between the lookup and the work
        return APIError(404, str(exc), code="voice_not_found")
    if isinstance(exc, MissingExtraError):
        return APIError(501, str(exc), code="not_available")
    if isinstance(exc, WorkerCrashed):
        metrics.errors.inc("worker_crash")
        return APIError(500, str(exc), code="worker_crashed")
    if isinstance(exc, ServerStopping):
        return APIError(503, str(exc), code="shutting_down", headers={"Retry-After": "5"})
    if isinstance(exc, WorkerHung):
        metrics.errors.inc("worker_hang")
        return APIError(503, str(exc), code="worker_timeout", headers={"Retry-After": "5"})
    if isinstance(exc, WorkerUnavailable):
        return APIError(503, str(exc), code="worker_restarting", headers={"Retry-After": "2"})
    if isinstance(exc, YomiageError):
        return APIError(500, str(exc), code="synthesis_failed")
    return exc
