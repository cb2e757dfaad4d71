"""The bounds of /aivm_models installs over HTTP (issue 31): a slow source or client holds
no lock and no partial file past its time, what cannot be listed is neither installed nor
stuck, and errors name what the client sent, never the server's partial file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.aivm_files import AIVMX, UUID
from tests.conftest import TEST_VOICES
from tests.serving import RunningServer, serve
from yomiage import TTS
from yomiage.server import ServerConfig

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TTS]:
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path_factory.mktemp("cache"),
              bert_source=TEST_VOICES / "tiny" / "bert")  # fmt: skip
    tts.load("tiny", source=TEST_VOICES / "tiny").prepare()
    yield tts
    tts.close()


def _config(tmp_path: Path, **overrides: object) -> ServerConfig:
    fields: dict[str, object] = {"warmup": False, "models_dir": tmp_path / "models",
                                 "model_api": "write", "max_upload_bytes": 8 << 20}  # fmt: skip
    return ServerConfig(**{**fields, **overrides})  # type: ignore[arg-type]


@pytest.fixture
def server(engine: TTS, tmp_path: Path) -> Iterator[RunningServer]:
    with serve(engine, _config(tmp_path)) as running:
        yield running
    for name in [n for n in engine.speakers if n != "tiny"]:
        engine.unload(name)


def _upload(http: httpx.Client, data: bytes, name: str = "voice.aivmx") -> httpx.Response:
    return http.post(
        "/aivm_models/install", files={"file": (name, data, "application/octet-stream")}
    )


def _files(server: RunningServer) -> list[str]:
    folder: Path = server.state.config.models_dir
    return sorted(p.name for p in folder.iterdir() if p.suffix != ".json")


def test_an_unreadable_file_named_by_a_uuid_is_uninstalled(server: RunningServer) -> None:
    """R12: a file the listing cannot read was a 404 to uninstall, so it stayed for ever."""
    folder: Path = server.state.config.models_dir
    (folder / f"{UUID}.aivmx").write_bytes(b"\xff" * 1000)
    with server.client() as http:
        assert http.get("/aivm_models").json() == {}
        assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 204
        assert http.delete(f"/aivm_models/{UUID}/uninstall").status_code == 404
    assert _files(server) == []
    assert AIVMX.exists()
