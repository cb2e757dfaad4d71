"""The test suite writes nothing into the real ``$HOME`` (issue 31, 16).

Its first run left ONNX Runtime's device id and events under ``~/.cache/Microsoft``:
test modules import the engines themselves (``test_aivmx.py`` at collection,
``import openvino`` in a test, engines in subprocesses). And fixtures wider than one
test (a module's or the session's engine) are made before the per-test cache folder is
set, so they verified voices into the real ``~/.cache/yomiage``. The suite's conftest
covers both for the whole session; here a test module that does each runs under it
with an empty HOME and none of yomiage's variables set, as in a fresh shell.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import TEST_VOICES

ROOT = Path(__file__).resolve().parents[1]

A_TEST_MODULE = """
import importlib.util, subprocess, sys

import pytest

from yomiage import TTS


@pytest.fixture(scope="module")
def engine():
    with TTS(threads=1).load("tiny", source=VOICE) as tts:
        yield tts.prepare()


def test_imports_the_engines_itself() -> None:
    import onnxruntime  # noqa: F401

    if importlib.util.find_spec("openvino") is not None:
        import openvino  # noqa: F401
    code = "import onnxruntime, time; time.sleep(0.5)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_speaks_with_a_module_wide_engine(engine) -> None:
    assert engine.speakers["tiny"].generate("はい。", seed=0).duration > 0
"""


def test_the_test_suite_writes_nothing_into_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    module = tmp_path / "test_a_module.py"
    module.write_text(f"VOICE = {str(TEST_VOICES / 'tiny')!r}\n{A_TEST_MODULE}", "utf-8")
    fresh = ("ORT_", "CI", "XDG_", "YOMIAGE_")
    keep = {k: v for k, v in os.environ.items() if not k.startswith(fresh)}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**keep, "HOME": str(home), "PYTHONPATH": path}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(module)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
