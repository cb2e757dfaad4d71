"""Worker factories for the supervisor's start tests (tests/test_measuring_lifecycle.py):
a load that takes long, reporting its steps or not, and one that measures a plan step
again and again (a test stops one of those processes to hold the load there).

Module-level functions, so ``functools.partial`` of them pickles into a spawned worker.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

TINY = Path(__file__).parent / "data" / "voices" / "tiny"


class NoVoices:
    """What a worker needs of its service until its parent calls it: no voices."""

    voices: dict[str, Any] = {}  # noqa: RUF012 - read only


def long_load(seconds: float, every: float | None) -> NoVoices:
    """A load of ``seconds``, reporting a step every ``every`` seconds (None: never), as
    :func:`yomiage.progress.report_progress` does (its logger, named here so that these
    loads run the same on a version without that module, as a regression test's do)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if every is not None:
            logging.getLogger("yomiage.progress").debug("a step of a long load")
        time.sleep(every or 0.2)
    return NoVoices()


def measuring() -> NoVoices:
    """A load that measures the tiny decoder in a measuring process, again and again."""
    from yomiage.runtime.plan.measure import _child

    args = {"what": "decoder", "engine": "onnxruntime", "precision": "fp32",
            "decoder": str(TINY / "decoder.onnx"), "bundle": str(TINY), "bert": str(TINY / "bert"),
            "tokenizer": None, "bert_precision": "q8", "threads": 1, "thread_choices": [1],
            "threads_length": 47, "context": 15, "compiled_dir": None,
            "lengths": [23, 31, 47, 79, 143, 271, 527]}  # fmt: skip
    while True:
        _child(args)


class LoadingService(NoVoices):
    """A service whose voices take ``source`` seconds to load, reporting a step each
    half second (the name ``"silent"``: reporting nothing)."""

    def load_voice(self, name: str, source: str, *, warm: bool = True) -> dict[str, Any]:
        long_load(float(source), None if name == "silent" else 0.5)
        return {}


def loading_service() -> LoadingService:
    return LoadingService()
