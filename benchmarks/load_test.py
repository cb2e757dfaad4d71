"""Load test: concurrent OpenAI-client requests against `yomiage serve` on loopback.

Run: .venv/bin/python benchmarks/load_test.py [--clients 1,2,4,8] [--limit 2] [--queue 2]
         [--duration 20] [--max-requests 60] [--bundle benchmarks/.cache/bundle-full-0]

Starts `yomiage serve` in its own process on 127.0.0.1 (a free port) with the
full-size synthetic bundle (see benchmarks/backends.py for how it is made; the
run is skipped with a message when it is missing), waits for /ready (voices
loaded and warmed), then runs one phase per client count. In a phase each
client sends the same short text again and again through the official
``openai`` client, streaming the WAV, until the phase's time or request budget
is spent; a client refused with 429 waits the Retry-After the server sent (as
a polite client does) and goes on. Nothing but 127.0.0.1 is contacted, and
every loop is bounded in time and count.

Per phase: requests served, 429s, other errors, audio seconds produced per
wall second, latency and time to first byte (p50/p95/p99), and the server's
RSS before and after (from /proc, the server and its worker process together).
Below the server's limit + queue there should be no errors; above it, 429s and
no growth in memory.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUNDLE = HERE / ".cache" / "bundle-full-0"
TEXT = "今日はいい天気ですね。午後から公園へ散歩に出かけましょう。"
HOST = "127.0.0.1"  # loopback only, by design


@dataclass
class Phase:
    clients: int
    ok: int = 0
    busy: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    first_bytes: list[float] = field(default_factory=list)
    audio_seconds: float = 0.0
    wall: float = 0.0
    rss_before: float = 0.0
    rss_after: float = 0.0
    peak_rss: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _process_rss(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    now = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return now / 1024, peak / 1024


def rss_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident memory in MB of the server ``pid`` and its children (the
    engine's worker process; the peaks are summed, an upper bound of the joint peak)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        pids += [int(c) for c in (task / "children").read_text().split()]
    sizes = [_process_rss(p) for p in pids if Path(f"/proc/{p}/status").exists()]
    return sum(now for now, _ in sizes), sum(peak for _, peak in sizes)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "yomiage", "serve", "--model", f"voice={args.bundle}",
        "--host", HOST, "--port", "0", "--max-concurrency", str(args.limit),
        "--max-queue", str(args.queue), "--quantize", args.quantize,
        "--voice-alias", "alloy=voice",
    ]  # fmt: skip
    if args.threads:
        command += ["--threads", str(args.threads)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
    if not found:
        process.kill()
        raise SystemExit(f"the server did not start: {line}{process.stderr.read()}")
    # Keep draining its log so the pipe never blocks the server.
    threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()  # type: ignore[union-attr]
    return process, found.group(1)


def wait_ready(url: str, process: subprocess.Popen[str], timeout: float = 300) -> float:
    import httpx

    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if process.poll() is not None:
            raise SystemExit("the server exited while loading")
        try:
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise SystemExit("the server was not ready in time")


def client_loop(url: str, phase: Phase, deadline: float, budget: list[int]) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
    while time.perf_counter() < deadline:
        with phase.lock:
            if budget[0] <= 0:
                return
            budget[0] -= 1
        started = time.perf_counter()
        first = None
        size = 0
        try:
            with client.audio.speech.with_streaming_response.create(
                model="tts-1", voice="alloy", input=TEXT, response_format="wav"
            ) as response:
                for piece in response.iter_bytes():
                    if first is None and piece:
                        first = time.perf_counter() - started
                    size += len(piece)
        except openai.RateLimitError as exc:
            with phase.lock:
                phase.busy += 1
            retry = float(exc.response.headers.get("retry-after", "1"))
            time.sleep(min(retry, max(0.0, deadline - time.perf_counter())))
            continue
        except openai.APIError as exc:
            name = getattr(exc, "status_code", None) or type(exc).__name__
            with phase.lock:
                phase.errors[str(name)] = phase.errors.get(str(name), 0) + 1
            continue
        elapsed = time.perf_counter() - started
        with phase.lock:
            phase.ok += 1
            phase.latencies.append(elapsed)
            phase.first_bytes.append(first if first is not None else elapsed)
            phase.audio_seconds += max(0, size - 44) / 2 / 44100


def run_phase(url: str, pid: int, clients: int, duration: float, max_requests: int) -> Phase:
    phase = Phase(clients)
    phase.rss_before, _ = rss_mb(pid)
    budget = [max_requests]
    started = time.perf_counter()
    deadline = started + duration
    threads = [
        threading.Thread(target=client_loop, args=(url, phase, deadline, budget), daemon=True)
        for _ in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration + 180)  # a request started before the deadline may finish
    phase.wall = time.perf_counter() - started
    phase.rss_after, phase.peak_rss = rss_mb(pid)
    return phase


def row(p: Phase) -> str:
    errors = sum(p.errors.values())
    lat = "/".join(f"{percentile(p.latencies, q):.2f}" for q in (50, 95, 99))
    ttfb = "/".join(f"{percentile(p.first_bytes, q):.2f}" for q in (50, 95, 99))
    return (
        f"| {p.clients} | {p.ok} | {p.busy} | {errors} | {p.audio_seconds:.1f} | {p.wall:.1f} | "
        f"{p.audio_seconds / p.wall:.2f} | {lat} | {ttfb} | {p.rss_before:.0f} → {p.rss_after:.0f}"
        f" (peak {p.peak_rss:.0f}) |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--clients", default="1,2,4,8", help="client counts, one phase each")
    parser.add_argument("--limit", type=int, default=2, help="server --max-concurrency")
    parser.add_argument("--queue", type=int, default=2, help="server --max-queue")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--max-requests", type=int, default=60, help="requests per phase")
    parser.add_argument("--quantize", default="q8", choices=["q8", "q4", "none"])
    parser.add_argument("--threads", type=int, help="server intra-op threads")
    args = parser.parse_args()
    if not (args.bundle / "voice.json").is_file():
        print(f"skipped: no voice bundle at {args.bundle} (see benchmarks/backends.py)")
        return 0
    clients = [int(c) for c in args.clients.split(",")]
    if max(clients) > 64 or args.duration > 120 or args.max_requests > 500:
        raise SystemExit("keep it bounded: at most 64 clients, 120 s and 500 requests a phase")

    process, url = start_server(args)
    try:
        ready = wait_ready(url, process)
        threads = f" --threads {args.threads}" if args.threads else ""
        print(
            f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}; server on {url} with "
            f"--max-concurrency {args.limit} --max-queue {args.queue} --quantize {args.quantize}"
            f"{threads}; bundle {args.bundle.name}; load average {os.getloadavg()[0]:.2f};"
            f" ready (loaded and warmed) {ready:.1f} s after start. Text: {TEXT!r}; each phase"
            f" {args.duration:g} s or {args.max_requests} requests, whichever ends first.\n"
        )
        print(
            "| clients | served | 429 | other errors | audio s | wall s | audio s per wall s |"
            " latency p50/p95/p99 s | first byte p50/p95/p99 s | server RSS MB before → after |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for count in clients:
            phase = run_phase(url, process.pid, count, args.duration, args.max_requests)
            print(row(phase), flush=True)
            if phase.errors:
                print(f"  other errors: {phase.errors}", file=sys.stderr)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
