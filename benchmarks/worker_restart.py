"""How long `yomiage serve` is unavailable after a native crash in its worker.

Run: .venv/bin/python benchmarks/worker_restart.py --bundle PATH [--kills 5] [--threads 2]

Starts `yomiage serve` on 127.0.0.1 (a free port) with the voice bundle at
PATH, waits for /ready, then ``--kills`` times: synthesizes one sentence,
sends SIGSEGV to the worker process (found as the server's child in /proc),
and measures until /ready answers 200 again and until a request succeeds
again; a request sent right after the kill must fail with 500
``worker_crashed`` or 503 ``worker_restarting``, never hang or reset. Reports
each figure's median and range, the server's and the worker's memory, and
the server's own count of restarts. Nothing but 127.0.0.1 is contacted.
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
import time
from pathlib import Path

import httpx

HOST = "127.0.0.1"
TEXT = "今日はいい天気ですね。"


def worker_of(pid: int) -> int:
    """The server's worker process (its other child is multiprocessing's resource tracker)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"resource_tracker" not in cmdline:
                return int(child)
    raise SystemExit("the server has no worker process")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start(bundle: str, threads: int) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"bench={bundle}",
               "--host", HOST, "--port", "0", "--threads", str(threads)]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        sys.stderr.write("  server: " + line)
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
        if found:
            return process, found.group(1)
    raise SystemExit("yomiage serve stopped before listening")


def wait(http: httpx.Client, path: str, timeout: float = 300.0) -> None:
    started = time.perf_counter()
    while True:
        try:
            if http.get(path).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.perf_counter() - started > timeout:
            raise SystemExit(f"{path} did not answer 200 within {timeout:g} s")
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a voice bundle from yomiage convert")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not Path(args.bundle, "voice.json").is_file():
        print(f"no voice bundle at {args.bundle}", file=sys.stderr)
        return 2
    process, url = start(args.bundle, args.threads)
    ready, served, answers = [], [], []
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            wait(http, "/ready")
            server_mb = rss_mb(process.pid)
            worker = worker_of(process.pid)
            worker_mb = rss_mb(worker)
            for _ in range(args.kills):
                assert http.post("/tts", json={"text": TEXT}).status_code == 200
                worker = worker_of(process.pid)
                os.kill(worker, signal.SIGSEGV)
                killed = time.perf_counter()
                right_after = http.post("/tts", json={"text": TEXT})
                answers.append(f"{right_after.status_code} {right_after.json()['error']['code']}"
                               if right_after.status_code != 200 else "200")  # fmt: skip
                wait(http, "/ready")
                ready.append(time.perf_counter() - killed)
                while http.post("/tts", json={"text": TEXT}).status_code != 200:
                    time.sleep(0.01)
                served.append(time.perf_counter() - killed)
            metrics = http.get("/metrics").text
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    restarts = re.search(r"^yomiage_worker_restarts_total (\S+)", metrics, re.M)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"
    print(f"\nmachine: {machine}, CPython {platform.python_version()}")
    print(f"bundle {args.bundle}; {args.threads} intra-op threads")
    print(f"memory at ready: server process {server_mb:.0f} MB, worker {worker_mb:.0f} MB")
    for name, values in (("kill -> /ready 200", ready), ("kill -> next request 200", served)):
        print(f"{name}: median {statistics.median(values):.2f} s "
              f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})")  # fmt: skip
    print(f"a request sent right after each kill: {', '.join(answers)}")
    print(f"server's count of restarts: {restarts.group(1) if restarts else '?'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
