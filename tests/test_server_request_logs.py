"""A warning once per request, not once per sentence (issue 49, item 14)."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("fastapi")

from tests.serving import serve
from yomiage import TTS
from yomiage.server import ServerConfig

pytestmark = pytest.mark.server


def test_a_request_logs_the_frontends_skipped_characters_once(
    engine: TTS, caplog: pytest.LogCaptureFixture
) -> None:
    """``"http://" * 580`` to /tts wrote "skipped : (U+003A) ... no rule reads them" about
    61 times, once for each sentence of the one request."""
    from yomiage.server.engine.request_logs import OncePerRequest

    caplog.handler.addFilter(OncePerRequest())  # as `yomiage serve` puts it on its handlers
    with (
        caplog.at_level(logging.WARNING),
        serve(engine, ServerConfig(warmup=False)) as running,
        running.client() as http,
    ):
        answer = http.post("/tts", json={"text": "http://" * 580 + "。", "format": "pcm"})
        again = http.post("/tts", json={"text": "http://★。", "format": "pcm"})
    assert answer.status_code == 200 and again.status_code == 200
    skipped = [r for r in caplog.records if "no rule reads them" in str(r.msg)]
    assert len(skipped) == 2, [r.getMessage() for r in skipped]  # one for each request
    (summary,) = [r.getMessage() for r in caplog.records if "more time(s)" in r.getMessage()]
    assert "no rule reads them" in summary and "the same request" in summary
