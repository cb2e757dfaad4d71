"""`yomiage serve` with a models folder (issue 31): it starts with installed voices only, or
with none to install into; a file in the folder that cannot load is skipped (at a start and
at a worker restart), never fatal; names and guards hold across worker and server restarts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.aivm_files import AIVMX, UUID, own_voice, without_a_neutral_style

pytestmark = pytest.mark.server

NEEDS_PROC = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
A = "ffffffff-0000-4000-8000-000000000001"
B = "00000001-0000-4000-8000-000000000002"


class Served:
    """A `yomiage serve` process whose stderr is read all along (so it never blocks on a
    full pipe): ``url`` once it listens, ``log`` what it said so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._url: str | None = None
        self._listening = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
            if found and self._url is None:
                self._url = found.group(1)
                self._listening.set()
        self._listening.set()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    @property
    def url(self) -> str:
        self._listening.wait(180)
        assert self._url is not None, f"yomiage serve did not listen:\n{self.log}"
        return self._url

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=120)

    def wait_ready(self) -> None:
        """Until /ready is 200 (a generous bound, not a timing check)."""
        end = time.monotonic() + 180
        with self.client() as http:
            while http.get("/ready").status_code != 200:
                assert time.monotonic() < end and self.process.poll() is None, self.log
                time.sleep(0.2)

    def worker(self) -> int:
        """The worker process (the other child is multiprocessing's resource tracker)."""
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                    return int(child)
        raise AssertionError("yomiage serve has no worker process")


@contextmanager
def serving(*flags: str) -> Iterator[Served]:
    command = [sys.executable, "-m", "yomiage", "serve", "--port", "0", "--threads", "1",
               "--decoder", "fp32", "--bert", str(AIVMX.parents[1] / "voices" / "tiny" / "bert"),
               *flags]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        yield Served(process)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _voices(http: httpx.Client) -> list[str]:
    return sorted(v["name"] for v in http.get("/v1/audio/voices").json()["voices"])


def _speakers(http: httpx.Client) -> list[dict[str, object]]:
    """/speakers (a 200), in uuid order: a restart may list them in another order."""
    answer = http.get("/speakers")
    assert answer.status_code == 200, answer.text
    return sorted(answer.json(), key=lambda s: str(s["speaker_uuid"]))


def _upload(http: httpx.Client, data: bytes) -> httpx.Response:
    return http.post("/aivm_models/install", files={"file": ("v.aivmx", data)})


@pytest.mark.parametrize("mode", [[], ["--in-process"], ["--compat", "aivisspeech"]])
def test_serve_starts_with_installed_voices_only(tmp_path: Path, mode: list[str]) -> None:
    """Issue 31 R6 (newcomer friction 2): with no --voice or --model, `yomiage serve`
    failed ("name a voice") although docs/voicevox.md says it serves what is installed."""
    models = tmp_path / "models"
    models.mkdir()
    (models / f"{UUID}.aivmx").write_bytes(AIVMX.read_bytes())
    with serving("--models-dir", str(models), *mode) as served:
        served.wait_ready()
        with served.client() as http:
            assert _voices(http) == ["sbv2_tiny"]
            assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
            assert http.get(f"/aivm_models/{UUID}").json()["is_loaded"] is True


def test_serve_starts_with_no_voice_to_install_into(tmp_path: Path) -> None:
    """Newcomer friction 2: AivisSpeech's quick start (serve, then install by upload)
    could not start; the server starts empty, as AivisSpeech's engine does."""
    models = tmp_path / "models"
    with serving("--models-dir", str(models), "--compat", "aivisspeech",
                 "--model-api", "write") as served:  # fmt: skip
        served.wait_ready()
        with served.client() as http:
            assert http.get("/speakers").json() == []
            empty = http.post("/tts", json={"text": "こんにちは。"})
            assert empty.status_code == 404 and "install one" in empty.text
            assert _upload(http, AIVMX.read_bytes()).status_code == 204
            assert _voices(http) == ["sbv2_tiny"] and http.get("/speakers").json() != []
    # Without a way to get a voice (nothing installed, --model-api read) it says so.
    refused = subprocess.run(
        [sys.executable, "-m", "yomiage", "serve", "--port", "0",
         "--models-dir", str(tmp_path / "empty")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode != 0 and "--model-api write" in refused.stderr
    assert "Traceback" not in refused.stderr


@NEEDS_PROC
def test_a_voice_that_cannot_load_is_skipped_at_start_and_at_worker_restart(
    tmp_path: Path, test_voice: Path
) -> None:
    """Issue 31 R2: a voice in the models folder that failed its warm-up stopped every
    start (exit 1) and every worker restart (/ready 503 for good, restarts in a loop)."""
    models = tmp_path / "models"
    models.mkdir()
    (models / f"{UUID}.aivmx").write_bytes(AIVMX.read_bytes())
    bad = models / "e500e500-0000-4000-8000-000000000001.aivmx"
    bad.write_bytes(without_a_neutral_style(bad.stem))
    with serving("--model", f"tiny={test_voice}", "--models-dir", str(models)) as served:
        served.wait_ready()
        with served.client() as http:
            assert _voices(http) == ["sbv2_tiny", "tiny"]
            skipped = [line for line in served.lines if "skipping installed voice" in line]
            assert len(skipped) == 1 and bad.name in skipped[0] and "Neutral" in skipped[0]
            os.kill(served.worker(), signal.SIGKILL)
            after = http.post("/tts", json={"text": "こんにちは。", "voice": "sbv2_tiny"})
            assert after.status_code == 200, after.text
            served.wait_ready()
            assert _voices(http) == ["sbv2_tiny", "tiny"]
            assert "yomiage_worker_restarts_total 1" in http.get("/metrics").text


@NEEDS_PROC
def test_names_and_styles_hold_across_worker_and_server_restarts(
    tmp_path: Path, test_voice: Path
) -> None:
    """Issue 31 R3: two installed voices of one name: after a worker restart every VOICEVOX
    style route answered 500 (one voice loaded twice), and after a server restart the name
    meant the other voice."""
    models = tmp_path / "models"
    flags = ("--model", f"tiny={test_voice}", "--models-dir", str(models), "--model-api", "write")
    with serving(*flags) as served:
        served.wait_ready()
        with served.client() as http:
            assert _upload(http, own_voice(A, "まい")).status_code == 204
            assert _upload(http, own_voice(B, "まい")).status_code == 204
            names = _voices(http)
            speakers = _speakers(http)
            assert names == ["tiny", "まい-00000001", "まい-ffffffff"]
            os.kill(served.worker(), signal.SIGKILL)
            assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
            served.wait_ready()
            assert _voices(http) == names
            assert _speakers(http) == speakers
    with serving(*flags) as served:
        served.wait_ready()
        with served.client() as http:
            assert _voices(http) == names and _speakers(http) == speakers


def test_an_upper_case_uuid_cannot_uninstall_the_default_voice(
    tmp_path: Path, test_voice: Path
) -> None:
    """Issue 31 R5: DELETE /aivm_models/<UPPER-CASE UUID>/uninstall passed the guard of
    the --default-voice: its file was deleted, and the next start failed."""
    models = tmp_path / "models"
    models.mkdir()
    (models / f"{UUID}.aivmx").write_bytes(AIVMX.read_bytes())
    with serving("--model", f"tiny={test_voice}", "--models-dir", str(models),
                 "--model-api", "write", "--default-voice", "sbv2_tiny",
                 "--voice-alias", "alloy=sbv2_tiny") as served:  # fmt: skip
        served.wait_ready()
        with served.client() as http:
            for uuid in (UUID.upper(), UUID):
                refused = http.delete(f"/aivm_models/{uuid}/uninstall")
                assert refused.status_code == 400 and "--default-voice" in refused.text
                assert http.post(f"/aivm_models/{uuid}/unload").status_code == 400
            assert (models / f"{UUID}.aivmx").exists()
            speech = {"model": "tts-1", "voice": "alloy", "input": "こんにちは。"}
            assert http.post("/v1/audio/speech", json=speech).status_code == 200
