"""The server's memory under mixed load: does the worker hold its plan's budget?
(issue 49 item 9, issue 48 item 5)

Run: .venv/bin/python benchmarks/server_memory.py BUNDLE OUT.json --cache DIR
         [--chars 1500] [--memory-budget-mb 1000] [--plan-measure 0|1] [--src SRC]

Starts `yomiage serve` on 127.0.0.1 with BUNDLE (a full-size bundle with its BERT
beside it), then at once: one long /tts stream and, 5 s later, one long OpenAI `wav`
with `stream: false` (each `--chars` characters), and two clients of short requests
(OpenAI `pcm` stream, /tts whole, VOICEVOX /audio_query + /synthesis, in turn, 2 s
apart) until both long ones end. Samples VmRSS and VmHWM of the server and its worker
every 0.5 s. The plan is what the cache `--cache` gives (the one shipped for the CPU
family where it holds none); `--plan-measure 0` forces the fixed plan, and the server
never measures while this runs (`YOMIAGE_PLAN_MEASURE` as given). Nothing but
127.0.0.1 is contacted.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

PARA = (
    "今日はいい天気ですね。午後から公園へ散歩に出かけましょう。駅前の本屋で新しい小説を買って、"
    "喫茶店でゆっくり読むのも楽しそうです。夕方には友達と待ち合わせをして、近くの店で晩ご飯を食べる予定です。"
)
SHORT = "今日はいい天気ですね。午後から公園へ散歩に出かけましょう。"


def rss(pid):
    out = {}
    pids = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            s = Path(f"/proc/{p}/status").read_text()
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
        except OSError:
            continue
        now = int(re.search(r"VmRSS:\s+(\d+)", s).group(1)) / 1024
        hwm = int(re.search(r"VmHWM:\s+(\d+)", s).group(1)) / 1024
        out[p] = (now, hwm, cmd)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("out")
    ap.add_argument("--src")
    ap.add_argument("--chars", type=int, default=1500)
    ap.add_argument("--memory-budget-mb", type=int, default=1000)
    ap.add_argument("--plan-measure", choices=("0", "1"), default=None)
    ap.add_argument("--cache", required=True)
    a = ap.parse_args()
    env = dict(os.environ, YOMIAGE_CACHE=a.cache, HF_HUB_OFFLINE="1")
    if a.plan_measure is not None:
        env["YOMIAGE_PLAN_MEASURE"] = a.plan_measure
    if a.src:
        env["PYTHONPATH"] = a.src
    cmd = [
        sys.executable,
        "-m",
        "yomiage",
        "serve",
        "--model",
        f"full={a.bundle}",
        "--port",
        "0",
        "--max-chars",
        "5000",
        "--memory-budget-mb",
        str(a.memory_budget_mb),
        "--no-access-log",
        "--voice-alias",
        "alloy=full",
    ]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    url = None
    log = []
    while url is None:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit("server died: " + "".join(log))
        log.append(line)
        m = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        if m:
            url = m.group(1)
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    t0 = time.time()
    while True:
        try:
            if httpx.get(url + "/ready", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    ready = time.time() - t0
    plans = json.dumps(httpx.get(url + "/ready", timeout=5).json().get("plans"), ensure_ascii=False)
    samples = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            samples.append((time.time() - t0, rss(proc.pid)))
            time.sleep(0.5)

    threading.Thread(target=sampler, daemon=True).start()
    idle = rss(proc.pid)
    long_text = (PARA * 100)[: a.chars]
    results = []
    lock = threading.Lock()

    def record(kind, status, secs):
        with lock:
            results.append((kind, status, round(secs, 1)))

    def long_stream():
        s = time.time()
        with (
            httpx.Client(timeout=None) as h,
            h.stream("POST", url + "/tts", json={"voice": "full", "text": long_text}) as r,
        ):
            for _ in r.iter_bytes():
                pass
            record("long_tts_stream", r.status_code, time.time() - s)

    def long_whole():
        time.sleep(5)
        s = time.time()
        with httpx.Client(timeout=None) as h:
            r = h.post(
                url + "/v1/audio/speech",
                json={
                    "model": "tts-1",
                    "voice": "alloy",
                    "input": long_text,
                    "response_format": "wav",
                    "stream": False,
                },
            )
            record("long_openai_whole", r.status_code, time.time() - s)

    done = threading.Event()

    def shorts(n):
        with httpx.Client(timeout=None) as h:
            style = h.get(url + "/speakers").json()[0]["styles"][0]["id"]
            i = 0
            time.sleep(10 + 3 * n)
            while not done.is_set():
                s = time.time()
                kind = ["openai_pcm", "tts_whole", "voicevox"][(i + n) % 3]
                try:
                    if kind == "openai_pcm":
                        with h.stream(
                            "POST",
                            url + "/v1/audio/speech",
                            json={
                                "model": "tts-1",
                                "voice": "alloy",
                                "input": SHORT,
                                "response_format": "pcm",
                            },
                        ) as r:
                            for _ in r.iter_bytes():
                                pass
                    elif kind == "tts_whole":
                        r = h.post(
                            url + "/tts", json={"voice": "full", "text": SHORT, "stream": False}
                        )
                    else:
                        q = h.post(url + "/audio_query", params={"speaker": style, "text": SHORT})
                        r = (
                            h.post(
                                url + "/synthesis",
                                params={"speaker": style},
                                content=q.content,
                                headers={"content-type": "application/json"},
                            )
                            if q.status_code == 200
                            else q
                        )
                    record(kind, r.status_code, time.time() - s)
                except httpx.HTTPError as exc:
                    record(kind, type(exc).__name__, time.time() - s)
                i += 1
                time.sleep(2)

    longs = [threading.Thread(target=long_stream), threading.Thread(target=long_whole)]
    others = [threading.Thread(target=shorts, args=(n,)) for n in range(2)]
    for t in longs + others:
        t.start()
    for t in longs:
        t.join()
    done.set()
    for t in others:
        t.join()
    time.sleep(2)
    stop.set()
    metrics = httpx.get(url + "/metrics").text
    end = rss(proc.pid)
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    # peaks per role: the server (proc.pid) and its worker (a multiprocessing child)
    peak = {}
    for _, snap in samples:
        for p, (now, hwm, cmd) in snap.items():
            role = (
                "server"
                if p == proc.pid
                else ("worker" if "spawn_main" in cmd or "multiprocessing" in cmd else cmd[:40])
            )
            cur = peak.setdefault(role, [0, 0])
            cur[0] = max(cur[0], now)
            cur[1] = max(cur[1], hwm)
    plan = [line.strip() for line in log if "peak" in line or "plan" in line.lower()][:5]
    out = {
        "ready_s": round(ready, 1),
        "idle": {str(k): v[:2] for k, v in idle.items()},
        "peaks_rss_hwm": peak,
        "results": results,
        "plan_lines": [*plan, plans],
        "metrics": [
            line
            for line in metrics.splitlines()
            if line.startswith(("yomiage_errors_total", "yomiage_rejected"))
        ],
        "end": {str(k): v[:2] for k, v in end.items()},
        "samples": [
            (round(t, 1), {str(k): round(v[0]) for k, v in s.items()}) for t, s in samples[::4]
        ],
    }
    Path(a.out).write_text(json.dumps(out, ensure_ascii=False, indent=1))
    print(
        json.dumps(
            {k: out[k] for k in ("ready_s", "idle", "peaks_rss_hwm", "plan_lines", "metrics")},
            ensure_ascii=False,
            indent=1,
        )
    )
    from collections import Counter

    print(Counter((k, s) for k, s, _ in results))


main()
