"""The model manager's voices while serving (issue 31): a refused or failed change leaves
every voice as it was, names come from the naming rule (never install order), uuids of any
case name one voice, the command line's AIVMX voices are listed and kept, a server may
have no voice yet, and a voice unloaded under a request is a 404."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.aivm_files import AIVMX, UUID, own_voice, records, without_a_neutral_style
from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, audio_query, serve
from yomiage import TTS
from yomiage.server import ServerConfig, create_app
from yomiage.server.engine.service import LocalService
from yomiage.server.voicevox.synthesis import VoxSynthesis

pytestmark = pytest.mark.server

BERT = TEST_VOICES / "tiny" / "bert"
A = "ffffffff-0000-4000-8000-000000000001"  # two voices called まい: A sorts last,
B = "00000001-0000-4000-8000-000000000002"  # B first, and A is installed first


def _engine(tmp: Path) -> TTS:
    return TTS(threads=1, decoder_precision="fp32", cache_dir=tmp / "cache", bert_source=BERT)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    tts = _engine(tmp_path_factory.mktemp("engine"))
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    yield tts
    tts.close()


@pytest.fixture
def server(engine: TTS, tmp_path: Path) -> Iterator[RunningServer]:
    config = ServerConfig(warmup=False, models_dir=tmp_path / "models", model_api="write",
                          max_upload_bytes=16 << 20)  # fmt: skip
    with serve(engine, config) as running:
        yield running
    for name in [n for n in engine.speakers if n != "tiny"]:
        engine.unload(name)


def _upload(http: httpx.Client, data: bytes) -> httpx.Response:
    return http.post("/aivm_models/install", files={"file": ("v.aivmx", data)})


def _voices(http: httpx.Client) -> list[str]:
    return sorted(v["name"] for v in http.get("/v1/audio/voices").json()["voices"])


def _style(http: httpx.Client, uuid: str) -> int:
    info = http.get(f"/aivm_models/{uuid}").json()
    return int(info["speakers"][0]["speaker"]["styles"][0]["id"])


def _speaks(server: RunningServer, style: int) -> bool:
    query = audio_query(server, style, "こんにちは。")
    with server.client() as http:
        return http.post("/synthesis", params={"speaker": style}, json=query).status_code == 200


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _folder(server: RunningServer) -> list[str]:
    models: Path = server.state.config.models_dir
    return sorted(p.name for p in models.iterdir())


def _fail_next_load(
    monkeypatch: pytest.MonkeyPatch, server: RunningServer, error: Exception
) -> None:
    """The next voice load raises ``error`` (an unexpected type, say); later ones load."""
    service = server.state.service
    load = service.load_voice
    calls = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == 1:
            raise error
        return load(*args, **kwargs)

    monkeypatch.setattr(service, "load_voice", failing)


# -- R1: a refused re-install or update leaves the installed voice as it was ------------


def _installed_from_a_url(server: RunningServer, tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "published" / "voice.aivmx"
    source.parent.mkdir()
    shutil.copy(AIVMX, source)
    with server.client() as http:
        assert http.post("/aivm_models/install", data={"url": str(source)}).status_code == 204
    return source, server.state.config.models_dir / f"{UUID}.aivmx"


def _unchanged(server: RunningServer, installed: Path, before: dict[str, Any]) -> None:
    with server.client() as http:
        info = http.get(f"/aivm_models/{UUID}").json()
        assert info["is_loaded"] is True
        assert _voices(http) == before["voices"]
        style = _style(http, UUID)
    assert _sha(installed) == before["sha"]
    assert records(installed.parent) == before["records"]
    assert _folder(server) == before["folder"]
    assert _speaks(server, style)


def _snapshot(server: RunningServer, installed: Path) -> dict[str, Any]:
    with server.client() as http:
        voices = _voices(http)
    return {"voices": voices, "sha": _sha(installed), "records": records(installed.parent),
            "folder": _folder(server)}  # fmt: skip


def test_a_refused_reinstall_keeps_the_installed_voice(
    server: RunningServer, tmp_path: Path
) -> None:
    """Issue 31 R1: a file that reads as AIVMX but does not load (two models concatenated)
    replaced the good file, unloaded the voice, and the next start failed."""
    _, installed = _installed_from_a_url(server, tmp_path)
    before = _snapshot(server, installed)
    with server.client() as http:
        refused = _upload(http, AIVMX.read_bytes() * 2)
        assert refused.status_code == 422, refused.text
        assert "not loaded" in refused.json()["detail"]
    _unchanged(server, installed, before)


def test_a_refused_update_keeps_the_installed_voice(server: RunningServer, tmp_path: Path) -> None:
    """Issue 31 R1, through /update: the new file at the recorded source does not load."""
    source, installed = _installed_from_a_url(server, tmp_path)
    before = _snapshot(server, installed)
    source.write_bytes(AIVMX.read_bytes() * 2)
    with server.client() as http:
        refused = http.post(f"/aivm_models/{UUID}/update")
        assert refused.status_code == 422, refused.text
    _unchanged(server, installed, before)


@pytest.mark.parametrize("error", [RuntimeError("boom"), ValueError("bad"), KeyError("k")])
def test_a_reinstall_failing_with_any_error_keeps_the_installed_voice(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """Issue 31 R1: only the store's own error was rolled back; any other type of error
    while the new file loads must leave the old file, record and voice too."""
    _, installed = _installed_from_a_url(server, tmp_path)
    before = _snapshot(server, installed)
    _fail_next_load(monkeypatch, server, error)
    with server.client() as http:
        refused = _upload(http, AIVMX.read_bytes())
        assert refused.status_code == 422, refused.text
    _unchanged(server, installed, before)


# -- R2: a failed fresh install leaves nothing ------------------------------------------


def test_a_fresh_install_that_fails_its_warm_up_leaves_nothing(server: RunningServer) -> None:
    """Issue 31 R2: a warm-up OptionError (a voice without a "Neutral" style) left the
    file installed, and every later start (or worker restart) failed on it."""
    uuid = "e500e500-0000-4000-8000-000000000001"
    with server.client() as http:
        refused = _upload(http, without_a_neutral_style(uuid))
        assert 400 <= refused.status_code < 500, refused.text
        assert "Neutral" in refused.json()["detail"]
        assert http.get("/aivm_models").json() == {}
        assert _voices(http) == ["tiny"]
    assert _folder(server) == []


def test_a_fresh_install_failing_with_an_unexpected_error_leaves_nothing(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_next_load(monkeypatch, server, RuntimeError("unexpected"))
    with server.client() as http:
        assert _upload(http, AIVMX.read_bytes()).status_code == 422
        assert http.get("/aivm_models").json() == {}
        assert _voices(http) == ["tiny"]
    assert _folder(server) == []


def test_an_uninstall_failing_midway_keeps_the_voice(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file was deleted before the record was rewritten: a failure there lost it."""
    from yomiage.aivmx.store import ModelStore

    _, installed = _installed_from_a_url(server, tmp_path)
    before = _snapshot(server, installed)

    def broken(self: ModelStore, uuid: str, source: str | None) -> None:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(ModelStore, "_record", broken)
    with server.client() as http:
        assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 500
    monkeypatch.undo()
    _unchanged(server, installed, before)


# -- R3, R11: names from the naming rule ------------------------------------------------


def test_two_voices_of_one_name_are_named_by_their_uuids(server: RunningServer) -> None:
    """Issue 31 R3: run-time names followed the install order (まい, まい-00000001), the
    start-up scan the uuid order (まい was the other voice), so a restart swapped them
    and a worker restart answered 500 on every VOICEVOX style."""
    models: Path = server.state.config.models_dir
    with server.client() as http:
        assert _upload(http, own_voice(A, "まい")).status_code == 204
        assert _voices(http) == ["tiny", "まい"]
        assert _upload(http, own_voice(B, "まい")).status_code == 204
        # A name two voices share means neither: both carry their uuid's start.
        assert _voices(http) == ["tiny", "まい-00000001", "まい-ffffffff"]
        from yomiage.aivmx.installed import installed_voices

        restart = sorted(v.name for v in installed_voices(models, ["tiny"]))
        assert _voices(http) == sorted(["tiny", *restart])
        assert http.get("/speakers").status_code == 200
        assert _speaks(server, _style(http, A)) and _speaks(server, _style(http, B))
        # Uninstalling one gives the other its name back, as a restart would.
        assert http.delete(f"/aivm_models/{B}/uninstall").status_code == 204
        assert _voices(http) == ["tiny", "まい"]
        assert [v.name for v in installed_voices(models, ["tiny"])] == ["まい"]


def test_names_sharing_a_uuid_start_never_collide(server: RunningServer) -> None:
    """Issue 31 R11: two voices named like a third, with uuids sharing their first 8
    digits, got one name: a 500, the file left installed, voices dropped at start."""
    first = "00000000-0000-4000-8000-00000000000a"
    second = "00000000-0000-4000-8000-00000000000b"
    with server.client() as http:
        assert _upload(http, AIVMX.read_bytes()).status_code == 204
        assert _upload(http, own_voice(first, "sbv2_tiny")).status_code == 204
        answer = _upload(http, own_voice(second, "sbv2_tiny"))
        assert answer.status_code == 204, answer.text
        names = _voices(http)
        assert len(names) == 4 and len(set(names)) == 4
        assert f"sbv2_tiny-{first}" in names and f"sbv2_tiny-{second}" in names
        models = http.get("/aivm_models").json()
        assert all(m["is_loaded"] for m in models.values()) and len(models) == 3


def test_an_installed_voice_s_name_drops_bidi_and_escape_sequences(server: RunningServer) -> None:
    """Issue 31 R20: a manifest name's U+202E and ESC sequences reached /v1/audio/voices."""
    with server.client() as http:
        assert _upload(http, own_voice(A, "\x1b[31m\u202eまい\u200f")).status_code == 204
        assert _voices(http) == ["tiny", "まい"]


def test_a_renaming_install_keeps_a_default_voice_s_name(engine: TTS, tmp_path: Path) -> None:
    """An install that would take the name of the --default-voice away is refused."""
    models = tmp_path / "models"
    models.mkdir()
    (models / f"{A}.aivmx").write_bytes(own_voice(A, "まい"))
    tts = _engine(tmp_path)
    tts.load("まい", source=models / f"{A}.aivmx").prepare()
    service = LocalService(tts, {"まい": str(models / f"{A}.aivmx")})
    config = ServerConfig(warmup=False, models_dir=models, model_api="write", default_voice="まい")
    with tts, serve(service, config) as running, running.client() as http:
        refused = _upload(http, own_voice(B, "まい"))
        assert refused.status_code == 409 and "--default-voice" in refused.json()["detail"]
        assert _voices(http) == ["まい"]
        assert sorted(p.name for p in models.iterdir()) == [f"{A}.aivmx"]


# -- R5: a uuid in any case ---------------------------------------------------------------


def test_upper_case_uuids_name_the_same_voice(server: RunningServer) -> None:
    """Issue 31 R5: an upper-case uuid missed the loaded voice: /unload silently did
    nothing, and /uninstall passed the guards of a default voice (serve_test covers that)."""
    upper = UUID.upper()
    models: Path = server.state.config.models_dir
    with server.client() as http:
        assert _upload(http, AIVMX.read_bytes()).status_code == 204
        assert http.get(f"/aivm_models/{upper}").json() == http.get(f"/aivm_models/{UUID}").json()
        assert http.post(f"/aivm_models/{upper}/unload").status_code == 204
        assert http.get(f"/aivm_models/{UUID}").json()["is_loaded"] is False
        assert _voices(http) == ["tiny"]
        assert http.post(f"/aivm_models/{upper}/load").status_code == 204
        assert http.get(f"/aivm_models/{UUID}").json()["is_loaded"] is True
        no_source = http.post(f"/aivm_models/{upper}/update")
        assert no_source.status_code == 422 and "uploaded" in no_source.json()["detail"]
        assert http.delete(f"/aivm_models/{upper}/uninstall").status_code == 204
        assert _voices(http) == ["tiny"] and http.get("/aivm_models").json() == {}
    assert not (models / f"{UUID}.aivmx").exists()


# -- item 6: the command line's AIVMX voices ---------------------------------------------


def test_command_line_aivmx_voices_are_listed_and_never_removed(tmp_path: Path) -> None:
    """Newcomer friction 3: a --model AIVMX voice was missing from /aivm_models, and
    uninstalling an installed copy of it took it off /speakers."""
    tts = _engine(tmp_path)
    tts.load("tiny", source=TEST_VOICES / "tiny").load("mine", source=AIVMX).prepare()
    config = ServerConfig(warmup=False, models_dir=tmp_path / "models", model_api="write")
    other = "0b8ac1c2-0000-4000-8000-0000000000bb"
    with tts, serve(tts, config) as running, running.client() as http:
        listed = http.get("/aivm_models").json()
        assert list(listed) == [UUID]  # the bundle "tiny" has no AIVM manifest: not listed
        assert listed[UUID]["is_loaded"] is True and listed[UUID]["manifest"]["uuid"] == UUID
        assert http.get(f"/aivm_models/{UUID}").json() == listed[UUID]
        for method, path in (("DELETE", "uninstall"), ("POST", "unload"), ("POST", "update")):
            refused = http.request(method, f"/aivm_models/{UUID}/{path}")
            assert refused.status_code == 400 and "--model" in refused.json()["detail"]
        speakers = http.get("/speakers").json()
        style = _style(http, UUID)
        # A copy of it installed: kept in the folder, the command line's voice serves it.
        assert _upload(http, AIVMX.read_bytes()).status_code == 204
        assert http.get("/speakers").json() == speakers
        assert _upload(http, own_voice(other, "other")).status_code == 204
        assert http.get(f"/aivm_models/{UUID}").json()["is_loaded"] is True
        assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 204
        assert "mine" in _voices(http) and _speaks(running, style)
        assert sorted(http.get("/aivm_models").json()) == sorted([UUID, other])


# -- item 3: no voice yet ---------------------------------------------------------------


def test_a_server_with_no_voice_answers_404_until_one_is_installed(tmp_path: Path) -> None:
    """Newcomer friction 2: a server of installed voices could not start with none; as
    AivisSpeech's engine, it starts empty and a voice is installed into it."""
    tts = _engine(tmp_path)
    config = ServerConfig(warmup=False, models_dir=tmp_path / "models", model_api="write")
    with tts, serve(LocalService(tts), config) as running, running.client() as http:
        assert running.state.default_voice is None
        assert http.get("/speakers").json() == []
        assert http.get("/engine_manifest").status_code == 200
        for answer in (http.post("/tts", json={"text": "こんにちは。"}),
                       http.post("/v1/audio/speech", json={"model": "tts-1", "voice": "alloy",
                                                           "input": "こんにちは。"})):  # fmt: skip
            assert answer.status_code == 404 and "install one" in answer.text
        assert _upload(http, AIVMX.read_bytes()).status_code == 204
        assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
        assert http.post(f"/aivm_models/{UUID}/unload").status_code == 204  # the last one
        assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 404
    with pytest.raises(ValueError, match="no voices"):
        create_app(LocalService(_engine(tmp_path)), ServerConfig(warmup=False))


# -- R10: a voice unloaded under a request ------------------------------------------------


def test_a_voice_unloaded_after_its_lookup_is_a_404(
    engine: TTS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 R10: a request past the style lookup when its voice was unloaded got a
    KeyError's 500. The unload is put exactly there, not raced for."""
    lookup = VoxSynthesis.style_of
    unloading: list[Any] = []

    def then_unloaded(self: VoxSynthesis, request: Any) -> Any:
        found = lookup(self, request)
        if unloading:
            self.state.service.unload_voice(found.voice)
        return found

    monkeypatch.setattr(VoxSynthesis, "style_of", then_unloaded)  # before the routes bind it
    config = ServerConfig(warmup=False, models_dir=tmp_path / "models", model_api="write")
    try:
        with serve(engine, config) as server, server.client() as http:
            assert _upload(http, AIVMX.read_bytes()).status_code == 204
            style = _style(http, UUID)
            query = audio_query(server, style, "こんにちは。")
            unloading.append(True)
            for path, body in (("/audio_query", None), ("/synthesis", query),
                               ("/streaming_synthesis", query)):  # fmt: skip
                assert http.post(f"/aivm_models/{UUID}/load").status_code == 204
                params = {"speaker": style, "text": "こんにちは。"}
                answer = http.post(path, params=params, json=body)
                assert answer.status_code == 404, (path, answer.text)
                assert "sbv2_tiny" in answer.json()["detail"]
            # The OpenAI and native routes: unloaded right after the name was resolved.
            from yomiage.server import speech_routes

            resolve = speech_routes._voice_name

            def resolved_then_unloaded(state: Any, voice: Any, *, openai: bool) -> str:
                name = resolve(state, voice, openai=openai)
                state.service.unload_voice(name)
                return name

            monkeypatch.setattr(speech_routes, "_voice_name", resolved_then_unloaded)
            for path, body in (("/tts", {"text": "こんにちは。", "voice": "sbv2_tiny"}),
                               ("/v1/audio/speech", {"model": "tts-1", "voice": "sbv2_tiny",
                                                     "input": "こんにちは。"})):  # fmt: skip
                assert http.post(f"/aivm_models/{UUID}/load").status_code == 204
                answer = http.post(path, json=body)
                assert answer.status_code == 404 and "sbv2_tiny" in answer.text, answer.text
    finally:
        for name in [n for n in engine.speakers if n != "tiny"]:
            engine.unload(name)
