"""A service for the supervisor's tests: the tiny voice, plus one text that kills its process.

It stands for any native crash (OpenJTalk, libsndfile, ONNX Runtime): the
process gets SIGSEGV in the middle of a request, with no Python exception.
Used only by tests, through ``WorkerService(functools.partial(build, bundle))``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
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


class _LoadCrashingService(CrashingService):
    """Crashes its process natively when asked to load the voice at ``bad``."""

    bad = ""

    def load_voice(self, name: str, source: str, *, warm: bool = True) -> Any:
        if source == self.bad:
            ctypes.string_at(0)
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().load_voice(name, source, warm=warm)


def build_with_installed(bundle: str, journal: str, bad: str, good: str) -> CrashingService:
    """:func:`build`, then two "installed" voices as ``yomiage serve`` loads them: the one at
    ``bad`` kills the process as it loads, the one at ``good`` loads."""
    from yomiage.aivmx.installed import InstalledVoice
    from yomiage.cli.serve import load_installed
    from yomiage.server.engine.load_journal import LoadJournal

    tts = TTS(threads=1).load("tiny", source=Path(bundle)).prepare()
    service = _LoadCrashingService(tts)
    service.bad = bad
    installed = [
        InstalledVoice("bad", Path(bad), "0" * 32),
        InstalledVoice("good", Path(good), "1" * 32),
    ]
    load_installed(service, installed, warm=False, journal=LoadJournal(Path(journal)))
    return service


def crash_at_start(log: str) -> CrashingService:
    """Notes the start in ``log``, then dies natively before any voice loads."""
    with open(log, "a", encoding="utf-8") as f:
        f.write("started\n")
    ctypes.string_at(0)
    os.kill(os.getpid(), signal.SIGSEGV)
    raise AssertionError("unreachable")


def wait_until_restarted(worker: Any, pid: int | None, timeout: float = 120.0) -> None:
    """Until ``worker`` (a WorkerService) has a ready child other than ``pid`` (a hang
    guard, not a timing check)."""
    end = time.monotonic() + timeout
    while not (worker.available and worker.pid not in (None, pid)):
        assert time.monotonic() < end, "the worker did not restart"
        time.sleep(0.05)


class _MeasuringService(CrashingService):
    """Measures "tiny" as soon as the worker is idle, once, and takes the plan so: its card
    then says so (as a voice loaded anew by a measured plan would)."""

    idle_before_measuring_s = 0.2
    measured = False

    def measure_plans(self, stop: Any) -> list[str]:
        if self.measured:
            return []
        self.measured = True
        return ["tiny"]

    def take_measured_plans(self, names: list[str]) -> Any:
        from dataclasses import replace

        cards = dict(self.voices)
        cards["tiny"] = replace(cards["tiny"], plan="measured in the idle time")
        return cards


def build_measuring(bundle: str) -> CrashingService:
    tts = TTS(threads=1).load("tiny", source=Path(bundle)).prepare()
    return _MeasuringService(tts)
