"""A voice loaded anew by this machine's measured plan (issue 48: what a server measures in
its idle time is taken without a restart): only where the plan changes how it runs, the
old voice dropped before the new one loads, and the old plan kept where the new fails."""

from __future__ import annotations

import gc
import logging
import weakref
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from yomiage import TTS
from yomiage.errors import ModelLoadError
from yomiage.runtime.onnx_backend import OnnxBackend
from yomiage.runtime.plan.value import Plan

TINY = Path(__file__).parent / "data" / "voices" / "tiny"


@pytest.fixture
def tts(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = TTS(threads=1, cache_dir=tmp_path).load("tiny", source=TINY).prepare()
    yield engine
    engine.close()


def _measured(plan: Plan) -> Plan:
    """``plan`` as a measurement would change it: other windows, another basis."""
    return replace(plan, decoder=replace(plan.decoder, window_frames=64, first_window_frames=16),
                   basis="measured on this machine")  # fmt: skip


def test_a_voice_whose_plan_changes_is_loaded_anew_by_it(
    tts: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = tts.speakers["tiny"]
    assert before.plan is not None
    measured = _measured(before.plan)
    monkeypatch.setattr(OnnxBackend, "plan", lambda self, folder: measured)
    assert tts.take_measured_plans(["tiny", "not loaded"]) == ["tiny"]
    after = tts.speakers["tiny"]
    assert after is not before and after.plan is not None
    assert after.plan.decoder.window_frames == 64 and after.plan.basis == measured.basis
    audio = after.generate("こんにちは。", noise=0.0, noise_w=0.0)
    assert np.isfinite(audio.samples).all() and len(audio.samples) > 0


def test_a_plan_that_runs_the_same_loads_nothing_and_says_its_basis(
    tts: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = tts.speakers["tiny"]
    assert before.plan is not None
    same = replace(before.plan, basis="measured on this machine")  # only the words differ
    monkeypatch.setattr(OnnxBackend, "plan", lambda self, folder: same)
    assert tts.take_measured_plans(["tiny"]) == ["tiny"]
    assert tts.speakers["tiny"] is before and before.plan == same
    assert tts.take_measured_plans(["tiny"]) == []  # nothing left to say


def test_a_voice_that_cannot_load_by_its_new_plan_loads_again_by_its_old_one(
    tts: TTS, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    before = tts.speakers["tiny"]
    assert before.plan is not None
    old = before.plan
    measured = _measured(old)
    monkeypatch.setattr(OnnxBackend, "plan", lambda self, folder: measured)

    def broken(self: OnnxBackend, folder: Path) -> object:
        raise ModelLoadError("the new plan's graph is damaged")

    monkeypatch.setattr(OnnxBackend, "load_voice", broken)
    with caplog.at_level(logging.ERROR):
        assert tts.take_measured_plans(["tiny"]) == []
    assert "loads again by the one it had" in caplog.text
    after = tts.speakers["tiny"]
    assert after.plan is not None and after.plan.decoder == old.decoder
    assert len(after.generate("こんにちは。", noise=0.0, noise_w=0.0).samples) > 0


def test_an_engine_not_prepared_takes_nothing(tmp_path: Path) -> None:
    with TTS(threads=1, cache_dir=tmp_path).load("tiny", source=TINY) as engine:
        assert engine.take_measured_plans(["tiny"]) == []


def test_the_servers_cards_say_the_plan_taken(tts: TTS, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the voice runs as it did, only its card changes: it must still be rebuilt."""
    pytest.importorskip("fastapi")
    from yomiage.server.engine.service import LocalService

    service = LocalService(tts)
    plan = tts.speakers["tiny"].plan
    assert plan is not None and "measured on this machine" not in service.voices["tiny"].plan
    same = replace(plan, basis="measured on this machine")
    monkeypatch.setattr(OnnxBackend, "plan", lambda self, folder: same)
    cards = service.take_measured_plans(["tiny"])
    assert cards is not None and "measured on this machine" in cards["tiny"].plan
    assert service.voices is cards
    assert service.take_measured_plans(["tiny"]) is None  # nothing changed since


def test_the_old_voice_is_gone_before_the_new_one_loads(
    tts: TTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two never count together against the budget: nothing (the engine, the server's
    cards) holds the old voice while the new one loads."""
    pytest.importorskip("fastapi")
    from yomiage.server.engine.service import LocalService

    service = LocalService(tts)
    old = tts.speakers["tiny"]
    assert old.plan is not None
    measured = _measured(old.plan)
    voice = weakref.ref(old._voice)
    del old
    alive_at_load: list[bool] = []
    load = OnnxBackend.load_voice

    def spy(self: OnnxBackend, folder: Path) -> object:
        gc.collect()
        alive_at_load.append(voice() is not None)
        return load(self, folder)

    monkeypatch.setattr(OnnxBackend, "plan", lambda self, folder: measured)
    monkeypatch.setattr(OnnxBackend, "load_voice", spy)
    cards = service.take_measured_plans(["tiny"])
    assert alive_at_load == [False]
    assert cards is not None and "windows 16-64" in cards["tiny"].plan
