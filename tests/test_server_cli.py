"""``yomiage serve`` as a user starts it: a process on 127.0.0.1 that the OpenAI client talks to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from tests.serving import listening_url  # noqa: E402
from yomiage.cli import main  # noqa: E402
from yomiage.cli.serve import _is_loopback  # noqa: E402

pytestmark = pytest.mark.server


def test_serve_process_end_to_end(test_voice: Path) -> None:
    env = {**os.environ, "YOMIAGE_API_KEY": "k-123"}
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "1", "--voice-alias", "alloy=tiny"]  # fmt: skip
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        url = listening_url(process)
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


def _worker_of(server_pid: int) -> int:
    """The server's worker process (its other child is multiprocessing's resource tracker)."""
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
    raise AssertionError("yomiage serve has no worker process")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_serve_survives_sigsegv_in_its_worker(test_voice: Path) -> None:
    """A native crash used to take the whole server down without a log line."""
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "1"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = listening_url(process)
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.post("/tts", json={"text": "こんにちは。"}).status_code == 200
            worker = _worker_of(process.pid)
            os.kill(worker, signal.SIGSEGV)
            # A request sent now waits for the new worker instead of failing.
            after = http.post("/tts", json={"text": "こんにちは。"})
            assert after.status_code == 200, after.text
            assert process.poll() is None and _worker_of(process.pid) != worker
            metrics = http.get("/metrics").text
        assert "yomiage_worker_crashes_total 1" in metrics
        assert "yomiage_worker_restarts_total 1" in metrics
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    assert process.returncode in (0, 130)


def test_sigterm_answers_queued_requests_with_503(test_voice: Path) -> None:
    """Requests waiting in the queue got nothing when the server was stopped."""
    import threading

    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "1", "--max-concurrency", "1"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    results: dict[str, httpx.Response] = {}
    try:
        url = listening_url(process)

        def queued() -> None:
            with httpx.Client(base_url=url, timeout=60) as http:
                results["queued"] = http.post("/tts", json={"text": "こんにちは。"})

        with (
            httpx.Client(base_url=url, timeout=60) as http,
            http.stream(
                "POST", "/tts", json={"text": "今日はいい天気ですね。" * 100, "format": "pcm"}
            ) as busy,
        ):
            assert busy.status_code == 200
            waiter = threading.Thread(target=queued)
            waiter.start()
            end = time.monotonic() + 20
            while "yomiage_queue_depth 1" not in http.get("/metrics").text:
                assert time.monotonic() < end
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            waiter.join(timeout=20)
        refused = results["queued"]
        assert refused.status_code == 503 and refused.headers["retry-after"]
        assert refused.json()["error"]["code"] == "shutting_down"
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_stop_with_a_request_in_flight_exits(test_voice: Path) -> None:
    """The server hung at exit when a request still waited on its worker."""
    import threading

    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "1"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    answers: list[int] = []
    try:
        url = listening_url(process)

        def long_request() -> None:
            with httpx.Client(base_url=url, timeout=120) as http:
                try:
                    text = "今日はいい天気ですね。" * 200
                    answers.append(
                        http.post("/tts", json={"text": text, "format": "mp3"}).status_code
                    )
                except httpx.HTTPError:
                    answers.append(0)

        client = threading.Thread(target=long_request)
        client.start()
        end = time.monotonic() + 20
        while "yomiage_in_flight_requests 1" not in httpx.get(f"{url}/metrics").text:
            assert time.monotonic() < end
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)  # a hang guard: it takes about 5 s (the graceful timeout)
        client.join(timeout=30)
        assert answers in ([503], [0])  # told to retry, or cut: never a hang
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


AIVMX = Path(__file__).parent / "data" / "aivmx" / "tiny.aivmx"


@pytest.mark.parametrize(
    "voice",
    [[], ["--model", "no/such/voice"], ["--voice", "jvnv-F1-jp"], ["--model", str(AIVMX)]],
    ids=["no voice", "missing path", "offline catalog voice", "worker fails offline"],
)
def test_serve_start_up_failures_are_one_line(tmp_path: Path, voice: list[str]) -> None:
    """Issue 22 (10): each printed the worker's traceback (19-116 lines); the last fails in
    the worker (no BERT cached), the others before it starts."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "YOMIAGE_CACHE": str(tmp_path / "empty")}
    done = subprocess.run(
        [sys.executable, "-m", "yomiage", "serve", *voice, "--port", "0", "--threads", "1"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # The worker says what it does before it fails (converting the voice: INFO lines, as
    # `generate` says it), then the failure is one line.
    lines = [line for line in done.stderr.splitlines() if not line.startswith("INFO ")]
    assert done.returncode == 1 and 1 <= len(lines) <= 2, done.stderr
    assert lines[-1].startswith("yomiage serve: ") and "Traceback" not in done.stderr
    if str(AIVMX) not in voice:
        assert len(lines) == 1, "checked before a worker starts"


def test_serve_logs_each_request(test_voice: Path) -> None:
    """Issue 22 (15): ``serve`` printed no access log unless -v; --no-access-log stops it."""
    for flag, logged in (("--access-log", True), ("--no-access-log", False)):
        command = [sys.executable, "-m", "yomiage", "serve", "--model", str(test_voice),
                   "--port", "0", "--threads", "1", "--no-warmup", flag]  # fmt: skip
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        try:
            url = listening_url(process)
            assert httpx.get(f"{url}/health", timeout=30).status_code == 200
        finally:
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=30)
        assert ('"GET /health HTTP/1.1" 200' in err) is logged, err
