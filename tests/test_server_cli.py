"""``yomiage serve`` as a user starts it: a process on 127.0.0.1 that the OpenAI client talks to."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from yomiage.cli import main  # noqa: E402
from yomiage.cli_serve import _is_loopback  # noqa: E402


def test_serve_process_end_to_end(tiny_bundle: Path) -> None:
    env = {**os.environ, "YOMIAGE_API_KEY": "k-123"}
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={tiny_bundle}",
               "--port", "0", "--threads", "1", "--voice-alias", "alloy=tiny"]  # fmt: skip
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
        assert found, line
        url = found.group(1)
        end = time.monotonic() + 60
        while httpx.get(f"{url}/ready").status_code != 200:  # after the warm-up
            assert time.monotonic() < end and process.poll() is None
            time.sleep(0.1)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k-123", max_retries=0)
        audio = client.audio.speech.create(
            model="tts-1", voice="alloy", input="こんにちは。", response_format="wav"
        )
        assert audio.content[:4] == b"RIFF" and len(audio.content) > 44100
        assert httpx.get(f"{url}/v1/models").status_code == 401  # the key from the environment
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode in (0, 130)  # Ctrl-C: a clean stop, 130 as shells expect


def test_serve_fails_before_listening(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--model", str(tmp_path / "missing"), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("yomiage serve: ") and "no such folder" in err
    assert main(["serve", "--model", str(tmp_path), "--voice-alias", "nonsense"]) == 1
    assert "ALIAS=NAME" in capsys.readouterr().err


def test_serve_help_and_safe_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "default 127.0.0.1" in out and "--api-key" in out
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("localhost")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("192.168.1.2")
