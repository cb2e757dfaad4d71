"""A refused install names the file, never the server's folders (issue 49, item 14)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

pytest.importorskip("fastapi")

from tests.aivm_files import AIVMX, UUID
from tests.conftest import TEST_VOICES
from tests.serving import serve
from yomiage import TTS
from yomiage.server import ServerConfig
from yomiage.server.engine.service import LocalService
from yomiage.server.voicevox.hidden_paths import without_paths

pytestmark = pytest.mark.server


def _not_an_sbv2_graph() -> bytes:
    """The tiny voice with its audio output renamed: the loader refuses the graph."""
    model = onnx.load(str(AIVMX))
    model.graph.output[0].name = "renamed"
    return bytes(model.SerializeToString())


def test_a_refused_install_names_the_file_not_the_models_folder(tmp_path: Path) -> None:
    """The 422 said "the voice was not loaded: /srv/…/models/13eb270c-….aivmx: the graph
    is not an SBV2 JP-Extra export" (docs/voicevox.md: never the server's paths)."""
    models = tmp_path / "models"
    bert = TEST_VOICES / "tiny" / "bert"
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path / "cache", bert_source=bert)
    config = ServerConfig(warmup=False, models_dir=models, model_api="write")
    with tts, serve(LocalService(tts), config) as running, running.client() as http:
        refused = http.post(
            "/aivm_models/install", files={"file": ("v.aivmx", _not_an_sbv2_graph())}
        )
    detail = refused.json()["detail"]
    assert refused.status_code == 422 and "not an SBV2 JP-Extra export" in detail, detail
    assert f"{UUID}.aivmx" in detail and str(tmp_path) not in detail and "/" not in detail


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("cannot delete /srv/models/a.aivmx: denied", "cannot delete a.aivmx: denied"),
        ("(/home/me/.cache/yomiage/x/decoder.onnx)", "(decoder.onnx)"),
        ("in C:\\Users\\me\\models\\a.aivmx: bad", "in a.aivmx: bad"),
        (
            "fetching http://127.0.0.1:8/a/b.aivmx failed",
            "fetching http://127.0.0.1:8/a/b.aivmx failed",
        ),
        ("speed 1/2 and a/b stay", "speed 1/2 and a/b stay"),
    ],
)
def test_messages_keep_file_names_and_urls_only(message: str, shown: str) -> None:
    assert without_paths(message) == shown
