"""The worker takes what it measured in its idle time without a restart, and the server
learns of it: the voices' cards the parent serves (``/ready``'s plans, ``/v1/audio/voices``'
runtime) are the child's as they are after the swap (issue 48)."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest

from tests import crashing_service

pytest.importorskip("fastapi")

from yomiage.options import SynthesisOptions
from yomiage.server.engine.worker import WorkerService

pytestmark = pytest.mark.server

GUARD = 60.0


def test_the_parent_serves_the_cards_of_the_voices_the_child_loaded_anew(
    test_voice: Path,
) -> None:
    worker = WorkerService(functools.partial(crashing_service.build_measuring, str(test_voice)))
    try:
        before = worker.voices["tiny"]
        assert before.plan != "measured in the idle time"
        end = time.monotonic() + GUARD
        while worker.voices["tiny"].plan != "measured in the idle time":
            assert time.monotonic() < end, "the child's new cards never reached the parent"
            time.sleep(0.05)
        after = worker.voices["tiny"]
        assert (after.name, after.styles, after.sample_rate) == (
            before.name, before.styles, before.sample_rate,
        )  # fmt: skip
        # and it goes on answering
        readings = worker.read("tiny", "こんにちは。", SynthesisOptions())
        assert readings and readings[0].phonemes.phones
        assert worker.crashes == 0 and worker.restarts == 0
    finally:
        worker.close()
