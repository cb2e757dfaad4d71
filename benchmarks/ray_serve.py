"""yomiage on Ray Serve: throughput for 1, 2 and 4 replicas, and what killing a replica costs.

Run: .venv/bin/python benchmarks/ray_serve.py [--replicas 1,2,4] [--clients 4] [--no-autoscale]
         [--duration 30] [--bundle benchmarks/.cache/bundle-full-0] [--no-fault]

Each configuration runs in a fresh process with a fresh local Ray cluster on
127.0.0.1 (the baseline is plain ``yomiage serve`` in the same run, on the
same voice and load). In a phase, ``--clients`` threads post the same
sentence to ``/tts`` (whole WAV) for ``--duration`` seconds; requests per
second and latency percentiles come from the clients. The full-size synthetic
bundle is the voice (benchmarks/backends.py says how it is made).

The fault phase runs 2 replicas under the same load, SIGKILLs one replica's
process after a third of the phase, and counts the requests that failed at
their first attempt and those still failed after one retry, and times the
recovery: from the kill to Serve reporting the replacement running, and to
the first response from the new replica (``X-Yomiage-Replica``).

Replicas get one thread each and Ray is told the machine has as many CPUs as
replicas, so 4 replicas oversubscribe a 2-core machine: what these numbers
show is the overhead and the fault behaviour, not scaling (docs/scale.md).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUNDLE = HERE / ".cache" / "bundle-full-0"
TEXT = "今日はいい天気ですね。午後から公園へ散歩に出かけましょう。"
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class Outcome:
    ok: int = 0
    first_failures: int = 0
    lost: int = 0
    latencies: list[float] = field(default_factory=list)
    audio_seconds: float = 0.0
    first_from: dict[str, float] = field(default_factory=dict)  # replica -> first answer time
    wall: float = 0.0  # from the first request to the last answer
    lock: threading.Lock = field(default_factory=threading.Lock)


def post(port: int) -> tuple[int, bytes, str | None]:
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    try:
        body = json.dumps({"text": TEXT, "format": "wav", "stream": False, "seed": 1})
        conn.request("POST", "/tts", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("X-Yomiage-Replica")
    finally:
        conn.close()


def client(port: int, outcome: Outcome, deadline: float, retry: bool) -> None:
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        for attempt in range(2 if retry else 1):
            try:
                status, body, replica = post(port)
                good = status == 200 and body[:4] == b"RIFF"
            except (OSError, http.client.HTTPException):
                good, body, replica = False, b"", None
            with outcome.lock:
                if good:
                    outcome.ok += 1
                    outcome.latencies.append(time.perf_counter() - started)
                    rate = int.from_bytes(body[24:28], "little")
                    outcome.audio_seconds += (len(body) - 44) / 2 / rate
                    if replica is not None:
                        outcome.first_from.setdefault(replica, time.perf_counter())
                    break
                if attempt == 0:
                    outcome.first_failures += 1
        else:
            with outcome.lock:
                outcome.lost += 1


def load(port: int, clients: int, duration: float, retry: bool = False) -> Outcome:
    outcome = Outcome()
    started = time.perf_counter()
    deadline = started + duration
    threads = [
        threading.Thread(target=client, args=(port, outcome, deadline, retry))
        for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcome.wall = time.perf_counter() - started
    return outcome


def summary(outcome: Outcome, **extra: object) -> dict[str, object]:
    lat = sorted(outcome.latencies)
    pct = statistics.quantiles(lat, n=20) if len(lat) >= 2 else [float("nan")] * 19
    return {
        "requests": outcome.ok,
        "req_per_s": outcome.ok / outcome.wall,
        "p50_s": statistics.median(lat) if lat else float("nan"),
        "p95_s": pct[18],
        "audio_s_per_s": outcome.audio_seconds / outcome.wall,
        "first_failures": outcome.first_failures,
        "lost": outcome.lost,
        **extra,
    }


def replica_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(b"ray::ServeReplica:bench:yomiage"):
                pids.append(int(entry.name))
    return sorted(pids)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_ray(args: argparse.Namespace, replicas: int, mode: str) -> dict[str, object]:
    """One configuration, in this (fresh) process."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a loopback-only cluster
    import ray
    from ray import serve

    from yomiage.ray import app

    ray.init(address="local", num_cpus=max(2, replicas), include_dashboard=False,
             _node_ip_address=HOST, log_to_driver=False)  # fmt: skip
    port = free_port()
    started = time.perf_counter()
    serve.start(http_options={"host": HOST, "port": port})
    scaling = (
        {"min_replicas": 1, "max_replicas": replicas}
        if mode == "autoscale"
        else {"replicas": replicas}
    )
    serve.run(
        app({"model": f"voice={args.bundle}", "threads": 1, **scaling,
             "max_concurrency": args.concurrency, "allowed_host": "*"}),
        name="bench", route_prefix="/",
    )  # fmt: skip
    deploy_s = time.perf_counter() - started
    pids = replica_pids()
    rss = [rss_mb(pid) for pid in pids]
    load(port, 1, 3)  # every connection path warm
    try:
        if mode == "fault":
            return fault_phase(args, port, pids, serve)
        if mode == "autoscale":
            return autoscale_phase(args, port, replicas, serve)
        outcome = load(port, args.clients, args.duration)
        return summary(outcome, replicas=replicas, deploy_s=deploy_s, replica_rss_mb=rss)
    finally:
        serve.shutdown()
        ray.shutdown()


def autoscale_phase(args: argparse.Namespace, port: int, most: int, serve: Any) -> dict:
    """From 1 replica under steady load: when Serve has started the others."""
    running: list[tuple[float, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            status = serve.status().applications["bench"].deployments["yomiage"]
            running.append((time.perf_counter(), status.replica_states.get("RUNNING", 0)))
            time.sleep(0.5)

    watcher = threading.Thread(target=watch)
    started = time.perf_counter()
    watcher.start()
    outcome = load(port, args.clients, args.scale_duration)
    stop.set()
    watcher.join()
    reached = [t - started for t, n in running if n >= most]
    return summary(
        outcome,
        autoscale=f"1..{most}",
        replicas_at_end=running[-1][1] if running else None,
        all_running_after_s=reached[0] if reached else None,
    )


def fault_phase(args: argparse.Namespace, port: int, pids: list[int], serve: Any) -> dict:
    results: dict[str, Outcome] = {}
    killed_at: list[float] = []
    replaced_at: list[float] = []

    def kill_then_watch() -> None:
        time.sleep(args.duration / 3)
        killed_at.append(time.perf_counter())
        os.kill(pids[0], signal.SIGKILL)
        while time.perf_counter() - killed_at[0] < 120:
            status = serve.status().applications["bench"].deployments["yomiage"]
            new = set(replica_pids()) - set(pids)
            if new and status.replica_states.get("RUNNING", 0) == len(pids):
                replaced_at.append(time.perf_counter())
                return
            time.sleep(0.1)

    known: set[str] = set()
    deadline = time.perf_counter() + 60
    while len(known) < len(pids) and time.perf_counter() < deadline:
        known |= set(load(port, 2 * len(pids), 2).first_from)  # every replica's id, before
    before = time.perf_counter()
    watcher = threading.Thread(target=kill_then_watch)
    watcher.start()
    results["retry"] = load(port, args.clients, args.duration, retry=True)
    watcher.join()
    kill = killed_at[0]
    new_replica_first = [t for r, t in results["retry"].first_from.items() if r not in known]
    return summary(
        results["retry"],
        replicas=len(pids),
        fault=True,
        kill_after_s=kill - before,
        replaced_after_s=(replaced_at[0] - kill) if replaced_at else None,
        new_replica_first_answer_after_s=(min(new_replica_first) - kill)
        if new_replica_first
        else None,
    )


def one_serve(args: argparse.Namespace) -> dict[str, object]:
    """The baseline: plain `yomiage serve` (its own worker process), 2 threads."""
    port = free_port()
    command = [sys.executable, "-m", "yomiage", "serve", "--model", f"voice={args.bundle}",
               "--port", str(port), "--threads", "2", "--max-concurrency",
               str(args.concurrency), "--no-playground"]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while True:
            try:
                conn = http.client.HTTPConnection(HOST, port, timeout=5)
                conn.request("GET", "/ready")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.perf_counter() - started > 300:
                raise RuntimeError(f"yomiage serve did not get ready: {proc.stderr.read()}")  # type: ignore[union-attr]
            time.sleep(0.2)
        load(port, 1, 3)
        outcome = load(port, args.clients, args.duration)
        return summary(outcome, replicas="yomiage serve", deploy_s=None)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


def run_child(args: argparse.Namespace, what: str) -> dict[str, object]:
    command = [sys.executable, __file__, "--child", what, "--bundle", str(args.bundle),
               "--clients", str(args.clients), "--duration", str(args.duration),
               "--concurrency", str(args.concurrency),
               "--scale-duration", str(args.scale_duration)]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(lines[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=2, help="max_concurrency per replica")
    parser.add_argument("--no-fault", action="store_true")
    parser.add_argument("--no-autoscale", action="store_true")
    parser.add_argument(
        "--scale-duration", type=float, default=90.0, help="seconds of load for autoscaling"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child == "serve":
            result = one_serve(args)
        else:
            replicas, _, mode = args.child.partition(":")
            result = one_ray(args, int(replicas), mode)
        print(json.dumps(result))
        return 0
    if not (args.bundle / "voice.json").exists():
        print(f"no bundle at {args.bundle}: see benchmarks/backends.py", file=sys.stderr)
        return 1
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, {args.clients} clients, {args.duration:g} s "
          "per phase, full-size synthetic voice", flush=True)  # fmt: skip
    rows = [("yomiage serve (2 threads)", run_child(args, "serve"))]
    print(json.dumps(rows[-1][1]), flush=True)
    for n in [int(x) for x in args.replicas.split(",")]:
        rows.append((f"Ray Serve, {n} replica(s) x 1 thread", run_child(args, str(n))))
        print(json.dumps(rows[-1][1]), flush=True)
    base = float(rows[0][1]["req_per_s"])  # type: ignore[arg-type]
    print("\n| configuration | req/s | vs serve | p50 (s) | p95 (s) | failed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in rows:
        print(f"| {name} | {r['req_per_s']:.2f} | {float(r['req_per_s']) / base:.2f}x "  # type: ignore[arg-type]
              f"| {r['p50_s']:.2f} | {r['p95_s']:.2f} | {r['lost']} |")  # fmt: skip
    if not args.no_autoscale:
        scaled = run_child(args, "2:autoscale")
        print("\nautoscaling (min 1, max 2 replicas, Serve's default delays):")
        print(json.dumps(scaled, indent=1), flush=True)
    if not args.no_fault:
        fault = run_child(args, "2:fault")
        print("\nfault (2 replicas, one SIGKILLed, clients retry once):")
        print(json.dumps(fault, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
