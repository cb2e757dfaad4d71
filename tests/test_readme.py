"""The README's examples run as written (paths under /tmp moved to a temp folder)."""

from __future__ import annotations

import re
import shlex
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


def test_frontend_example_shows_the_reading_not_the_normalized_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 49 (5): the example printed ``.text`` (the normalized text) as if it were the
    reading; every comment in the block must now say what its line really prints."""
    [frontend_block] = [b for b in _blocks("python") if "Frontend()" in b and "backend" not in b]
    exec(compile(frontend_block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    commented = [line.split("# ", 1)[1] for line in frontend_block.splitlines() if "print(" in line]
    assert printed[0] == "デンワバンゴーワゼロサン,イチニーサンヨン,ゴーロクナナハチデス."
    assert commented[0].endswith(printed[0])
    assert printed[1].startswith("[('電話番号', 'デンワバンゴー'), ('は', 'ワ')")
    assert commented[2].endswith(printed[2]) and "not a reading" in commented[2]


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


ROOT = README.parent


def _first_setup_command() -> str:
    [setup] = [b for b in _blocks("sh") if "pip install -e" in b]
    return setup.splitlines()[0]


def test_first_setup_command_speaks_as_ci_runs_it() -> None:
    """Issue 22 (9): the first command ended by printing phonemes, not by speaking."""
    last = _first_setup_command().split(" && ")[-1]
    assert last.startswith(".venv/bin/yomiage generate ") and "tests/data/voices/tiny" in last
    assert last in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()


def test_the_readme_links_nothing_a_clone_lacks() -> None:
    assert "../shared" not in README.read_text("utf-8").split("## Set-up for development")[0]
    assert "DESIGN.md" not in README.read_text("utf-8")


def test_speak_with_the_user_install(tmp_path: Path) -> None:
    """Issue 22 (9): the README's Speak section needed torch; its first commands use the
    committed voices, which run without it (subprocesses that block torch's import)."""
    [speak] = [b for b in _blocks("sh") if "tests/data/aivmx/tiny.aivmx" in b]
    no_torch = "import sys; sys.modules['torch'] = None; from yomiage.cli import main; "
    for number, line in enumerate(speak.splitlines()):
        args = shlex.split(line.split("#")[0])[1:]
        out = tmp_path / f"{number}.wav"
        args[args.index("-o") + 1] = str(out)
        code = no_torch + f"sys.exit(main({args!r} + ['--cache-dir', {str(tmp_path)!r}]))"
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
        assert out.stat().st_size > 44
