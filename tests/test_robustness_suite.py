"""The robustness suite (issue 11): inputs aimed at every native crash and unbounded cost
found so far, through the library, the CLI and the server.

Each input must end in a result or a typed error, in bounded time and memory.
The bounds are hang and runaway guards, far above what the tiny voice needs
(each case takes seconds): a case that crashes, hangs or eats gigabytes fails
here with its name. Hypothesis covers the rest (tests/test_robustness.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_robustness import LONG_RUN_UNITS

pytestmark = pytest.mark.slow

CASE_SECONDS = 120  # per input: a runaway guard, not a speed target
MAX_RSS_MB = 2500  # the tiny voice needs a few hundred

# One text per script at the length that used to crash OpenJTalk (344 kana).
LONG_RUNS = {name: (unit * 400)[:345] for name, unit in LONG_RUN_UNITS.items()}
EXTREME_OPTIONS = [
    {"noise_w": 2.0, "sdp_ratio": 1.0, "noise": 2.0},
    {"speed": 4.0, "noise_w": 2.0, "sdp_ratio": 1.0},
    {"speed": 0.25, "style_weight": 20.0},
    {"style_weight": 0.0, "noise": 0.0, "noise_w": 0.0, "sdp_ratio": 0.0},
]
OUT_OF_RANGE = [{"noise_w": 10.0, "sdp_ratio": 1.0}, {"noise_w": 50}, {"style_weight": 1e9},
                {"noise": 1e9}, {"speed": 10.0}, {"seed": -1}]  # fmt: skip
FORMATS = ["wav", "ogg", "opus", "mp3", "flac"]

_LIBRARY_PROBE = """
import json, resource, sys, time
from yomiage import TTS
from yomiage.errors import YomiageError

bundle, cases = sys.argv[1], json.load(sys.stdin)
speaker = TTS(threads=2).load("tiny", source=bundle).prepare().speakers["tiny"]
for name, text, options in cases:
    print("CASE", name, flush=True)
    started = time.perf_counter()
    try:
        audio = speaker.generate(text, seed=0, **options)
        outcome = f"ok {audio.duration:.1f}s"
    except YomiageError as exc:
        outcome = type(exc).__name__
    print("DONE", json.dumps([name, outcome, time.perf_counter() - started]), flush=True)
print("RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, flush=True)
"""


def _run_probe(script: str, args: list[str], stdin: str, timeout: float) -> list[str]:
    run = subprocess.run(
        [sys.executable, "-c", script, *args], input=stdin, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    lines = run.stdout.splitlines()
    last = [line for line in lines if line.startswith("CASE")][-1:]
    assert run.returncode == 0, f"died ({run.returncode}) at {last}: {run.stderr[-800:]}"
    return lines


def _check_outcomes(lines: list[str]) -> dict[str, str]:
    outcomes = {}
    for line in lines:
        if line.startswith("DONE "):
            name, outcome, seconds = json.loads(line[5:])
            assert seconds < CASE_SECONDS, f"{name} took {seconds:.0f} s"
            outcomes[name] = outcome
    rss = [int(line.split()[1]) for line in lines if line.startswith("RSS")]
    assert rss and rss[0] < MAX_RSS_MB, f"peak RSS {rss} MB"
    return outcomes


def test_library_long_runs_and_extreme_options(test_voice: Path) -> None:
    cases: list[tuple[str, str, dict[str, Any]]] = [
        (f"run:{name}", text, {}) for name, text in LONG_RUNS.items()
    ]
    cases += [
        (f"options:{i}", "今日はいい天気ですね。" * 5, o) for i, o in enumerate(EXTREME_OPTIONS)
    ]
    cases += [("digits-4096", "9" * 4096, {}), ("sentence-200", "こんにちは" * 40, {})]
    timeout = CASE_SECONDS * len(cases)
    lines = _run_probe(_LIBRARY_PROBE, [str(test_voice)], json.dumps(cases), timeout)
    outcomes = _check_outcomes(lines)
    assert len(outcomes) == len(cases)
    allowed = ("ok", "TextError", "LimitError")
    bad = {n: o for n, o in outcomes.items() if not o.startswith(allowed)}
    assert not bad, bad
    assert outcomes["run:katakana"].startswith("ok")  # read, not refused
    assert all(outcomes[f"options:{i}"].startswith("ok") for i in range(len(EXTREME_OPTIONS)))


# -- the command line ----------------------------------------------------------------


def _yomiage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yomiage", *args], input=stdin, capture_output=True, text=True,
        timeout=CASE_SECONDS * 4,
    )  # fmt: skip


def test_cli_g2p_reads_every_long_run() -> None:
    run = _yomiage("g2p", "--json", "-", stdin="\n".join(LONG_RUNS.values()) + "\n")
    assert run.returncode in (0, 1), run.stderr[-500:]  # 1: some line has nothing to read
    assert "Traceback" not in run.stderr
    assert len(run.stdout.splitlines()) >= len(LONG_RUNS) - 4  # symbols-only lines may not read


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_generate_long_audio_in_every_format(
    test_voice: Path, tmp_path: Path, fmt: str
) -> None:
    """ogg with ~48 s or more used to crash libsndfile's encoder."""
    out = tmp_path / f"long.{fmt}"
    text = "今日はいい天気ですね。" * 40  # 100 s with the tiny voice
    run = _yomiage("generate", text, "--model", str(test_voice), "-o", str(out), "-q")
    assert run.returncode == 0, run.stderr[-500:]
    assert out.stat().st_size > 1000


@pytest.mark.parametrize("text", [LONG_RUNS["katakana"], LONG_RUNS["half-width katakana"],
                                  "9" * 345, "ｗ" * 345])  # fmt: skip
def test_cli_generate_long_runs(test_voice: Path, tmp_path: Path, text: str) -> None:
    out = tmp_path / "run.wav"
    run = _yomiage("generate", text, "--model", str(test_voice), "-o", str(out), "-q")
    assert "Traceback" not in run.stderr
    # 345 letters spelled out (ダブリュー each) last over the 180 s a sentence may.
    limited = run.returncode == 1 and "a sentence may last at most" in run.stderr
    assert run.returncode == 0 or limited, run.stderr[-500:]
    assert out.exists() != limited


@pytest.mark.parametrize("options", OUT_OF_RANGE, ids=lambda o: ",".join(o))
def test_cli_generate_refuses_out_of_range_options(
    test_voice: Path, tmp_path: Path, options: dict[str, float]
) -> None:
    flags = [item for k, v in options.items() for item in (f"--{k.replace('_', '-')}", str(v))]
    run = _yomiage("generate", "こんにちは。", "--model", str(test_voice), "-o",
                   str(tmp_path / "x.wav"), *flags)  # fmt: skip
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert any(name in run.stderr for name in options), run.stderr
    assert not (tmp_path / "x.wav").exists()


def test_cli_dict_refuses_a_reading_that_would_poison_every_start(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    run = _yomiage("dict", "--user-dict", str(path), "add", "長い語", "ア" * 2000)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert _yomiage("g2p", "--user-dict", str(path), "長い語").returncode == 0


# -- the server ----------------------------------------------------------------------


def _start_server(test_voice: Path) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"tiny={test_voice}",
               "--port", "0", "--threads", "2", "--dict-api", "write",
               "--max-concurrency", "2", "--max-audio-seconds", "300"]  # fmt: skip
    env = {**os.environ, "YOMIAGE_USER_DICT": str(test_voice.parent / "serve-dict.json")}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    for line in process.stderr:
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
        if found:
            return process, found.group(1)
    raise AssertionError("yomiage serve did not start")


def _worker_peak_mb(server_pid: int) -> int:
    peak = 0
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) // 1024)
    return peak


@pytest.mark.server
def test_server_answers_every_hostile_input_and_never_crashes(test_voice: Path) -> None:
    """Each input ends in audio or a JSON 4xx; the worker never dies on the way."""
    httpx = pytest.importorskip("httpx")
    process, url = _start_server(test_voice)
    try:
        with httpx.Client(base_url=url, timeout=CASE_SECONDS) as http:
            end = time.monotonic() + 60
            while http.get("/ready").status_code != 200:
                assert time.monotonic() < end
                time.sleep(0.1)
            requests: list[tuple[str, dict[str, Any]]] = []
            for i, (name, text) in enumerate(LONG_RUNS.items()):
                fmt = FORMATS[i % len(FORMATS)]
                requests.append((name, {"input": text, "response_format": fmt}))
            requests.append(("ogg-100s", {"input": "今日はいい天気ですね。" * 40,
                                          "response_format": "ogg"}))  # fmt: skip
            requests.append(("digits-4096", {"input": "9" * 4096, "response_format": "mp3"}))
            requests.append(
                ("sentence-200", {"input": "こんにちは" * 40, "response_format": "wav"})
            )
            for i, options in enumerate(EXTREME_OPTIONS + OUT_OF_RANGE):
                requests.append((f"options-{i}", {"input": "こんにちは。", **options}))
            for name, body in requests:
                started = time.monotonic()
                response = http.post(
                    "/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", **body}
                )
                assert time.monotonic() - started < CASE_SECONDS, name
                assert response.status_code in (200, 400, 413), (name, response.text[:300])
                if response.status_code != 200:
                    error = response.json()["error"]
                    assert error["code"] in ("invalid_value", "invalid_input", "audio_too_long")
            word = http.post("/v1/dictionary", json={"surface": "中読語", "reading": "ア" * 1000})
            assert word.status_code == 400
            metrics = http.get("/metrics").text
        assert re.search(r"^yomiage_worker_crashes_total 0$", metrics, re.M), "the worker died"
        assert _worker_peak_mb(process.pid) < MAX_RSS_MB
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
