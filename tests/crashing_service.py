"""A service for the supervisor's tests: the tiny voice, plus one text that kills its process.

It stands for any native crash (OpenJTalk, libsndfile, ONNX Runtime): the
process gets SIGSEGV in the middle of a request, with no Python exception.
Used only by tests, through ``WorkerService(functools.partial(build, bundle))``.
"""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path
from typing import Any

from yomiage import TTS
from yomiage.server.engine.service import EngineRequest, LocalChunkSource, LocalService

CRASH = "ここで落ちる。"
SLOW = "ゆっくり。"  # a first chunk that waits until it is cancelled


class _CrashingSource(LocalChunkSource):
    def next(self) -> Any:
        if self.request.text == CRASH:
            ctypes.string_at(0)  # a real SIGSEGV: reads address 0
            os.kill(os.getpid(), signal.SIGSEGV)  # in case the read did not fault
        if self.request.text == SLOW:  # stands for a step stuck in native code
            self._cancel.wait()
            return None
        return super().next()


class CrashingService(LocalService):
    def open(self, request: EngineRequest) -> LocalChunkSource:
        return _CrashingSource(self.tts, request)


def build(bundle: str) -> CrashingService:
    tts = TTS(threads=1).load("tiny", source=Path(bundle)).prepare()
    return CrashingService(tts)


def build_warm(bundle: str) -> CrashingService:
    """:func:`build`, warmed in the worker before it is ready (so a first request is quick)."""
    service = build(bundle)
    for voice in service.voices:
        service.warm(voice)
    return service
