"""What ``yomiage serve`` says when it starts and stops (issue 49, items 7 and 6): a server
with nothing to serve does not start, the start line names the installed voices it loaded,
a 404 advises only routes the server has open, SIGTERM leaves nothing in TMPDIR, and the
access log shows no query string (VOICEVOX's texts) unless asked."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.aivm_files import AIVMX, UUID, without_a_neutral_style
from tests.conftest import TEST_VOICES
from tests.serving import serve
from yomiage import TTS
from yomiage.server import ServerConfig
from yomiage.server.engine.service import LocalService

pytestmark = pytest.mark.server
BERT = TEST_VOICES / "tiny" / "bert"
BAD = "e500e500-0000-4000-8000-000000000001"


class _Started:
    """A ``yomiage serve`` process, its stderr read all along: ``url`` once it listens
    (None if it stopped first), ``log`` what it said."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.url: str | None = None
        self._decided = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            found = re.search(r" on (http://127\.0\.0\.1:\d+)/", line)
            if found and self.url is None:
                self.url = found.group(1)
                self._decided.set()
        self._decided.set()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def listening(self) -> bool:
        """Whether it listens (False: it stopped before)."""
        assert self._decided.wait(180), f"yomiage serve neither listened nor stopped:\n{self.log}"
        return self.url is not None


@contextmanager
def _serve(*flags: str, env: dict[str, str] | None = None) -> Iterator[_Started]:
    command = [sys.executable, "-m", "yomiage", "serve", "--port", "0", "--threads", "1",
               "--decoder", "fp32", "--bert", str(BERT), *flags]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        yield _Started(process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _models(tmp_path: Path, *, good: bool) -> Path:
    """A models folder with a voice that loads and fails its warm-up (``good``: and the
    tiny voice, which loads)."""
    models = tmp_path / "models"
    models.mkdir()
    (models / f"{BAD}.aivmx").write_bytes(without_a_neutral_style(BAD))
    if good:
        (models / f"{UUID}.aivmx").write_bytes(AIVMX.read_bytes())
    return models


def test_a_server_whose_installed_voices_all_fail_to_load_refuses_to_start(
    tmp_path: Path,
) -> None:
    """Newcomer friction 5: ``serve`` (``--model-api read``) whose one installed voice could
    not load started "no voice yet (install one)", /ready 200 with no voice, and advised
    an install its read mode refuses (403)."""
    models = _models(tmp_path, good=False)
    with _serve("--models-dir", str(models)) as started:
        assert not started.listening(), started.log
        assert started.process.wait(timeout=60) == 1
    last = started.lines[-1]
    assert last.startswith("yomiage serve: no voice loaded") and str(models) in last
    assert "--model-api write" in last and "Traceback" not in started.log
    assert any("skipping installed voice" in line and BAD in line for line in started.lines)
    # Where clients may install one, it starts, and says what it skipped.
    with _serve("--models-dir", str(models), "--model-api", "write") as started:
        assert started.listening(), started.log
        line = next(line for line in started.lines if started.url and started.url in line)
        assert "no voice yet" in line and "1 installed voice(s) not loaded" in line


def test_the_start_line_names_the_installed_voices_it_loaded(tmp_path: Path) -> None:
    """An OpenAI-only ``serve --model X`` also loaded a voice installed earlier in the
    default models folder, and said nothing of it."""
    models = _models(tmp_path, good=True)
    tiny = TEST_VOICES / "tiny"
    with _serve("--model", f"tiny={tiny}", "--models-dir", str(models), "--api", "openai") as s:
        assert s.listening(), s.log
        line = next(line for line in s.lines if s.url and s.url in line)
    assert f"tiny, sbv2_tiny (installed in {models})" in line, line
    assert "1 installed voice(s) not loaded" in line


def test_with_no_voice_a_read_only_server_advises_loading_not_installing(
    tmp_path: Path,
) -> None:
    """The 404 said "install one (POST /aivm_models/install)" on a server where that
    route answers 403."""
    models = tmp_path / "models"
    models.mkdir()
    (models / f"{UUID}.aivmx").write_bytes(AIVMX.read_bytes())
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path / "cache", bert_source=BERT)
    config = ServerConfig(warmup=False, models_dir=models, model_api="read")
    with tts, serve(LocalService(tts), config) as running, running.client() as http:
        empty = http.post("/tts", json={"text": "こんにちは。"})
        message = empty.json()["error"]["message"]
        assert empty.status_code == 404 and "/aivm_models/install" not in message, message
        assert "POST /aivm_models/{uuid}/load" in message
        assert http.post(f"/aivm_models/{UUID}/load").status_code == 204  # as advised
        assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
    off = ServerConfig(warmup=False, models_dir=models, model_api="read", apis=("openai",))
    tts = TTS(threads=1, decoder_precision="fp32", cache_dir=tmp_path / "cache", bert_source=BERT)
    with tts, serve(LocalService(tts), off) as running, running.client() as http:
        message = http.post("/tts", json={"text": "こんにちは。"}).json()["error"]["message"]
        assert "/aivm_models" not in message and "--voice or --model" in message


def test_sigterm_leaves_no_folder_and_the_access_log_no_text(tmp_path: Path) -> None:
    """``timeout 10 yomiage serve ...`` (SIGTERM) left an empty ``yomiage-serve-*`` folder in
    TMPDIR; the access log wrote every VOICEVOX text (in the URL) to stderr, and a
    4,096-character one as a 37 kB line."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}
    secret = "秘密の文章です。" * 500
    with _serve("--model", f"tiny={TEST_VOICES / 'tiny'}", env=env) as started:
        assert started.listening(), started.log
        assert list(temporary.iterdir()), "the worker's load journal is there while it runs"
        answer = httpx.get(f"{started.url}/health", params={"text": secret}, timeout=30)
        assert answer.status_code == 200
        started.process.send_signal(signal.SIGTERM)
        assert started.process.wait(timeout=60) == -signal.SIGTERM
    assert list(temporary.iterdir()) == []
    logged = [line for line in started.lines if "GET /health" in line]
    assert logged and all(len(line) < 400 for line in logged), logged
    encoded = httpx.URL("/", params={"text": secret}).query.decode()[:20]
    assert encoded not in started.log and '"GET /health?… HTTP/1.1" 200' in logged[0]


def test_the_access_log_shows_the_query_only_when_asked() -> None:
    from yomiage.server.access_log import MAX_TARGET_CHARS, AccessLogFilter

    def shown(query: bool, target: str) -> str:
        record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1,
                                   '%s - "%s %s HTTP/%s" %d',
                                   ("127.0.0.1:5", "POST", target, "1.1", 200), None)  # fmt: skip
        assert AccessLogFilter(query=query).filter(record)
        return record.getMessage()

    assert '"POST /audio_query?… HTTP/1.1"' in shown(False, "/audio_query?text=%E3%81%82")
    assert "/audio_query?text=%E3%81%82&speaker=1" in shown(
        True, "/audio_query?text=%E3%81%82&speaker=1"
    )
    long = shown(True, "/audio_query?text=" + "%E3%81%82" * 4096)
    assert len(long) < MAX_TARGET_CHARS + 100 and "36882 characters" in long


def test_ready_names_each_voice_plan_and_an_unmet_memory_budget(tmp_path: Path) -> None:
    """ "no option fits the budget, the smallest taken" was said at INFO only; a server
    whose voice runs over its budget answered /ready like any other."""
    from dataclasses import replace

    tts = TTS(threads=1, cache_dir=tmp_path / "cache").load("tiny", source=TEST_VOICES / "tiny")
    with tts.prepare():
        speaker = tts.speakers["tiny"]
        assert speaker.plan is not None, "a CPU bundle runs by a plan"
        with serve(tts, ServerConfig(warmup=False)) as running, running.client() as http:
            fits = http.get("/ready").json()
        assert fits["plans"] == {"tiny": speaker.plan.describe()} and "warnings" not in fits
        # As a plan chosen where no option was predicted to fit the budget is.
        speaker.plan = replace(speaker.plan, fits_budget=False)
        with serve(tts, ServerConfig(warmup=False)) as running, running.client() as http:
            over = http.get("/ready")
    assert over.status_code == 200 and over.json()["plans"] == {"tiny": speaker.plan.describe()}
    (warning,) = over.json()["warnings"]
    assert "'tiny'" in warning and "memory budget" in warning
