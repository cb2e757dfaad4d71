"""Voices loaded and unloaded while an engine serves: the engine, the in-process service
and the supervised worker (a restarted worker keeps the changes)."""

from __future__ import annotations

import functools
import gc
import os
import shutil
import signal
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import crashing_service
from tests.conftest import TEST_VOICES
from yomiage import TTS, VoiceNotLoadedError
from yomiage.errors import ModelLoadError, NotPreparedError
from yomiage.options import SynthesisOptions
from yomiage.runtime.onnx_backend import OnnxBackend

pytest.importorskip("fastapi")

from yomiage.server.engine.service import EngineRequest, LocalService
from yomiage.server.engine.worker import WorkerCrashed, WorkerService
from yomiage.server.engine.worker_voices import VoiceChanges

AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
TEXT = "今日はいい天気ですね。明日も晴れるでしょう。"


@pytest.fixture
def tts(test_voice: Path) -> Iterator[TTS]:
    """Two voices of the test voice, "a" and "b"; a fresh engine per test (they change it)."""
    engine = TTS(threads=1).load("a", source=test_voice).load("b", source=test_voice)
    yield engine.prepare()
    engine.close()


@pytest.fixture
def held_load(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Voice loads that wait, once begun, until the test lets them go:
    (begun, go); every load still runs when ``go`` is set."""
    begun, go = threading.Event(), threading.Event()
    load = OnnxBackend.load_voice

    def held(self: OnnxBackend, folder: Path | str) -> Any:
        begun.set()
        go.wait()
        return load(self, folder)

    monkeypatch.setattr(OnnxBackend, "load_voice", held)
    yield begun, go
    go.set()


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


# -- the engine -------------------------------------------------------------------------


def test_unload_keeps_the_other_voices(tts: TTS) -> None:
    tts.unload("a")
    assert list(tts.speakers) == ["b"]
    assert len(tts.speakers["b"].generate("こんにちは。", seed=0).samples) > 0
    with pytest.raises(VoiceNotLoadedError, match="'a'") as error:
        tts.unload("a")
    assert isinstance(error.value, LookupError)
    with pytest.raises(VoiceNotLoadedError, match="nobody"):
        tts.unload("nobody")
    tts.load("a", source=TEST_VOICES / "tiny").prepare()  # back again
    assert sorted(tts.speakers) == ["a", "b"]


def test_a_declared_voice_unloads_and_a_closed_engine_refuses(test_voice: Path) -> None:
    engine = TTS(threads=1).load("a", source=test_voice)
    engine.unload("a")  # only declared: nothing to load any more
    assert dict(engine.speakers) == {}  # nothing declared is missing
    engine.close()
    with pytest.raises(NotPreparedError, match="closed"):
        engine.speakers  # noqa: B018
    with pytest.raises(NotPreparedError, match="closed"):
        engine.unload("a")


def test_a_voice_loads_while_a_stream_on_another_runs(
    tts: TTS, held_load: tuple[threading.Event, threading.Event]
) -> None:
    """prepare() held the lock speakers takes for the whole load, and speakers failed
    while any declared voice was not loaded: a load stopped and then failed every request."""
    begun, go = held_load
    expected = [c.samples for c in tts.speakers["a"].stream(TEXT, seed=1)]
    stream = tts.speakers["a"].stream(TEXT, seed=1)
    first = next(stream)
    loader, errors = _in_thread(lambda: tts.load("c", source=str(AIVMX)).prepare())
    begun.wait()
    assert sorted(tts.speakers) == ["a", "b"]  # neither blocked nor failing; "c" not yet
    rest = [c.samples for c in stream]  # the stream goes on while "c" loads
    assert len(tts.speakers["b"].generate("こんにちは。", seed=0).samples) > 0
    go.set()
    loader.join()
    assert not errors
    assert sorted(tts.speakers) == ["a", "b", "c"]
    for got, want in zip([first.samples, *rest], expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert tts.speakers["c"].styles == ("ノーマル", "Happy", "Sad")


def test_an_unload_during_its_load_leaves_nothing(
    tts: TTS, held_load: tuple[threading.Event, threading.Event]
) -> None:
    begun, go = held_load
    loader, errors = _in_thread(lambda: tts.load("c", source=TEST_VOICES / "tiny").prepare())
    begun.wait()
    tts.unload("c")  # declared, loading: dropped at once
    go.set()
    loader.join()
    assert not errors
    assert sorted(tts.speakers) == ["a", "b"]
    with pytest.raises(VoiceNotLoadedError):
        tts.unload("c")
    assert sorted(tts.load("c", source=TEST_VOICES / "tiny").prepare().speakers) == ["a", "b", "c"]


def test_a_stream_on_an_unloaded_voice_finishes_then_frees_it(tts: TTS) -> None:
    speaker = tts.speakers["a"]
    freed = weakref.ref(speaker._voice)  # its graphs: what a stream holds, the memory
    expected = [c.samples for c in tts.speakers["b"].stream(TEXT, seed=2)]
    stream = speaker.stream(TEXT, seed=2)
    got = [next(stream).samples]
    del speaker
    tts.unload("a")
    assert list(tts.speakers) == ["b"]
    gc.collect()
    assert freed() is not None  # the running stream holds the voice
    got += [c.samples for c in stream]  # and finishes
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    del stream
    gc.collect()
    assert freed() is None


# -- the in-process service -------------------------------------------------------------


def test_local_service_loads_and_unloads(tts: TTS, tmp_path: Path) -> None:
    service = LocalService(tts)
    before = service.voices
    assert sorted(before) == ["a", "b"] and service.voices is before
    voices = service.load_voice("c", str(AIVMX))
    assert sorted(voices) == ["a", "b", "c"] and service.voices is voices
    assert voices is not before and voices["c"].styles == ("ノーマル", "Happy", "Sad")
    assert service.load_voice("c", str(AIVMX)) is voices  # the same source: nothing to do
    with pytest.raises(ValueError, match="already loaded"):
        service.load_voice("c", str(TEST_VOICES / "tiny"))
    with pytest.raises(ModelLoadError):
        service.load_voice("d", str(tmp_path / "missing"))
    assert service.voices is voices
    assert sorted(service.load_voice("e", str(TEST_VOICES / "tiny"), warm=False)) == [
        "a", "b", "c", "e"
    ]  # fmt: skip  # the failed "d" was not left declared to fail this load
    after = service.unload_voice("a")
    assert sorted(after) == ["b", "c", "e"] and service.voices is after
    with pytest.raises(VoiceNotLoadedError):
        service.unload_voice("a")
    with pytest.raises(VoiceNotLoadedError):
        service.warm("a")
    service.warm("c")


def test_local_stream_on_an_unloaded_voice_finishes(tts: TTS) -> None:
    service = LocalService(tts)
    source = service.open(EngineRequest("a", TEXT, SynthesisOptions(seed=3)))
    first = source.next()
    assert first is not None
    freed = weakref.ref(tts.speakers["a"])
    service.unload_voice("a")
    rest = []
    while (chunk := source.next()) is not None:
        rest.append(chunk)
    assert rest and "a" not in service.voices
    source.close()
    del source
    gc.collect()
    assert freed() is None


# -- the record a restarted worker replays ----------------------------------------------


def test_voice_changes_replay_their_net_effect() -> None:
    changes = VoiceChanges()
    assert not changes
    changes.unloaded("start")  # a voice the worker started with
    changes.loaded("x", "src1", True)
    changes.unloaded("x")
    changes.loaded("x", "src2", False)
    changes.loaded("y", "src3", True)
    changes.unloaded("y")
    calls: list[tuple[Any, ...]] = []

    def change(*call: Any) -> Any:
        calls.append(call)
        if call == ("unload_voice", "y"):
            raise VoiceNotLoadedError("y")
        return {"x": call}

    replayed: Any = changes.replay(change)
    assert replayed == {"x": ("load_voice", "x", "src2", False)}  # the last change's answer
    assert calls == [
        ("unload_voice", "start"),
        ("unload_voice", "x"),
        ("unload_voice", "y"),
        ("load_voice", "x", "src2", False),
    ]
    calls.clear()
    changes.replay(change)  # the unload of a voice no worker has is dropped
    assert ("unload_voice", "y") not in calls


def test_a_change_that_kills_the_worker_is_dropped() -> None:
    changes = VoiceChanges()
    changes.loaded("bad", "src", True)
    changes.loaded("good", "src", True)

    def change(*call: Any) -> Any:
        if call[1] == "bad":
            raise WorkerCrashed("died")
        if call[1] == "good":
            raise ModelLoadError("gone")
        return {}

    with pytest.raises(WorkerCrashed):
        changes.replay(change)
    assert changes  # "good" is still to replay
    assert changes.replay(change) is None  # it fails now: logged and dropped
    assert not changes


# -- the supervised worker --------------------------------------------------------------


@pytest.mark.server
def test_worker_loads_and_unloads_and_a_restart_keeps_them(
    test_voice: Path, tmp_path: Path
) -> None:
    doomed = tmp_path / "doomed"
    shutil.copytree(test_voice, doomed)
    worker = WorkerService(functools.partial(crashing_service.build, str(test_voice)))
    try:
        start = worker.voices
        assert list(start) == ["tiny"]
        loaded = worker.load_voice("second", str(AIVMX))
        assert sorted(loaded) == ["second", "tiny"] and worker.voices is loaded
        assert loaded["second"].styles == ("ノーマル", "Happy", "Sad")
        assert worker.read("second", "こんにちは。", SynthesisOptions())
        assert worker.load_voice("second", str(AIVMX)) == loaded  # no-op
        with pytest.raises(ModelLoadError):
            worker.load_voice("missing", str(tmp_path / "missing"))
        worker.load_voice("doomed", str(doomed), warm=False)
        assert sorted(worker.unload_voice("tiny")) == ["doomed", "second"]
        with pytest.raises(VoiceNotLoadedError):
            worker.unload_voice("tiny")
        with pytest.raises(VoiceNotLoadedError):
            worker.read("tiny", "こんにちは。", SynthesisOptions())
        shutil.rmtree(doomed)  # its load fails on the restart: dropped, not fatal

        pid, restarts = worker.pid, worker.restarts
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        crashing_service.wait_until_restarted(worker, pid)
        assert worker.restarts == restarts + 1
        assert sorted(worker.voices) == ["second"]  # "tiny" stays unloaded, "second" is back
        assert worker.read("second", "こんにちは。", SynthesisOptions())
        with pytest.raises(VoiceNotLoadedError):
            worker.read("tiny", "こんにちは。", SynthesisOptions())

        assert sorted(worker.load_voice("tiny", str(test_voice))) == ["second", "tiny"]
        pid = worker.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        crashing_service.wait_until_restarted(worker, pid)
        assert sorted(worker.voices) == ["second", "tiny"]
    finally:
        worker.close()
