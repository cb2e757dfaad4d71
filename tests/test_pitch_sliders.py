"""The VOICEVOX editor's pitch and intonation sliders work with the README's install
(issue 31, item 13): WORLD is a dependency of every install, and the engine manifest
advertises the sliders only where it imports."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import TEST_VOICES
from yomiage import TTS

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # tomllib is missing before 3.11
        tomllib = pytest.importorskip("tomli")
    with (ROOT / "pyproject.toml").open("rb") as f:
        project: dict[str, object] = tomllib.load(f)["project"]
    return project


def test_pyworld_is_in_the_default_install_not_only_the_pitch_extra() -> None:
    """Without [pitch], the README's install made every moved slider a 400."""
    project = _pyproject()
    base = {Requirement(r).name for r in project["dependencies"]}  # type: ignore[attr-defined]
    assert "pyworld-prebuilt" in base
    extras = project["optional-dependencies"]
    assert extras["pitch"] == []  # type: ignore[index]  # kept: old commands still work


def test_the_missing_pyworld_message_is_grammatical(monkeypatch: pytest.MonkeyPatch) -> None:
    from yomiage.errors import MissingExtraError
    from yomiage.synthesis.pitch import require_world, world_available

    monkeypatch.setitem(sys.modules, "pyworld", None)
    with pytest.raises(MissingExtraError) as raised:
        require_world()
    assert "and intonation_scale needs" not in str(raised.value)  # what it said
    assert str(raised.value).startswith("pitch_scale or intonation_scale needs the 'pyworld'")
    assert world_available() is False


pytest.importorskip("fastapi")
from tests.serving import RunningServer, audio_query, first_style, serve  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"))
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    yield tts
    tts.close()


@pytest.fixture(scope="module", params=["voicevox", "aivisspeech"])
def server(request: pytest.FixtureRequest, engine: TTS) -> Iterator[RunningServer]:
    with serve(engine, ServerConfig(warmup=False, compat=request.param)) as running:
        yield running


def _features(server: RunningServer) -> dict[str, bool]:
    with server.client() as http:
        features: dict[str, bool] = http.get("/engine_manifest").json()["supported_features"]
        return features


@pytest.mark.server
def test_moved_sliders_are_heard_where_the_manifest_offers_them(server: RunningServer) -> None:
    pytest.importorskip("pyworld")
    features = _features(server)
    assert features["adjust_pitch_scale"] and features["adjust_intonation_scale"]
    speaker = first_style(server)
    query = audio_query(server, speaker, "こんにちは。")
    with server.client() as http:
        plain = http.post("/synthesis", params={"speaker": speaker}, json=query)
        moved = {**query, "pitchScale": 0.1, "intonationScale": 1.5}  # the editor's sliders
        slid = http.post("/synthesis", params={"speaker": speaker}, json=moved)
    assert plain.status_code == 200 and slid.status_code == 200, slid.text
    assert slid.content != plain.content


@pytest.mark.server
def test_the_manifest_offers_no_pitch_slider_where_pyworld_cannot_import(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyworld", None)
    features = _features(server)
    assert features["adjust_pitch_scale"] is False
    # AivisSpeech's intonation is the style's strength, which needs no WORLD.
    aivis = server.state.config.compat == "aivisspeech"
    assert features["adjust_intonation_scale"] is aivis
