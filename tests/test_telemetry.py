"""The engines' telemetry stays off (issue 22 item 8): ONNX Runtime 1.32 wrote a device id
and an event store under ``~/.cache/Microsoft``, OpenVINO a client id and usage counts
under ``~/intel``, on every run. Each check runs in a fresh process, since the engines
decide once per process, when first imported."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    precision = "bf16" if importlib.util.find_spec("openvino") is not None else "auto"
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


ENGINES = ("onnxruntime", "openvino")
SOURCE = Path(__file__).resolve().parents[1] / "src" / "yomiage"


def _unguarded(tree: ast.AST) -> list[int]:
    """Lines that import an engine, or run torch.onnx's exporter (which imports ONNX Runtime
    itself), outside a ``with engines_without_telemetry():`` block."""
    found: list[int] = []

    def guarded(node: ast.With) -> bool:
        return any(
            isinstance(item.context_expr, ast.Call)
            and getattr(item.context_expr.func, "id", getattr(item.context_expr.func, "attr", ""))
            == "engines_without_telemetry"
            for item in node.items
        )

    def visit(node: ast.AST, inside: bool) -> None:
        if isinstance(node, ast.With) and guarded(node):
            inside = True
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.onnx.export":
            names = ["onnxruntime"]
        if not inside and any(n.split(".")[0] in ENGINES for n in names):
            found.append(getattr(node, "lineno", 0))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return found


def test_every_engine_import_in_the_package_starts_it_without_telemetry() -> None:
    """Issue 31, 16: ``yomiage convert`` (and first-use SBV2 conversions) imported ONNX
    Runtime in ``export/`` with its telemetry on; ``convert`` without torch did too,
    before failing. Every import of an engine, and every torch.onnx export, is guarded."""
    unguarded = [
        f"{path.relative_to(SOURCE)}:{line}"
        for path in sorted(SOURCE.rglob("*.py"))
        for line in _unguarded(ast.parse(path.read_text("utf-8")))
    ]
    assert unguarded == []


def _yomiage(
    home: Path, tmp_path: Path, *args: str, code: str = ""
) -> subprocess.CompletedProcess[str]:
    """``yomiage ARGS`` in a fresh process with HOME at ``home`` (``code`` runs first)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("ORT_", "CI", "XDG_"))}
    env = {**keep, "HOME": str(home), "YOMIAGE_CACHE": str(tmp_path / "cache")}
    program = f"import sys\n{code}\nfrom yomiage.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip


NO_TORCH = "sys.modules['torch'] = None  # as in an install without yomiage[torch]"


def test_convert_without_torch_writes_nothing_into_home(tmp_path: Path) -> None:
    """Issue 31, 16: ``yomiage convert <SBV2 folder>`` in the user install (no torch)
    imported ONNX Runtime with its telemetry on, then failed on ``import torch``."""
    home = tmp_path / "home"
    home.mkdir()
    voice = tmp_path / "voice"
    voice.mkdir()
    (voice / "config.json").write_text("{}", "utf-8")
    proc = _yomiage(home, tmp_path, "convert", str(voice), str(tmp_path / "out"), code=NO_TORCH)
    assert proc.returncode == 1 and "torch" in proc.stderr, proc.stderr
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []


@pytest.mark.slow
def test_converting_an_sbv2_voice_writes_nothing_into_home(tmp_path: Path) -> None:
    """Issue 31, 16: ``yomiage convert`` (torch.onnx export, quantization, parity check on
    ONNX Runtime) and the first use of an SBV2 folder by ``generate`` (converted into the
    cache) each left ONNX Runtime's device id and events under ``~/.cache/Microsoft``."""
    pytest.importorskip("torch", reason="converting an SBV2 voice needs yomiage[torch]")
    pytest.importorskip("onnxscript", reason="exporting the BERT needs yomiage[torch]")
    home = tmp_path / "home"
    home.mkdir()
    voice, bert = tmp_path / "voice", tmp_path / "bert"
    for made in (
        _yomiage(home, tmp_path, "dev", "make-voice", str(voice), "--size", "tiny"),
        _yomiage(home, tmp_path, "dev", "make-bert", str(bert), "--size", "tiny"),
        _yomiage(home, tmp_path, "convert", str(voice), str(tmp_path / "bundle"), "--bert",
                 str(bert), "--quantize", "q8"),
        _yomiage(home, tmp_path, "generate", "テストです。", "--model", str(voice), "--bert",
                 str(TEST_VOICES / "tiny" / "bert"), "-o", str(tmp_path / "a.wav")),
    ):  # fmt: skip
        assert made.returncode == 0, made.stderr[-2000:]
    assert (tmp_path / "bundle" / "bert").is_dir() and (tmp_path / "a.wav").stat().st_size > 44
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
