"""The README's examples run as written (paths under /tmp moved to a temp folder)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text("utf-8"), flags=re.S)


def test_frontend_example() -> None:
    [frontend_block] = [b for b in _blocks("python") if "Frontend()" in b and "backend" not in b]
    namespace: dict[str, object] = {}
    exec(compile(frontend_block, "README.md", "exec"), namespace)
    assert namespace["phonemes"].text.startswith("電話番号はゼロサン")  # type: ignore[attr-defined]


def test_model_examples(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    [shell] = [b for b in _blocks("sh") if "yomiage convert" in b]
    for line in shell.splitlines():
        command = line.split("#")[0].strip().replace("/tmp/", f"{tmp_path}/")
        if command:
            args = command.split()[1:]
            subprocess.run(
                [sys.executable, "-m", "yomiage", *args], check=True, capture_output=True
            )
    [python] = [b for b in _blocks("python") if "/tmp/bundle" in b]
    code = python.replace("/tmp/", f"{tmp_path}/").replace("    ...", "    chunks.append(chunk)")
    namespace: dict[str, object] = {"chunks": []}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["chunks"]
    assert (tmp_path / "hello.wav").stat().st_size > 44100
