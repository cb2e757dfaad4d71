"""The engines' telemetry stays off (issue 22 item 8): ONNX Runtime 1.32 wrote a device id
and an event store under ``~/.cache/Microsoft``, OpenVINO a client id and usage counts
under ``~/intel``, on every run. Each check runs in a fresh process, since the engines
decide once per process, when first imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import TEST_VOICES

SYNTHESIS = """
import os, sys
from yomiage import TTS
voice, precision = sys.argv[1:3]
tts = TTS(threads=1, decoder_precision=precision, bert_source=voice + "/bert")
with tts.load("tiny", source=voice).prepare():
    audio = tts.speakers["tiny"].generate("今日はいい天気ですね。", seed=0)
    assert len(audio.samples) > 1000
# Nothing outlives the engines' start: no variable left set, their modules importable.
assert "ORT_DISABLE_TELEMETRY" not in os.environ, "left in the environment"
assert sys.modules.get("openvino_telemetry", 0) is not None, "left unimportable"
"""


def _run(code: str, home: Path, tmp_path: Path, *args: str) -> str:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("ORT_", "CI", "XDG_"))}
    env = {**keep, "HOME": str(home), "YOMIAGE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_a_synthesis_writes_nothing_into_home(tmp_path: Path) -> None:
    """Both engines run (OpenVINO where installed: bf16 forced, the tiny voice's default
    being ONNX Runtime) and the empty HOME stays empty."""
    home = tmp_path / "home"
    home.mkdir()
    try:
        import openvino  # noqa: F401

        precision = "bf16"
    except ImportError:
        precision = "auto"
    _run(SYNTHESIS, home, tmp_path, str(TEST_VOICES / "tiny"), precision)
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []


def test_an_aivmx_file_cut_on_first_load_writes_nothing_into_home(tmp_path: Path) -> None:
    """Cutting an AIVMX file runs ONNX Runtime (optimizing, checking) before any session."""
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "import sys\nfrom yomiage.aivmx import read_aivmx\n"
        "from yomiage.aivmx.bundle import write_bundle\n"
        "write_bundle(read_aivmx(sys.argv[1]), __import__('pathlib').Path(sys.argv[2]))\n"
    )
    aivmx = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
    _run(code, home, tmp_path, str(aivmx), str(tmp_path / "bundle"))
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
